"""Energy per transaction: measured where the machine exposes RAPL counters, modelled elsewhere,
and always labelled as which.

Measured. Intel's RAPL counters (`/sys/class/powercap/intel-rapl:N/energy_uj`, one per CPU
package; AMD's kernels expose theirs under the same name) count the microjoules a package used.
A local run reads them twice a second while it runs (`EnergyMeter`, saved as `energy.json`
beside the logs); the packages' energy over the steady window, whatever ran on them (nodes,
clients, the harness), over the window's seconds is their mean power, and that over the run's
delivered throughput is the energy per transaction. A counter wraps at `max_energy_range_uj`;
one reading apart, it wrapped at most once.

Modelled. Without counters (a VM, a remote host), the power of each machine the run measured is
modelled from its CPU use as Cloud Carbon Footprint does for AWS: `MIN_WATTS` per vCPU idle plus
`MAX_WATTS - MIN_WATTS` per vCPU busy (its coefficients, the average over the processors AWS
uses; CCF's methodology page cites their source, SPECpower results). CPU only: memory, disks and
the network are left out, so the model errs low, and a real processor's curve is not a line.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..counters import Window, value_at
from .usage import Resources

POWERCAP = Path("/sys/class/powercap")
ENERGY_FILE = "energy.json"
MIN_WATTS = 0.74
MAX_WATTS = 3.5
MEASURED = "measured"
MODELLED = "modelled"


@dataclass(frozen=True)
class Energy:
    joules_per_tx: float
    watts: float
    # MEASURED (RAPL) or MODELLED (CPU use times CCF's coefficients).
    source: str
    # What the figure covers, in words.
    scope: str

    @property
    def tx_per_joule(self) -> float:
        return 1 / self.joules_per_tx if self.joules_per_tx > 0 else 0.0


def packages(root: Path = POWERCAP) -> list[Path]:
    """The RAPL package domains (`intel-rapl:N`; their subdomains `intel-rapl:N:M` are parts of
    them and not counted again)."""
    try:
        return sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1 and p.is_dir())
    except OSError:
        return []


def read_counters(root: Path = POWERCAP) -> dict[str, dict[str, int]]:
    """Each package's counter and its range (µJ); empty where none can be read (no RAPL, or
    not readable: recent kernels let only root read them)."""
    counters = {}
    for package in packages(root):
        try:
            energy = int((package / "energy_uj").read_text().strip())
            span = int((package / "max_energy_range_uj").read_text().strip())
        except (OSError, ValueError):
            return {}
        counters[package.name] = {"uj": energy, "range": span}
    return counters


class EnergyMeter:
    """Reads the RAPL counters every `interval` seconds from `start` to `stop`, in a thread of
    its own, and saves the readings (`energy.json`): the analysis takes the energy of exactly
    the run's steady window from them. Does nothing on a machine without counters."""

    def __init__(self, root: Path = POWERCAP, interval: float = 0.5) -> None:
        self.root, self.interval = root, interval
        self.readings: list[dict[str, object]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not read_counters(self.root):
            return
        self._thread = threading.Thread(target=self._run, name="energy-meter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            counters = read_counters(self.root)
            if counters:
                self.readings.append({"time_ms": time.time() * 1000, "counters": counters})
            if self._stop.wait(self.interval):
                return

    def stop(self, log_dir: Path) -> None:
        """Stops reading and saves the readings, if there were any."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if len(self.readings) >= 2:
            (log_dir / ENERGY_FILE).write_text(json.dumps({"readings": self.readings}))


def joules_series(log_dir: Path) -> list[tuple[float, float]]:
    """(time in ms, joules since the first reading) over every package, each counter unwrapped
    (one reading apart, it wrapped at most once); empty without readings."""
    try:
        readings = json.loads((log_dir / ENERGY_FILE).read_text())["readings"]
        series: list[tuple[float, float]] = []
        total, previous = 0.0, None
        for reading in readings:
            counters = reading["counters"]
            if previous is not None:
                for name, now in counters.items():
                    used = int(now["uj"]) - int(previous[name]["uj"])
                    total += (used + (int(now["range"]) if used < 0 else 0)) / 1e6
            series.append((float(reading["time_ms"]), total))
            previous = counters
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return series


def measured_watts(log_dir: Path, window: Window) -> float | None:
    """The packages' mean power over the window, interpolated between readings; None without
    readings that span it."""
    series = joules_series(log_dir)
    if len(series) < 2 or series[0][0] > window.start_ms or series[-1][0] < window.end_ms:
        return None
    records = [{"time_ms": t, "joules": j} for t, j in series]
    start = value_at(records, ("joules",), window.start_ms)
    end = value_at(records, ("joules",), window.end_ms)
    if start is None or end is None or window.seconds <= 0:
        return None
    return (end - start) / window.seconds


def modelled_watts(resources: Resources | None) -> float | None:
    """Each machine's vCPUs idle, and the cores it used busy (CCF's line)."""
    if resources is None:
        return None
    # A node's budget (`--node-cpus`) is a share of this machine, already counted with it; in a
    # dilated run the nodes are the machines emulated (of `--vcpus` each), this one is not.
    dilated = resources.dilation > 1
    machines = [m for m in resources.machines if m.budget == dilated]
    watts = 0.0
    for machine in machines:
        if machine.cores is None or machine.cpu_used is None:
            return None
        watts += machine.cores * MIN_WATTS + machine.cpu_used * (MAX_WATTS - MIN_WATTS)
    return watts if machines else None


def energy_of(
    log_dir: Path, window: Window, resources: Resources | None, tps: float
) -> Energy | None:
    """Energy per transaction delivered over the window: measured if the run read RAPL, else
    modelled."""
    if tps <= 0:
        return None
    watts = measured_watts(log_dir, window)
    if watts is not None:
        scope = "RAPL packages of this machine over the window: nodes, clients and all else on it"
        return Energy(watts / tps, watts, MEASURED, scope)
    watts = modelled_watts(resources)
    if watts is None:
        return None
    over = "the machines the run measured"
    if resources is not None and resources.dilation > 1:
        over = f"the nodes emulated (dilated ×{resources.dilation}; clients left out)"
    scope = (
        f"a model, not a measurement: {MIN_WATTS} W per vCPU idle, {MAX_WATTS} W busy (Cloud"
        f" Carbon Footprint's AWS coefficients), CPU only, over {over}"
    )
    return Energy(watts / tps, watts, MODELLED, scope)

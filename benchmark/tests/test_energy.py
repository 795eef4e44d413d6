"""Energy per transaction (`analysis/resources/energy.py`): RAPL counters read from a faked
powercap tree (subdomains left out, a wrapped counter unwrapped, the window's energy
interpolated), and the model where there are none, labelled as one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from benchmark.analysis.counters import Window
from benchmark.analysis.resources.energy import (
    ENERGY_FILE,
    MAX_WATTS,
    MEASURED,
    MIN_WATTS,
    MODELLED,
    EnergyMeter,
    energy_of,
    measured_watts,
    read_counters,
)
from benchmark.analysis.resources.usage import Machine, Resources, RoleUsage


def fake_powercap(root: Path, packages: dict[str, int], span: int = 10**12) -> None:
    for name, energy in packages.items():
        domain = root / name
        domain.mkdir(parents=True, exist_ok=True)
        (domain / "energy_uj").write_text(f"{energy}\n")
        (domain / "max_energy_range_uj").write_text(f"{span}\n")
        (domain / "name").write_text("package\n")


def test_only_packages_are_read_not_their_subdomains(tmp_path: Path) -> None:
    fake_powercap(tmp_path, {"intel-rapl:0": 5, "intel-rapl:1": 7, "intel-rapl:0:0": 3})
    assert read_counters(tmp_path) == {
        "intel-rapl:0": {"uj": 5, "range": 10**12},
        "intel-rapl:1": {"uj": 7, "range": 10**12},
    }


def test_a_machine_without_counters_reads_none_and_saves_nothing(tmp_path: Path) -> None:
    assert read_counters(tmp_path / "absent") == {}
    meter = EnergyMeter(root=tmp_path / "absent", interval=0.01)
    meter.start()
    meter.stop(tmp_path)
    assert not (tmp_path / ENERGY_FILE).exists()


def test_the_meter_reads_while_the_run_goes_and_saves_its_readings(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    fake_powercap(root, {"intel-rapl:0": 0})
    meter = EnergyMeter(root=root, interval=0.01)
    meter.start()
    deadline = time.monotonic() + 5
    while len(meter.readings) < 3 and time.monotonic() < deadline:
        fake_powercap(root, {"intel-rapl:0": 1_000_000 * (len(meter.readings) + 1)})
        time.sleep(0.01)
    meter.stop(tmp_path)
    meter.stop(tmp_path)  # a second stop changes nothing
    saved = json.loads((tmp_path / ENERGY_FILE).read_text())["readings"]
    assert len(saved) >= 3
    assert saved[-1]["counters"]["intel-rapl:0"]["uj"] > saved[0]["counters"]["intel-rapl:0"]["uj"]


def _readings(log_dir: Path, points: list[tuple[float, int]], span: int = 10**12) -> None:
    readings = [
        {"time_ms": t, "counters": {"intel-rapl:0": {"uj": uj, "range": span}}} for t, uj in points
    ]
    (log_dir / ENERGY_FILE).write_text(json.dumps({"readings": readings}))


def test_the_windows_energy_is_interpolated_and_a_wrapped_counter_unwrapped(
    tmp_path: Path,
) -> None:
    span = 50_000_000
    # 10 J in the first second, 20 J in the next, the counter wrapping at 50 J on the way.
    _readings(tmp_path, [(0, 35_000_000), (1000, 45_000_000), (2000, 15_000_000)], span)
    assert measured_watts(tmp_path, Window(500, 1500, 0)) == pytest.approx(15.0)
    # A window the readings do not span is not measured.
    assert measured_watts(tmp_path, Window(500, 2500, 0)) is None


def _resources(cores: float, used: float) -> Resources:
    usage = RoleUsage(processes=1, cpu_cores=used, rss_mib=None)
    machines = (
        Machine("this machine", cores, used),
        # A node's budget is part of this machine: not counted twice.
        Machine("node-0", 0.5, 0.4, budget=True),
    )
    return Resources(nodes=usage, clients=usage, machines=machines)


def test_readings_make_a_measured_figure_and_their_absence_a_modelled_one(
    tmp_path: Path,
) -> None:
    window = Window(0, 1000, 0)
    modelled = energy_of(tmp_path, window, _resources(2.0, 1.5), tps=1_000)
    assert modelled is not None
    assert modelled.source == MODELLED
    assert modelled.watts == pytest.approx(2 * MIN_WATTS + 1.5 * (MAX_WATTS - MIN_WATTS))
    assert modelled.joules_per_tx == pytest.approx(modelled.watts / 1_000)
    assert "a model, not a measurement" in modelled.scope
    _readings(tmp_path, [(0, 0), (1000, 30_000_000)])
    measured = energy_of(tmp_path, window, _resources(2.0, 1.5), tps=1_000)
    assert measured is not None
    assert (measured.source, measured.watts) == (MEASURED, pytest.approx(30.0))
    assert measured.tx_per_joule == pytest.approx(1_000 / 30)
    assert energy_of(tmp_path, window, None, tps=0) is None

"""A fixed-work speed probe of the machine, run before every configuration of an experiment and
after the last, so a page shows how fast the machine was while its runs happened: a machine
drifts (a shared host's neighbours, its clock, its caches), and two configurations measured
minutes apart may have had different machines without anyone noticing.

The probe is the work the pipeline does most of: SHA-256 over 1 MiB buffers and ed25519
signatures (`cryptography`, which Fabric's SSH stack brings), in one process per core at once
for a fixed time each, summed over the cores. With it, the 1-minute load average: what else ran
while the configuration did (taken after it, so it covers its runs).
"""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

# Seconds each core spends on each kind of work, full and `--quick`.
SECONDS = 2.0
QUICK_SECONDS = 0.2
BLOCK = b"\x5a" * (1 << 20)


@dataclass(frozen=True)
class Probe:
    # Summed over every core.
    sha256_mb_per_s: float
    signatures_per_s: float
    # The 1-minute load average when the probe ran.
    load: float


def _hashing(seconds: float) -> float:
    """MB of SHA-256 one core does in `seconds`, per second."""
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        hashlib.sha256(BLOCK).digest()
        done += len(BLOCK)
    return done / 1e6 / elapsed


def _signing(seconds: float) -> float:
    """ed25519 signatures of a 32-byte message one core makes in `seconds`, per second."""
    key = Ed25519PrivateKey.generate()
    message = b"\x01" * 32
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        key.sign(message)
        done += 1
    return done / elapsed


class Prober:
    """A process per core, started once for an experiment (starting them costs a second or
    more, each probe only its work): `probe` runs on all of them at once."""

    def __init__(self, seconds: float = SECONDS) -> None:
        self.seconds = seconds
        self.cores = os.cpu_count() or 1
        # Spawned, not forked: the harness has threads (process watchers), and a forked child
        # of a threaded process may inherit a lock held mid-operation.
        self._pool = ProcessPoolExecutor(self.cores, mp_context=get_context("spawn"))

    def probe(self) -> Probe:
        """Hashing on every core at once, then signing."""
        hashing = sum(self._pool.map(_hashing, [self.seconds] * self.cores))
        signing = sum(self._pool.map(_signing, [self.seconds] * self.cores))
        return Probe(sha256_mb_per_s=hashing, signatures_per_s=signing, load=os.getloadavg()[0])

    def close(self) -> None:
        self._pool.shutdown()

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def probe(seconds: float = SECONDS) -> Probe:
    """One probe on every core, with processes of its own."""
    with Prober(seconds) as prober:
        return prober.probe()


def drift(probes: list[Probe]) -> list[str]:
    """What the probes of one experiment say of the machine: each figure's range and how far
    apart its extremes are."""
    if not probes:
        return []
    lines = []
    for name, values, unit in (
        ("SHA-256", [p.sha256_mb_per_s for p in probes], "MB/s"),
        ("ed25519 signing", [p.signatures_per_s for p in probes], "signatures/s"),
    ):
        low, high = min(values), max(values)
        apart = (high - low) / low if low > 0 else 0.0
        lines.append(
            f"- {name} on every core: {low:,.0f}-{high:,.0f} {unit} over {len(probes)} probes,"
            f" {apart:.0%} apart."
        )
    loads = [p.load for p in probes]
    lines.append(f"- 1-minute load average at the probes: {min(loads):.2f}-{max(loads):.2f}.")
    return lines

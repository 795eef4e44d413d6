"""The clock of a run's processes, as the harness reads and waits on it.

Undilated, it is the real clock. A dilated run (`fab local --dilation=K`) slows every clock of
its nodes and clients K times (`node run --dilation K`, `plumbing::clock`): a second of theirs
lasts K real seconds, and their wall clocks read the real time at one origin the harness chooses
and hands to each (`--dilation-origin-ms`), so that the timestamps they write compare. Whatever
the harness times against the processes goes through this clock too: the fault schedule (a
crash at 4 s is 4 s of the processes' time), the clients' planned start, how long the processes
may take to boot, to send and to stop, and the progress line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunClock:
    """Real time (`factor` 1), or real time slowed `factor` times from `origin` (Unix seconds,
    where both read the same)."""

    factor: int = 1
    origin: float = 0.0
    real: Callable[[], float] = field(default=time.time, compare=False, repr=False)

    @classmethod
    def starting_now(cls, factor: int) -> RunClock:
        """A run's clock whose processes agree with the real clock now."""
        return cls(factor=factor, origin=time.time())

    @property
    def dilated(self) -> bool:
        return self.factor > 1

    def now(self) -> float:
        """The processes' wall clock, in Unix seconds."""
        return self.virtual(self.real())

    def virtual(self, real_seconds: float) -> float:
        """The processes' reading of a real Unix time."""
        return self.origin + (real_seconds - self.origin) / self.factor

    def stretch(self, seconds: float) -> float:
        """How many real seconds `seconds` of the processes' time last."""
        return seconds * self.factor

    def shrink(self, real_seconds: float) -> float:
        """How many of the processes' seconds `real_seconds` real seconds are."""
        return real_seconds / self.factor

    def sleep(self, seconds: float) -> None:
        """Waits `seconds` of the processes' time."""
        if seconds > 0:
            time.sleep(self.stretch(seconds))

    def origin_ms(self) -> int:
        return round(self.origin * 1000)

    def label(self) -> str:
        """`dilated ×K`, for every figure a dilated run prints; empty when real."""
        return f"dilated ×{self.factor}" if self.dilated else ""

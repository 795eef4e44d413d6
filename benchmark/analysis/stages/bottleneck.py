"""The verdict of a run: the component that limited it, the rule that named it, and the numbers.

Its own module so that every rule (`verdict.py`'s queue and blocked-time rules, `cpu_bound.py`'s
machine-wide CPU rule) builds the same thing without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The rule named when nothing inside the system limited the run.
KEEPS_UP_RULE = "keeps up"
CPU_BOUND_RULE = "CPU-bound"


@dataclass(frozen=True)
class Bottleneck:
    stage: str
    rule: str
    explanation: str
    evidence: dict[str, float]
    # Further lines worth printing under the verdict (a stage that costs nearly as much).
    notes: tuple[str, ...] = field(default=())

    @property
    def kept_up(self) -> bool:
        """The system delivered what the clients sent: no stage limited the run."""
        return self.rule == KEEPS_UP_RULE

"""Function-level profiles of the nodes (`--profile`): the functions that take the most samples.

Each profiled process writes `profile.folded` (one line per distinct stack: `root;...;leaf N`,
N samples) and `flamegraph.svg` into its own directory (`<logs>/profile-node-i/`). The samples
of all nodes are added up, since every node runs the same code on the same transactions.
A function's *self* samples are those where it is the leaf (it was running); its *inclusive*
samples are those where it is anywhere on the stack (it or something it called was running),
counted once per stack even when it recurses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FOLDED = "profile.folded"
FLAMEGRAPH = "flamegraph.svg"
TOP = 15
# A profiled process writes its flame graph after SIGTERM: it gets this long before SIGKILL.
PROFILE_GRACE = 60.0


@dataclass(frozen=True)
class FunctionShare:
    function: str
    self_samples: int
    self_share: float
    inclusive_samples: int
    inclusive_share: float


@dataclass(frozen=True)
class ProcessProfile:
    """One process's samples by the thread they were taken on (a stack's first frame): what a
    page shows of a profiled node, kept in the summary so that a page written again from its
    record, without the logs, shows it too."""

    name: str
    samples: int
    threads: dict[str, int]


@dataclass(frozen=True)
class ProfileSummary:
    samples: int
    top: tuple[FunctionShare, ...]
    flamegraphs: tuple[str, ...]
    # The first profiled process's (node 0's, or the one process's).
    first: ProcessProfile | None = None


def process_profile(name: str, stacks: Iterable[tuple[list[str], int]]) -> ProcessProfile:
    threads: Counter[str] = Counter()
    for frames, count in stacks:
        threads[frames[0]] += count
    return ProcessProfile(name, sum(threads.values()), dict(sorted(threads.items())))


def parse_folded(lines: Iterable[str]) -> list[tuple[list[str], int]]:
    """(frames, samples) per well-formed line; a line without a trailing count is skipped."""
    stacks = []
    for line in lines:
        stack, _, count = line.strip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        stacks.append((stack.split(";"), int(count)))
    return stacks


def top_functions(stacks: Iterable[tuple[list[str], int]], top: int = TOP) -> ProfileSummary:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for frames, count in stacks:
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    ranked = sorted(own.items(), key=lambda item: (-item[1], item[0]))[:top]
    share = 1.0 / total if total > 0 else 0.0
    return ProfileSummary(
        samples=total,
        top=tuple(
            FunctionShare(
                function=name,
                self_samples=count,
                self_share=count * share,
                inclusive_samples=inclusive[name],
                inclusive_share=inclusive[name] * share,
            )
            for name, count in ranked
        ),
        flamegraphs=(),
    )


def load_profiles(log_dir: Path, top: int = TOP) -> ProfileSummary | None:
    """The merged top functions of every `profile-*/profile.folded` under a run's logs."""
    folded = sorted(log_dir.glob(f"profile-*/{FOLDED}"))
    if not folded:
        return None
    by_process = [
        parse_folded(path.read_text(encoding="utf-8", errors="replace").splitlines())
        for path in folded
    ]
    summary = top_functions((stack for stacks in by_process for stack in stacks), top)
    graphs = tuple(str(p) for p in sorted(log_dir.glob(f"profile-*/{FLAMEGRAPH}")))
    first = process_profile(folded[0].parent.name, by_process[0])
    return ProfileSummary(summary.samples, summary.top, graphs, first)

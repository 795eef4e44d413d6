"""The one rule by which a page projects: the run summary's capacity projection
(`analysis/stages/projection.py`, for `--project-cores` cores, 4 unless a run says otherwise) of
the runs a page reports at one point (a capacity's runs on the modes page; each `--exec`'s runs
on the parallel page), their median, and of no run at another rate; always labelled as a
projection, with what the runs said of how it errs. What nodes of more cores deliver is measured
by the scale experiment (its virtual-CPUs axis), not projected."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..analysis.run_summary import Summary


def label(cores: str) -> str:
    """The sentence that says what a page's projection column is."""
    return (
        "The projection is not a measurement: it is the summary's capacity projection"
        f" (`benchmark/analysis/stages/projection.py`) for one node of {cores} cores, the median"
        " over the runs of this point's, from the CPU per transaction each stage measured in"
        " them, the rule every page projects by. Nodes of 4 to 36 virtual CPUs are measured, not"
        " projected, on the [scale page](scale.md) (its virtual-CPUs axis). How the runs'"
        " projections err, as they say:"
    )


def caveats(runs: Mapping[str, Sequence[Summary]]) -> list[str]:
    """Each caveat the runs' projections carry, once, with the labels of the runs that carry
    it."""
    found: dict[str, list[str]] = {}
    for name, summaries in runs.items():
        for summary in summaries:
            caveat = summary.projection.caveat if summary.projection else None
            if caveat and name not in found.setdefault(caveat, []):
                found[caveat].append(name)
    return [f"- {caveat} ({', '.join(names)})." for caveat, names in found.items()]

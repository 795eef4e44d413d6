"""`scale`, `scale-cores` and `scale-cores-36`: the report's 48 nodes, 4 to 36 vCPUs and three
regions, measured on this machine as a cluster in slow motion (`fab local --dilation=K
--vcpus=V`, docs/local.md), and a model of the committee judged on every point it was not
fitted on.

* Committee (Fig 1.1, 1.2): `hotcrypto` at 4, 8, 16, 32 and 48 nodes of one virtual CPU, and
  `hotstuff` to 40 (48 saturated nodes did not fit this machine's memory: `points.py`), at the
  node's default uncommitted bound.
* Virtual CPUs per node (Fig 1.5): 4 nodes of 4, 8, 16 and 36 for `hotcrypto`, `hotmove`
  executing sequentially and under Block-STM, on two pages of their own (`scale-cores`, and
  `scale-cores-36`: at K = 81 its nodes of 36 take as long as the rest of the axis).
* Regions (Fig 1.8, 1.9): `hotstuff` at 4 and 16 nodes across the report's three regions,
  against the same committee in one.

Nodes in one region are joined by links of `dilation.LINK_DELAY_MS` one way, as the gate judged
dilation with. Each point runs at the smallest factor K that fits it (`dilation.dilation_for`),
`REPEATS` times, at one rate above what it orders, so that it delivers its capacity; the page
says where a point delivered all it was asked instead (a lower bound). The model
(`analysis/stages/model.py`) is fitted per family on the points `judge.FITTED` names and judged
on all the others by a rule fixed before the runs (`judge.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...errors import HarnessError
from ..experiment import Experiment, Outcome
from ..page import Page
from ..records import read_beside_page
from .axes import (
    committee_section,
    cores_section,
    model_section,
    regions_section,
    runs_section,
)
from .gate import read_gate
from .judge import checks, models
from .points import Measured, configurations_of, measured

REPO_ROOT = Path(__file__).resolve().parents[3]


def _measured(outcomes: Sequence[Outcome], page: Page) -> list[Measured]:
    """The points of `outcomes`, and how each ran written first if any did."""
    points = measured(outcomes, REPO_ROOT)
    if points:
        runs_section(points, read_gate(REPO_ROOT), page)
    return points


def _write_committee(outcomes: Sequence[Outcome], page: Page) -> None:
    points = _measured(outcomes, page)
    if not points:
        return
    fitted = models(points)
    found = checks(points)
    committee_section(points, found, fitted, page)
    regions_section(points, page)
    model_section(found, fitted, page)


def _write_cores(points: Sequence[Measured], page: Page) -> None:
    fitted = models(points)
    found = checks(points)
    cores_section(points, found, page)
    model_section(found, fitted, page)


def _write_cores_small(outcomes: Sequence[Outcome], page: Page) -> None:
    if points := _measured(outcomes, page):
        _write_cores(points, page)


SCALE = Experiment(
    name="scale",
    title="Scale: 48 nodes and three regions, in slow motion",
    question=(
        "How do throughput and a node's costs change with the committee (to 48 nodes) and"
        " across three regions, measured on this machine as a dilated cluster? Does hotstuff"
        " hold its throughput to 48 nodes, as the report's did, and if not, what holds it back?"
        " Does a model of the committee predict the points it was not fitted on?"
    ),
    configurations=configurations_of("scale"),
    write=_write_committee,
)

SCALE_CORES = Experiment(
    name="scale-cores",
    title="Scale: 4 to 16 virtual CPUs a node, in slow motion",
    question=(
        "How does throughput change with the virtual CPUs of a node (4 to 16), measured on this"
        " machine as a dilated cluster? Is a parallel VM any help where CPUs are to spare (the"
        " report's Fig 1.5)? Does the model predict the points it was not fitted on?"
    ),
    configurations=configurations_of("scale-cores"),
    write=_write_cores_small,
)

# The smaller nodes the page of 36 reads from the scale-cores page's committed record.
SMALLER = Path("docs/results/scale-cores/record.json")


def _write_cores_large(outcomes: Sequence[Outcome], page: Page) -> None:
    points = _measured(outcomes, page)
    if not points:
        return
    try:
        record, smaller = read_beside_page(REPO_ROOT / SMALLER, SCALE_CORES, page.quick)
    except HarnessError as missing:
        page.add("", f"The smaller nodes are left out: {missing}.")
        _write_cores(points, page)
        return
    page.add(
        "",
        f"The nodes of fewer virtual CPUs are the [scale-cores page](scale-cores.md)'s, read"
        f" from its committed record (commit `{record.commit[:12]}`), so that the curve and the"
        " model span 4 to 36; the model is fitted on the points its rule names, which are"
        " theirs, and judged on the nodes of 36 it never saw.",
    )
    _write_cores([*measured(list(smaller.values()), REPO_ROOT), *points], page)


SCALE_CORES_36 = Experiment(
    name="scale-cores-36",
    title="Scale: nodes of 36 virtual CPUs, in slow motion",
    question=(
        "Do nodes of the report's largest size, 36 virtual CPUs, deliver more than those of 16,"
        " measured on this machine as a dilated cluster (K = 81)? Does a parallel VM help there,"
        " and does the model fitted on smaller nodes predict them?"
    ),
    configurations=configurations_of("scale-cores-36"),
    write=_write_cores_large,
)

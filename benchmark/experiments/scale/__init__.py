"""`scale`: the report's 48 nodes, 4 to 36 vCPUs and three regions, measured on this machine as
a cluster in slow motion (`fab local --dilation=K --vcpus=V`, docs/local.md), and a model of the
committee judged on every point it was not fitted on.

* Committee (Fig 1.1, 1.2): `hotstuff` and `hotcrypto` at 4, 8, 16, 32 and 48 nodes of one
  virtual CPU, the node's default uncommitted bound.
* Virtual CPUs per node (Fig 1.5): 4 nodes of 4, 8, 16 and 36 for `hotcrypto`, `hotmove`
  executing sequentially and under Block-STM.
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

from ..experiment import Experiment, Outcome
from ..page import Page
from .axes import (
    committee_section,
    cores_section,
    model_section,
    regions_section,
    runs_section,
)
from .judge import checks, models
from .points import configurations, measured

REPO_ROOT = Path(__file__).resolve().parents[3]


def write(outcomes: Sequence[Outcome], page: Page) -> None:
    points = measured(outcomes, REPO_ROOT)
    if not points:
        return
    fitted = models(points)
    found = checks(points)
    runs_section(points, page)
    committee_section(points, found, fitted, page)
    cores_section(points, found, page)
    regions_section(points, page)
    model_section(found, fitted, page)


SCALE = Experiment(
    name="scale",
    title="Scale: 48 nodes, 4 to 36 vCPUs and three regions, in slow motion",
    question=(
        "How do throughput and a node's costs change with the committee (to 48 nodes), with the"
        " virtual CPUs of a node (4 to 36) and across three regions, measured on this machine as"
        " a dilated cluster? Does hotstuff hold its throughput to 48 nodes, as the report's did,"
        " and if not, what holds it back? Does a model of the committee predict the points it"
        " was not fitted on?"
    ),
    configurations=configurations,
    write=write,
)

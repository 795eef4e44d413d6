"""The scale pages say, per point, what the dilation gate found for the configuration most like
it at the factor nearest the point's, from the gate's committed record."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.run_summary import Summary, summarize
from benchmark.experiments import Experiment, Outcome, dilation, scale
from benchmark.experiments.dilation import LINKS
from benchmark.experiments.page import Machine, Page
from benchmark.experiments.records import Record, save_beside_page
from benchmark.experiments.scale import SCALE_CORES, SCALE_CORES_36, gate
from benchmark.experiments.scale.points import (
    COMMITTEE,
    REGIONS,
    THREE_REGIONS,
    Spec,
)

from .synthetic import write_run
from .test_experiment_tables import shaped
from .test_experiments import table_with

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def one_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run is its own figure, under one measure named `x`."""
    monkeypatch.setattr(dilation, "MEASURES", {"x": (lambda run: run, 0)})


HOTSTUFF_LINKS_SATURATED = f"hotstuff, 4 x 0.4 vCPUs, {LINKS}, saturated"
HOTSTUFF_LINKS_KEPT_UP = f"hotstuff, 4 x 0.4 vCPUs, {LINKS}, kept up"
HOTCRYPTO_LINKS_KEPT_UP = f"hotcrypto, 4 x 0.4 vCPUs, {LINKS}, kept up"
FOUR_REGIONS = "hotstuff, four regions, 4 x 0.4 vCPUs"
RUNS = {
    "hotstuff, 4 x 0.4 vCPUs, saturated": {1: [100.0], 2: [100.0]},
    HOTSTUFF_LINKS_KEPT_UP: {1: [100.0], 2: [100.0]},
    HOTSTUFF_LINKS_SATURATED: {1: [100.0], 2: [100.0], 4: [100.0], 8: [100.0], 32: [150.0]},
    HOTCRYPTO_LINKS_KEPT_UP: {1: [100.0], 2: [100.0], 4: [104.0], 8: [118.0]},
    FOUR_REGIONS: {1: [100.0], 8: [80.0]},
}


def test_a_point_takes_the_gate_case_of_its_mode_and_placement_saturated_first() -> None:
    hotstuff = Spec(COMMITTEE, "hotstuff", 16, 1.0, 1)
    assert gate.gate_case(hotstuff, RUNS) == HOTSTUFF_LINKS_SATURATED
    # No saturated hotcrypto case with links ran: its placement outranks saturation.
    hotcrypto = Spec(COMMITTEE, "hotcrypto", 16, 1.0, 1)
    assert gate.gate_case(hotcrypto, RUNS) == HOTCRYPTO_LINKS_KEPT_UP
    regions = Spec(REGIONS, "hotstuff", 16, 1.0, 1, THREE_REGIONS)
    assert gate.gate_case(regions, RUNS) == FOUR_REGIONS
    assert gate.gate_case(Spec(COMMITTEE, "hotmove", 4, 4.0, 1), RUNS) is None


def test_the_nearest_factor_is_by_ratio_and_the_larger_on_a_tie() -> None:
    assert gate.nearest_factor(3, [2, 4, 8]) == 4
    assert gate.nearest_factor(10, [2, 4, 8, 16]) == 8
    assert gate.nearest_factor(28, [2, 4, 8, 16, 32]) == 32
    assert gate.nearest_factor(81, [2, 4, 8]) == 8
    assert gate.nearest_factor(4, [2, 8]) == 8  # 2 and 8 are both twice away


def test_a_point_reads_what_missed_at_the_gates_nearest_factor() -> None:
    spec = Spec(COMMITTEE, "hotstuff", 48, 1.0, 1)
    found = gate.standing(spec, 28, RUNS)
    assert found == gate.Standing(HOTSTUFF_LINKS_SATURATED, 32, ("x +50%",), beyond=False)
    assert found.text() == f"{HOTSTUFF_LINKS_SATURATED}, K = 32: x +50%"
    crypto = gate.standing(Spec(COMMITTEE, "hotcrypto", 4, 1.0, 1), 3, RUNS)
    assert crypto is not None
    assert crypto.text() == f"{HOTCRYPTO_LINKS_KEPT_UP}, K = 4: agrees"
    far = gate.standing(Spec(COMMITTEE, "hotcrypto", 48, 1.0, 1), 28, RUNS)
    assert far is not None
    assert far.beyond
    assert far.text() == f"{HOTCRYPTO_LINKS_KEPT_UP}, K = 8 (the largest tried): x +18%"


def test_the_line_names_the_k_the_gate_passed_with_links() -> None:
    line = gate.gate_line(RUNS)
    assert "passed K = 2, 4 for every configuration with links, of K = 2, 4, 8, 32" in line
    assert "beyond what the gate vouches for" in line
    assert "No record of the dilation gate" in gate.gate_line(None)


def test_without_a_committed_gate_record_no_point_is_vouched_for(tmp_path: Path) -> None:
    assert gate.read_gate(tmp_path) is None


def test_the_committed_gate_record_is_read() -> None:
    runs = gate.read_gate(REPO_ROOT)
    assert runs is not None
    assert {case.name for case in dilation.CASES} <= set(runs)


# -- the page of 36 reads the smaller nodes from the scale-cores page's record --------------------


def _outcomes(experiment: Experiment, base: Summary) -> list[Outcome]:
    """Every configuration of `experiment`, three runs each that delivered half the rate asked
    (saturated) on nodes that used their whole budget."""
    outcomes = []
    for configuration in experiment.configurations(False):
        rate = int(str(configuration.flags["rate"]))
        vcpus = float(str(configuration.flags["vcpus"]))
        run = shaped(
            base,
            rate=rate,
            delivered=rate / 2,
            node_cores=vcpus,
            rounds_per_s=50.0,
            dilation=int(str(configuration.flags["dilation"])),
        )
        outcomes.append(Outcome(configuration, [run] * 3))
    return outcomes


def _page_of_36(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, smaller_recorded: bool) -> str:
    """The page of 36 written in a checkout at `tmp_path`, with the scale-cores page's record
    committed there or not."""
    base = summarize(load_run(write_run(tmp_path / "run")), {"mode": "hotcrypto", "nodes": 4})
    if smaller_recorded:
        record = Record(Machine(2, "cpu", "Linux", (0.0, 0.0, 0.0)), "0123456789abcdef")
        smaller = tmp_path / "docs/results/scale-cores/record.json"
        save_beside_page(smaller, SCALE_CORES.name, False, record, _outcomes(SCALE_CORES, base))
    monkeypatch.setattr(scale, "REPO_ROOT", tmp_path)
    page = Page(name=SCALE_CORES_36.name, title="", directory=tmp_path / "out")
    SCALE_CORES_36.write(_outcomes(SCALE_CORES_36, base), page)
    return "\n".join(page.lines)


def test_the_page_of_36_takes_the_smaller_nodes_from_the_committed_record_of_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _page_of_36(tmp_path, monkeypatch, smaller_recorded=True)
    assert "read from its committed record (commit `0123456789ab`)" in text
    (cores,) = table_with(text, "verifier µs/tx")
    assert [(r["family"], r["vCPUs"]) for r in cores] == [
        (family, vcpus)
        for family in ("hotcrypto", "hotmove", "hotmove --exec=blockstm")
        for vcpus in ("4", "8", "16", "36")
    ]
    (model,) = table_with(text, "model tx/s")
    judged = {r["point"] for r in model if r[""] == "judged"}
    # The nodes of 36 are judged by models fitted on the smaller nodes' points.
    assert {f"cores: {f}, 4 x 36 vCPUs" for f in ("hotcrypto", "hotmove")} <= judged


def test_without_the_smaller_nodes_record_the_page_of_36_says_they_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _page_of_36(tmp_path, monkeypatch, smaller_recorded=False)
    assert "The smaller nodes are left out: no usable record of scale-cores's page" in text
    (cores,) = table_with(text, "verifier µs/tx")
    assert [r["vCPUs"] for r in cores] == ["36", "36", "36"]

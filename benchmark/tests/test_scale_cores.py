"""The cores axis of `scale` (4 nodes of 4 to 36 virtual CPUs): what its points are asked, how
their Move transfers leave a parallel executor room, and what its page says of Block-STM against
sequential execution."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from benchmark.analysis.run_summary import Summary
from benchmark.experiments import scale
from benchmark.experiments.measures import delivered
from benchmark.experiments.records import read_beside_page
from benchmark.experiments.scale import SCALE_CORES
from benchmark.experiments.scale import axes as scale_axes
from benchmark.experiments.scale.points import COMMITTEE, CORES, Measured, Spec, measured

from .test_experiment_tables import shaped

REPO_ROOT = Path(__file__).resolve().parents[2]


def _point(
    base: Summary, family: str, dest: str = "uniform", limited_by: str = "executor"
) -> Measured:
    run = replace(shaped(base, rate=100_000, delivered=90_000), config={"dest": dest})
    run = replace(run, bottleneck=replace(run.bottleneck, stage=limited_by))
    spec = Spec("cores", family, 4, 8.0, 100_000)
    return Measured(spec, (run,) * 3, dilation=19, speed=None, one_way_ms=1.0)


def test_the_cores_page_says_when_its_transfers_leave_block_stm_nothing_to_run(
    base: Summary,
) -> None:
    def point(family: str, dest: str) -> Measured:
        return _point(base, family, dest)

    def lines(dest: str) -> str:
        return "\n".join(
            scale_axes._parallel_lines(
                [point("hotmove", dest), point("hotmove --exec=blockstm", dest)]
            )
        )

    assert "Block-STM 90,000 against sequential 90,000" in lines("ring")
    assert "`--dest=ring`" in lines("ring")
    assert "contended_blocks" in lines("ring")
    assert "--dest=" not in lines("uniform")
    # A page whose smaller nodes come from another page's record may mix the two.
    mixed = scale_axes._parallel_lines(
        [point("hotmove", "ring"), point("hotmove --exec=blockstm", "uniform")]
    )
    assert any(
        line.startswith("- 1 of these 2 points' transfers pay `--dest=ring`") for line in mixed
    )


def test_the_pair_line_names_the_limiting_stage_once_when_both_agree(base: Summary) -> None:
    def line(blockstm: str, sequential: str) -> str:
        pair = [
            _point(base, "hotmove", limited_by=sequential),
            _point(base, "hotmove --exec=blockstm", limited_by=blockstm),
        ]
        return scale_axes._parallel_lines(pair)[0]

    assert line("executor", "executor").endswith("limiting: executor in both.")
    assert line("verifier", "executor").endswith(
        "limiting: verifier under Block-STM, executor sequential."
    )


def test_the_cores_axis_move_transfers_leave_room_for_a_parallel_executor() -> None:
    def flags(axis: str, family: str) -> dict[str, str | bool]:
        return dict(Spec(axis, family, 4, 8.0, 100_000).configuration(3, 6).flags)

    assert flags(CORES, "hotmove --exec=blockstm")["dest"] == "uniform"
    assert flags(CORES, "hotmove")["dest"] == "uniform", "the sequential pair pays alike"
    assert "dest" not in flags(CORES, "hotcrypto")
    assert "dest" not in flags(COMMITTEE, "hotmove")


def test_the_cores_points_ask_above_what_the_committed_page_delivered_but_not_far_above() -> None:
    """Each hotcrypto point is saturated (asked more than its committed runs delivered) without
    its clients signing many more transactions than it can send; the Move pair is asked alike."""
    _, recorded = read_beside_page(
        REPO_ROOT / "docs/results/scale-cores/record.json", SCALE_CORES, False
    )
    asked = {spec.label: spec.rate for spec in scale.points.SCALE_PAGES["scale-cores"](False)}
    for point in measured(list(recorded.values()), REPO_ROOT):
        if point.spec.family == "hotcrypto":
            ceiling = max(delivered(s) for s in point.runs)
            assert 1.2 * ceiling <= asked[point.spec.label] <= 2.0 * ceiling, point.spec.label
    for vcpus in (4, 8, 16, 36):
        sequential, blockstm = (
            [s.rate for s in scale.points.specs(False) if s.family == f and s.vcpus == vcpus]
            for f in ("hotmove", "hotmove --exec=blockstm")
        )
        assert sequential == blockstm

"""The tables and verdicts of the `modes`, `multi-region`, `faults`, `workloads` and `store`
experiments, drawn from synthetic summaries whose figures are set by hand (the real runs are in
test_experiments.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.analysis.audit.checks import AuditReport
from benchmark.analysis.audit.fault_report import FaultAnalysis
from benchmark.analysis.consensus.rounds import Rounds
from benchmark.analysis.run_summary import Summary
from benchmark.analysis.stages.projection import project
from benchmark.analysis.timelines import CatchUp, CommitsTimeline
from benchmark.experiments import (
    EXPERIMENTS,
    Configuration,
    Outcome,
    links,
    modes,
    multi_region,
    speedups,
    store,
    workloads,
)
from benchmark.experiments import fault_scenarios as faults
from benchmark.experiments.measures import capacity, common_rate, runs_span
from benchmark.experiments.page import Page
from benchmark.experiments.report_figures import CAPACITY
from benchmark.experiments.runner import prepare
from benchmark.experiments.scale import judge as scale_judge
from benchmark.experiments.scale.points import Measured, Spec
from benchmark.faults.events import FaultLog
from benchmark.faults.net_emulation import read_delay_matrix

from .conftest import REPO_ROOT, described


def shaped(
    summary: Summary,
    *,
    rate: int | None,
    delivered: float,
    mode: str = "hotcrypto",
    rounds_per_s: float | None = None,
    per_batch: float | None = None,
    node_cores: float | None = None,
    projected_us: float | None = None,
    executor_us: float | None = None,
    held_back: float = 0.0,
    **config: object,
) -> Summary:
    """`summary` as a run of `mode` asked for `rate` that delivered `delivered` tx/s, with the
    rounds, batch size, node CPU, projection, executor cost and the share of the run its mempools
    held their clients back given."""
    end_to_end = replace(summary.end_to_end, tps=delivered)
    # Nothing aborts: the executor got through what was delivered.
    stages = tuple(
        replace(row, batch_size=per_batch)
        if row.name == "consensus" and per_batch is not None
        else replace(
            row,
            throughput=delivered,
            us_per_tx=row.us_per_tx if executor_us is None else executor_us,
        )
        if row.name == "executor"
        else row
        for row in summary.stages
    )
    consensus = replace(summary.consensus, tps=delivered, bps=delivered * 200)
    rounds = (
        Rounds(rounds_per_s * 10, 0, held_back, 0, 10.0)
        if rounds_per_s is not None
        else summary.rounds
    )
    resources = summary.resources
    if node_cores is not None and resources is not None:
        resources = replace(resources, nodes=replace(resources.nodes, cpu_cores=node_cores))
    projection = project({"verifier": projected_us}, 4) if projected_us else summary.projection
    # The clients sent the rate asked, unhindered; a run without a rate has none.
    clients = (
        replace(summary.clients, target_tps=float(rate), sent_tps=float(rate), held_back_share=None)
        if rate is not None and summary.clients is not None
        else None
    )
    return replace(
        summary,
        clients=clients,
        config={**summary.config, "mode": mode, "rate": rate, **config},
        pipeline=described(mode),
        end_to_end=end_to_end,
        consensus=consensus,
        stages=stages,
        rounds=rounds,
        resources=resources,
        projection=projection,
    )


# -- capacity ------------------------------------------------------------------------------------


def test_transactions_run_to_an_abort_count_towards_keeping_up(base: Summary) -> None:
    # A tenth of the load aborts in the executor (SmallBank without the funds): executed all the
    # same, the rate was kept up with.
    run = shaped(base, rate=1000, delivered=900)
    stages = tuple(
        replace(row, throughput=1000.0) if row.name == "executor" else row for row in run.stages
    )
    assert capacity([run]) is None
    found = capacity([replace(run, stages=stages)])
    assert found is not None
    assert found.rate == 1000


def test_capacity_is_the_highest_rate_at_which_every_run_kept_up(base: Summary) -> None:
    runs = [
        shaped(base, rate=100, delivered=d)
        for d in (99, 96, 98)  # every run kept up
    ] + [
        shaped(base, rate=200, delivered=d)
        for d in (199, 198, 120)  # median 198, but one run fell short: not
    ]
    found = capacity(runs)
    assert found is not None
    assert found.rate == 100
    assert found.delivered == 98
    assert not found.at_top
    assert found.describe() == "100"
    top = capacity([*runs, shaped(base, rate=300, delivered=290)])
    assert top is not None
    assert top.rate == 300
    assert top.describe() == "≥ 300"
    assert capacity([shaped(base, rate=100, delivered=50)]) is None
    assert capacity([]) is None


def test_a_saturating_run_is_its_own_capacity(base: Summary) -> None:
    runs = [shaped(base, rate=20_000, delivered=d, mode="movevm") for d in (300, 100, 200)]
    found = capacity(runs)
    assert found is not None
    assert found.rate is None
    assert found.delivered == 200
    assert found.describe() == "200"


def test_the_common_rate_is_the_highest_both_sweeps_kept_up(base: Summary) -> None:
    one = [shaped(base, rate=r, delivered=r) for r in (100, 200, 300)]
    four = [shaped(base, rate=r, delivered=d) for r, d in ((100, 100), (200, 199), (300, 100))]
    assert common_rate(one, four) == 200
    assert common_rate(one, [shaped(base, rate=100, delivered=10)]) is None


# -- modes ---------------------------------------------------------------------------------------


def test_the_modes_table_sets_the_report_beside_ours(base: Summary) -> None:
    def sweep(top: int, kept: int, us: float) -> list[Summary]:
        return [
            shaped(base, rate=r, delivered=r if r <= kept else r / 2, projected_us=us)
            for r in range(top // 4, top + 1, top // 4)
        ]

    capacities = {
        "hotstuff": capacity(sweep(800_000, 400_000, 5.0)),
        "hotcrypto": capacity(sweep(80_000, 40_000, 20.0)),
        "hotmove": capacity(sweep(40_000, 20_000, 40.0)),
        modes.ADAPTER: capacity(sweep(20_000, 10_000, 80.0)),
        "movevm": capacity([shaped(base, rate=None, delivered=240_000, mode="movevm")]),
        modes.MOVEVM_ADAPTER: capacity([shaped(base, rate=None, delivered=60_000, mode="movevm")]),
    }
    rows = {row[0]: row for row in modes.capacity_rows(capacities)}
    # configuration, capacity, delivered, projection, limited by, report's, ratios, then the
    # peak mean delivered and it over the report's
    assert rows["hotstuff"][1:4] == ["400,000", "400,000", "800,000"]
    assert rows["hotstuff"][4] == "the cores (CPU-bound)"
    assert rows["hotstuff"][5:8] == ["200,000", "2.00", "4.00"]
    assert rows["hotmove"][5:7] == ["30,000-35,000", "0.57-0.67"]
    # The report's DiemVM figure is the VM behind the adapter alone, as `movevm` runs it: the
    # system with consensus and signatures has no figure of the report beside it.
    assert rows[modes.ADAPTER][5:8] == ["-", "-", "-"]
    assert rows["movevm"][1:3] == ["240,000", "240,000"]
    # Several runs at capacity: what they delivered, with its spread.
    twice = capacity(
        [shaped(base, rate=1000, delivered=d, projected_us=5.0) for d in (990.0, 1010.0, 1000.0)]
    )
    assert modes.capacity_rows({"hotstuff": twice})[0][1:3] == ["≥ 1,000", "1,000 (990-1,010)"]
    assert rows["movevm"][6] == "3.00"
    assert rows[modes.MOVEVM_ADAPTER][5:7] == ["10,000", "6.00"]
    ratios = {row[0]: row[1:] for row in modes.ratio_rows(capacities)}
    assert ratios["hotmove / hotcrypto"] == ["0.50", "0.50", "0.600-0.700"]
    assert ratios["hotcrypto / hotstuff"][2] == "0.250"
    assert ratios["adapter / bare, in hotmove"] == ["0.50", "0.50", "0.125"]
    assert ratios["adapter / bare, in movevm"][0] == "0.25"
    # hotstuff ran again at a later commit (`--only`): its ratio says so, the others do not.
    commits = {label: "aaa" for label in capacities} | {"hotstuff": "bbb"}
    marked = {row[0]: row[1:] for row in modes.ratio_rows(capacities, commits)}
    assert marked["hotcrypto / hotstuff"][:2] == ["0.10 †", "0.25 †"]
    assert marked["hotmove / hotcrypto"][:2] == ["0.50", "0.50"]
    # A mode that kept up nowhere is said so, and its ratios are left out.
    capacities["hotmove"] = None
    tried = {"hotmove": [shaped(base, rate=1000, delivered=600)]}
    rows = {row[0]: row for row in modes.capacity_rows(capacities, tried)}
    assert rows["hotmove"][1:3] == ["none kept up (best 600)", "-"]
    ratios = {row[0]: row[1:] for row in modes.ratio_rows(capacities)}
    assert ratios["hotmove / hotcrypto"][:2] == ["-", "-"]


def test_the_modes_table_sets_the_peak_mean_delivered_beside_the_report(base: Summary) -> None:
    # hotcrypto keeps up to 28,000 tx/s; at 36,000 its runs deliver more, but not all of it.
    sweep = [shaped(base, rate=r, delivered=r) for r in (24_000, 28_000) for _ in range(3)]
    sweep += [shaped(base, rate=36_000, delivered=d) for d in (33_000, 34_090, 35_180)]
    rows = modes.capacity_rows({"hotcrypto": capacity(sweep)}, {"hotcrypto": sweep})
    (row,) = rows
    assert row[1] == "28,000"
    # The report's maximum is a peak mean delivered: 34,090 against its 50,000.
    assert row[8:] == ["34,090 at 36,000", "0.68"]


def test_cost_is_of_the_reports_instance_one_for_a_process_and_one_per_node(base: Summary) -> None:
    capacities = {
        "movevm": capacity([shaped(base, rate=None, delivered=100.0, mode="movevm")]),
        "hotstuff": capacity([shaped(base, rate=100, delivered=100.0, mode="hotstuff", nodes=4)]),
    }
    rows = {row[0]: row for row in modes.energy_rows(capacities)}
    # c5.xlarge at $0.17 an hour: one instance for movevm, four for four nodes, at 100 tx/s.
    assert rows["movevm"][4] == "0.4722"
    assert rows["hotstuff"][4] == "1.8889"


def test_the_report_figures_say_what_they_measured() -> None:
    labels = [c.label for c in modes.MODES.configurations(False)]
    for label, figure in CAPACITY.items():
        assert label in labels
        assert figure.meaning
        assert 0 < figure.low <= figure.high


# -- multi-region --------------------------------------------------------------------------------


def _placement(
    base: Summary,
    kept: int,
    rounds: float,
    per_batch: float,
    cores: float,
    *,
    held_back_above: float = 0.0,
) -> list[Summary]:
    """Three runs at each of 1,000, 2,000 and 3,000 tx/s that keep up to `kept`; above it the
    mempools held their clients back `held_back_above` of the run."""
    return 3 * [
        shaped(
            base,
            rate=r,
            delivered=r if r <= kept else r * 0.8,
            rounds_per_s=rounds,
            per_batch=per_batch,
            node_cores=cores * r / 1000,
            held_back=held_back_above if r > kept else 0.0,
            batch_size=500_000,
        )
        for r in (1000, 2000, 3000)
    ]


def test_multi_region_holds_when_four_regions_keep_up_with_more(base: Summary) -> None:
    one = _placement(base, 2000, rounds=100.0, per_batch=50.0, cores=0.02)
    four = _placement(base, 3000, rounds=10.0, per_batch=500.0, cores=0.01)
    lines = multi_region.verdict(one, four)
    # Four regions' capacity lies at 3,000 or above (the sweep's top), one region's below 3,000.
    assert lines[0] == (
        "- **Apart: the claim holds here**: four regions' capacity ≥ 3,000 tx/s (3 runs at"
        " 3,000), one region's 2,000 to below 3,000 tx/s (3 runs at 2,000)."
    )
    # The same load: 2,000 tx/s, each placement's medians there.
    assert "At 2,000 tx/s asked (the highest rate both kept up)" in lines[1]
    assert "ran 10.0 against 100.0 rounds a second" in lines[1]
    assert "a batch carried 500 against 50 transactions" in lines[1]
    # 500 transactions of 200 bytes in a batch of at most 500,000 bytes.
    assert "filled 20% against 2%" in lines[1]
    assert "a node spent 10.00 µs against 20.00 µs of CPU per transaction" in lines[1]
    assert lines[2].startswith("- Why: the same load in fewer rounds")


def test_multi_region_does_not_hold_when_one_region_keeps_up_with_more(base: Summary) -> None:
    one = _placement(base, 2000, rounds=100.0, per_batch=50.0, cores=0.01)
    four = _placement(base, 1000, rounds=10.0, per_batch=500.0, cores=0.02)
    lines = multi_region.verdict(one, four)
    assert lines[0].startswith("- **Apart: the claim does not hold here**: four regions' capacity")
    assert "1,000 to below 2,000 tx/s" in lines[0]
    assert lines[2].startswith("- Why not:")
    same = multi_region.verdict(one, _placement(base, 2000, 10.0, 500.0, 0.02))
    assert same[0].startswith("- **Overlapping: not decided**")
    assert "finer steps between 2,000 and 3,000 tx/s would settle it" in same[0]
    # Nothing to explain where neither is shown faster.
    assert not any(line.startswith("- Why") for line in same)
    # A run each: too few to settle anything, whatever the capacities.
    alone = multi_region.verdict(one[:3], four[:3])
    assert alone[0].startswith("- **Not settled**: ")
    assert "fewer than 3 runs on a side" in alone[0]
    assert multi_region.verdict(one, []) == [
        "- No run finished in four regions: nothing to compare."
    ]


def test_multi_region_names_the_bytes_in_flight_when_they_held_four_regions_back(
    base: Summary,
) -> None:
    # Four regions cost less CPU a transaction, yet keep up with less: their mempools sat at
    # the bound on uncommitted bytes above 2,000 tx/s. Fewer, cheaper rounds do not explain a
    # lower capacity.
    one = _placement(base, 3000, rounds=100.0, per_batch=50.0, cores=0.02)
    four = _placement(base, 2000, 10.0, 500.0, 0.01, held_back_above=0.6)
    lines = multi_region.verdict(one, four)
    assert lines[0].startswith("- **Apart: the claim does not hold here**: four regions' capacity")
    assert lines[2].startswith(
        "- Why not: across four regions the bound on bytes in flight set the limit (not the CPU:"
        " a transaction cost 10.00 µs against 20.00 µs at the same load). At 3,000 tx/s asked,"
        " the lowest rate four regions did not keep up with, their mempools held the clients"
        " back 60% of the run (one region: 0%)"
    )
    assert "`--max-uncommitted-bytes`" in lines[2]
    # Not held back: the cheaper transaction is still not why four regions kept up with less.
    unbound = multi_region.verdict(one, _placement(base, 2000, 10.0, 500.0, 0.01))
    assert unbound[2].startswith("- Why not: not the CPU")


def test_multi_region_compares_the_same_load_when_four_regions_keep_up_with_none(
    base: Summary,
) -> None:
    one = _placement(base, 2000, rounds=100.0, per_batch=50.0, cores=0.02)
    four = _placement(base, 0, rounds=10.0, per_batch=50.0, cores=0.02)
    lines = multi_region.verdict(one, four)
    assert lines[0] == (
        "- **Apart: the claim does not hold here**: four regions' capacity below 1,000 tx/s (no"
        " rate asked kept up), one region's 2,000 to below 3,000 tx/s (3 runs at 2,000)."
    )
    assert lines[1].startswith(
        "- At 1,000 tx/s asked (the lowest rate both were asked, which not both kept up), four"
        " regions delivered 800 against 1,000 tx/s and ran 10.0 against 100.0 rounds a second"
    )
    neither = multi_region.verdict(four, four)
    assert neither[0].startswith("- **Overlapping: not decided**: four regions' capacity below")


def test_each_bound_runs_in_both_placements_and_is_judged_by_their_spans(
    base: Summary, tmp_path: Path
) -> None:
    # At the default bound the placements overlap; at 32 MiB four regions keep up with more,
    # apart from one region at the same bound.
    big = 32 * 1024 * 1024
    sweeps = {
        "hotcrypto: one region": _placement(base, 2000, 100.0, 50.0, 0.02),
        "hotcrypto: four regions": _placement(base, 2000, 10.0, 500.0, 0.01),
        multi_region.bound_label("hotcrypto", big, multi_region.ONE): _placement(
            base, 2000, 100.0, 50.0, 0.02
        ),
        multi_region.bound_label("hotcrypto", big): _placement(base, 3000, 10.0, 500.0, 0.01),
    }
    outcomes = [
        Outcome(Configuration(label, {"mode": "hotcrypto"}), runs) for label, runs in sweeps.items()
    ]
    page = Page("multi-region", "Multi-region", tmp_path)
    multi_region.MULTI_REGION.write(outcomes, page)
    text = "\n".join(page.lines)
    assert "| 32 MiB | one region | 2,000 |" in text
    assert "| 32 MiB | four regions | ≥ 3,000 |" in text
    assert "- 8 MiB (default): **Overlapping: not decided**: " in text
    assert "- 32 MiB: **Apart: the claim holds here**: four regions' capacity ≥ 3,000" in text
    # The rule the capacities follow is on the page.
    assert multi_region.CAPACITY_RULE in text


def test_the_four_regions_matrix_is_symmetric_round_trips_halved() -> None:
    matrix = read_delay_matrix(REPO_ROOT / multi_region.MATRIX, 4)
    for i in range(4):
        assert matrix[i][i] == 0
        for j in range(4):
            assert matrix[i][j] == matrix[j][i]
            if i != j:
                assert 10 <= matrix[i][j] <= 150  # one-way, between regions of the world
    text = (REPO_ROOT / multi_region.MATRIX).read_text()
    assert "Source:" in text


def test_a_relative_delay_matrix_is_the_repositorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    configuration = multi_region.MULTI_REGION.configurations(True)[1]
    assert configuration.flags["delay_matrix"] == multi_region.MATRIX
    _, points, _ = prepare(configuration, REPO_ROOT)
    assert points[0].delay_matrix == str(REPO_ROOT / multi_region.MATRIX)


# -- faults --------------------------------------------------------------------------------------


def _catch_up(node: int, after: float | None) -> CatchUp:
    return CatchUp(node=node, restart_t=5.0, target=1000.0, caught_up_after=after, reached=800.0)


def test_catch_up_times_are_said_per_comeback() -> None:
    assert faults.catch_up_text([]) == "-"
    assert faults.catch_up_text([_catch_up(1, 1.25)]) == "1.2 s (node-1)"
    assert faults.catch_up_text([_catch_up(2, None)]) == "did not (node-2 reached 800 of 1,000)"
    several = [_catch_up(0, 1.0), _catch_up(1, 3.0), _catch_up(2, 2.0), _catch_up(3, None)]
    assert faults.catch_up_text(several) == "3 of 4: median 2.0 s, longest 3.0 s; 1 did not"


def _analysis(*catch_ups: CatchUp) -> FaultAnalysis:
    report = AuditReport()
    report.add("state digests agree", True, "3 heights")
    report.add("total supply conserved", True, "equal")
    return FaultAnalysis(FaultLog(), CommitsTimeline(0.0, catch_ups=list(catch_ups)), report)


def test_a_fault_row_sets_the_run_against_the_fault_free_one(base: Summary) -> None:
    analysis = _analysis(_catch_up(1, 2.0))
    fault_free = [shaped(base, rate=1000, delivered=1000)]
    row = faults.scenario_row(
        "crash and restart",
        [shaped(base, rate=1000, delivered=750)],
        fault_free,
        [analysis],
        [1234.0],
    )
    assert row == [
        "crash and restart",
        "1",
        "750",
        "75%",
        "195",  # the synthetic samples' send-to-execute p50
        "2.0 s (node-1)",
        "1,234 ms",
        "ok (2 checks)",
    ]
    analysis.audit.add("samples executed exactly once", False, "2 missing")
    assert faults.audit_text([analysis]) == "FAILED: samples executed exactly once"


def test_a_fault_row_of_several_runs_gives_their_spread_and_every_audit(base: Summary) -> None:
    runs = [shaped(base, rate=1000, delivered=d) for d in (700, 800, 750)]
    fault_free = [shaped(base, rate=1000, delivered=d) for d in (990, 1000, 1010)]
    analyses = [_analysis(_catch_up(1, t)) for t in (1.0, 3.0, 2.0)]
    row = faults.scenario_row(
        "crash and restart", runs, fault_free, analyses, [900.0, None, 1100.0]
    )
    assert row == [
        "crash and restart",
        "3",
        "750 (700-800)",
        "75%",  # the medians' ratio
        "195 (195-195)",
        "3 of 3: median 2.0 s, longest 3.0 s",
        "1,000 (900-1,100) ms",
        "ok in 3 of 3 runs (2 checks)",
    ]
    analyses[1].audit.add("samples executed exactly once", False, "2 missing")
    assert faults.audit_text(analyses) == "FAILED in 1 of 3 runs: samples executed exactly once"


def test_the_faults_scenarios_cover_every_fault_under_both_rules() -> None:
    for quick in (True, False):
        configurations = faults.FAULTS.configurations(quick)
        commands = [c.command() for c in configurations]
        # A quick run checks the machinery under one rule (`leaders` runs both).
        for rule in ("reputation",) if quick else ("round-robin", "reputation"):
            mine = [c for c in commands if f"--leader={rule}" in c]
            assert len(mine) == 6
            assert sum("--faults=1" in c for c in mine) == 1
            assert sum("--kill-leader-every=" in c for c in mine) == 1
            assert sum("--partition=" in c for c in mine) == 1
            assert sum(c.count("--crash=") == 1 for c in mine) == 1  # crash and restart
            assert sum(c.count("--crash=") == 2 for c in mine) == 1  # more than f down
        # The scenarios shared with `leaders` run with the same flags on both pages.
        leaders = {c.command() for c in EXPERIMENTS["leaders"].configurations(quick)}
        assert sum(c in leaders for c in commands) == (4 if quick else 8)


# -- workloads -----------------------------------------------------------------------------------


def test_the_workloads_table_has_a_row_per_workload_and_payload(base: Summary) -> None:
    def movevm(tps: float, us: float) -> list[Summary]:
        return [shaped(base, rate=None, delivered=tps, mode="movevm", executor_us=us)]

    runs = {
        workloads.label_of("movevm", "transfer", "bare", "script"): movevm(200_000, 4.4),
        workloads.label_of("movevm", "transfer", "adapter", "script"): movevm(80_000, 11.4),
        workloads.label_of("movevm", "kvstore", "adapter", "entry"): movevm(7_000, 140),
    }
    assert workloads.rows("movevm", runs) == [
        ["transfer", "script", "200,000", "4.4", "80,000", "11.4", "0.40"],
        ["kvstore", "entry", "-", "-", "7,000", "140.0", "-"],
    ]
    assert workloads.rows("hotmove", runs) == []
    assert len(workloads.headers("movevm")) == 7
    # hotmove: a capacity per VM; a sweep that kept up nowhere shows its best run, and the
    # executor's cost at its lowest rate.
    hotmove = {
        workloads.label_of("hotmove", "cpuheavy", "bare", "entry"): [
            shaped(base, rate=160, delivered=160, executor_us=500),
            shaped(base, rate=240, delivered=200, executor_us=520),
        ],
        workloads.label_of("hotmove", "cpuheavy", "adapter", "entry"): [
            shaped(base, rate=160, delivered=100, executor_us=600),
            shaped(base, rate=240, delivered=120, executor_us=640),
        ],
    }
    assert workloads.rows("hotmove", hotmove) == [
        ["cpuheavy", "entry", "160", "160", "500.0", "none kept up (best 120)", "-", "600.0", "-"],
    ]


def test_every_workload_vm_and_payload_runs_in_both_modes() -> None:
    full = [c.flags for c in workloads.WORKLOADS_EXPERIMENT.configurations(False)]
    assert len(full) == 2 * 5 * 2 * 2
    quick = [c.flags for c in workloads.WORKLOADS_EXPERIMENT.configurations(True)]
    for mode in ("movevm", "hotmove"):
        ran = [f for f in quick if f["mode"] == mode]
        assert {f["workload"] for f in ran} == {
            "transfer",
            "donothing",
            "cpuheavy",
            "kvstore",
            "smallbank",
        }
        assert {f["vm"] for f in ran} == {"bare", "adapter"}
        assert {f["payload"] for f in ran} == {"script", "entry"}


# -- store ---------------------------------------------------------------------------------------


def test_the_store_table_takes_medians_of_alternated_pairs(base: Summary) -> None:
    delivered = {1: (1000, 900), 2: (1000, 500), 3: (800, 800)}
    outcomes = []
    for pair, (without, with_store) in delivered.items():
        for side, tps in ((store.WITHOUT, without), (store.WITH, with_store)):
            configuration = Configuration(store.label_of("hotcrypto", pair, side), {})
            outcomes.append(Outcome(configuration, [shaped(base, rate=1000, delivered=tps)]))
    # A pair whose second run did not finish is left out.
    outcomes.append(Outcome(Configuration(store.label_of("hotcrypto", 4, store.WITHOUT), {})))
    pairs = store.pairs_of("hotcrypto", outcomes)
    assert [p.number for p in pairs] == [1, 2, 3]
    rows = {row[0]: row[1:] for row in store.measure_rows(pairs)}
    # Medians of each side (1000, 1000, 800 -> 1000; 900, 500, 800 -> 800), and of the pairs'
    # ratios (0.9, 0.5, 1.0 -> 0.9): not the ratio of the medians.
    assert rows["delivered tx/s"] == [
        "1,000 (800-1,000)",
        "800 (500-900)",
        "0.90 (0.50-1.00), 3 pairs",
    ]
    assert store.pair_rows(pairs)[1] == ["2", "1,000", "500", "0.50", "1.00"]
    # 950 of 1,000 is 95 %: pair 3's 800 and the store's 900 and 500 fall short.
    line = store.kept_up_line(pairs, 1000)
    assert "2 of 3 without --store, 0 of 3 with it." in line
    assert "overloaded" in line
    kept = store.pairs_of("hotcrypto", outcomes)[:1]
    assert "overloaded" not in store.kept_up_line(kept, 900)


def test_the_store_page_reads_the_rate_its_runs_were_asked_for(
    base: Summary, tmp_path: Path
) -> None:
    # The experiment asks 24,000 today; these runs were asked 32,000 (a page written again).
    outcomes = [
        Outcome(
            Configuration(
                store.label_of("hotcrypto", 1, side), {"mode": "hotcrypto", "rate": "24000"}
            ),
            [shaped(base, rate=32_000, delivered=30_000)],
        )
        for side in (store.WITHOUT, store.WITH)
    ]
    page = Page(name="store", title="Store", directory=tmp_path)
    store.STORE.write(outcomes, page)
    text = "\n".join(page.lines)
    assert "`hotcrypto` at 32,000 tx/s asked, 1 pair\n" in text
    assert "0 of 1 without --store, 0 of 1 with it" in text


# -- parallel ------------------------------------------------------------------------------------


def bench_rows(tps: dict[tuple[str, str], float]) -> list[dict]:
    return [
        {"group": group, "configuration": column, "block": 1000, "tps": value}
        for (group, column), value in tps.items()
    ]


def test_the_speedup_table_sets_each_scheme_against_sequential_execution() -> None:
    rows = bench_rows(
        {
            ("transfer/uniform/1000", "blockstm-2"): 160.0,
            ("transfer/uniform/1000", "sequential"): 100.0,
            ("transfer/uniform/1000", "waves-1"): 90.0,
            ("transfer/ring/1000", "sequential"): 100.0,
            ("transfer/ring/1000", "blockstm-2"): 98.0,
        }
    )
    columns, table = speedups.speedup_table(rows)
    assert columns == ["workload / dest / block", "sequential", "waves-1", "blockstm-2"]
    assert table == [
        ["transfer/ring/1000", "100", "-", "98 (0.98x)"],
        ["transfer/uniform/1000", "100", "90 (0.90x)", "160 (1.60x)"],
    ]
    best = speedups.best_rows(rows)
    assert best == [
        ["transfer", "ring", "-", "0.98x", "0.49"],
        ["transfer", "uniform", "-", "1.60x", "0.80"],
    ]


def test_a_bench_table_that_is_missing_or_empty_is_one_clear_error(tmp_path: Path) -> None:
    from benchmark.experiments.bench import BenchRunError, read_table  # noqa: PLC0415

    table = tmp_path / "table.json"
    with pytest.raises(BenchRunError, match="no readable table"):
        read_table(table)
    table.write_text("[]")
    with pytest.raises(BenchRunError, match="did the filter match"):
        read_table(table)
    table.write_text('[{"group": "transfer/uniform/1000", "configuration": "sequential"}]')
    assert read_table(table)[0]["configuration"] == "sequential"


def test_a_speedup_beyond_the_thread_count_is_called_noise() -> None:
    rows = bench_rows(
        {
            ("kvstore/uniform/1000", "sequential"): 100.0,
            ("kvstore/uniform/1000", "blockstm-2"): 256.0,
            ("kvstore/ring/1000", "sequential"): 100.0,
            ("kvstore/ring/1000", "blockstm-2"): 180.0,
        }
    )
    findings = "\n".join(speedups.findings(rows))
    assert "1 of 2 cells run faster than their thread count allows" in findings
    calm = bench_rows(
        {("kvstore/ring/1000", "sequential"): 100.0, ("kvstore/ring/1000", "blockstm-2"): 180.0}
    )
    assert "thread count allows" not in "\n".join(speedups.findings(calm))


def test_more_bandwidth_is_called_slower_only_when_no_run_overlaps(base: Summary) -> None:
    def runs(*delivered: float) -> list[Summary]:
        return [shaped(base, rate=200, delivered=d) for d in delivered]

    overlapping = {None: runs(100, 98, 102), 100: runs(101, 99, 103)}
    (slower, spread_line) = links.link_verdict("hotcrypto", overlapping)
    assert "**overlapping**" in slower
    assert "neither is shown faster" in slower
    assert "no slower link's runs fell less than half as far apart" in spread_line
    apart = {None: runs(100, 90, 102), 100: runs(110, 111, 112)}
    (slower, spread_line) = links.link_verdict("hotcrypto", apart)
    assert "**slower with more bandwidth**: every run without a limit" in slower
    assert "at 100 Mbit/s" in slower
    assert "steadier (runs less than half as far apart) at 100 Mbit/s" in spread_line
    # Two runs a side settle nothing.
    few = {None: runs(100, 90), 100: runs(110, 111)}
    assert "**not settled** against 100 Mbit/s" in links.link_verdict("hotcrypto", few)[0]


def test_the_best_batch_size_is_named_only_when_its_runs_are_apart_from_every_other() -> None:
    spans = {
        200_000: runs_span([37_882, 14_067, 40_959]),
        50_000: runs_span([27_080, 24_604, 31_051]),
        1_000_000: runs_span([27_548, 24_161, 28_386]),
    }
    line = links.best_batch(22, spans)
    assert line.startswith("- 22 nodes: **overlapping**: no single batch size delivered most;")
    assert "200,000 B (14,067-40,959 tx/s, the highest median)" in line
    apart = {1_000_000: runs_span([99_431, 98_796, 100_229]), 50_000: runs_span([65_122, 62_532])}
    assert "**not settled**" in links.best_batch(4, apart)
    apart[50_000] = runs_span([65_122, 62_532, 70_000])
    assert links.best_batch(4, apart) == (
        "- 4 nodes: **apart**: 1,000,000 B delivered most (98,796-100,229 tx/s), above every"
        " other batch size's runs."
    )


# -- scale ---------------------------------------------------------------------------------------


def test_the_model_is_judged_on_every_point_it_was_not_fitted_on(base: Summary) -> None:
    """The rule fixed before the runs: the `FITTED` points fit, every other point is judged; a
    point that delivered what it was asked misses only if the model predicts less."""

    def at(axis: str, nodes: int, vcpus: float, rate: int, used_share: float = 1.0) -> Measured:
        # Nodes that order 20 µs of CPU a transaction and 100 µs a round, 50 rounds a second.
        capacity = (vcpus * 1e6 - 50 * 100) / 20
        delivered = min(rate, capacity * used_share)
        runs = [
            shaped(
                base,
                rate=rate,
                delivered=delivered,
                node_cores=vcpus * used_share if delivered < rate else delivered * 20 / 1e6 + 0.005,
                rounds_per_s=50.0,
            )
        ] * 3
        # Consensus and the executor, a thread each at 2 µs a transaction: ceilings none of
        # them reaches.
        runs = [
            replace(
                run,
                stages=tuple(
                    replace(row, us_per_tx=2.0) if row.name in ("consensus", "executor") else row
                    for row in run.stages
                ),
            )
            for run in runs
        ]
        spec = Spec(axis, "hotcrypto", nodes, vcpus, rate)
        return Measured(spec, tuple(runs), dilation=4, speed=None, one_way_ms=0.0)

    points = [
        *(at("committee", n, 1.0, 100_000) for n in (4, 16, 48)),  # fitted
        at("cores", 4, 4.0, 400_000),  # fitted
        at("cores", 4, 8.0, 800_000),  # judged: saturated, predicted as measured
        at("cores", 4, 16.0, 10_000),  # judged: delivered all it was asked (a lower bound)
        at("committee", 8, 1.0, 100_000, used_share=0.5),  # judged: held by something else
    ]
    found = {
        (c.point.spec.axis, c.point.spec.nodes, c.point.spec.vcpus): c
        for c in scale_judge.checks(points)
    }
    assert [k for k, c in found.items() if c.fitted] == [
        ("committee", 4, 1.0),
        ("committee", 16, 1.0),
        ("committee", 48, 1.0),
        ("cores", 4, 4.0),
    ]
    assert found[("cores", 4, 8.0)].error == pytest.approx(0.0, abs=1e-6)
    lower = found[("cores", 4, 16.0)]
    assert not lower.point.saturated
    assert (lower.error, lower.misses) == (0.0, False)
    held = found[("committee", 8, 1.0)]
    assert held.error == pytest.approx(1.0, abs=0.01)
    assert held.misses
    assert "nodes used 50% of their CPUs" in held.cause()
    lines = scale_judge.error_lines(list(found.values()))
    assert lines[0].startswith("- Error on the 3 points the model was not fitted on: median 0%")
    assert lines[1].startswith("- Missed: committee: hotcrypto, 8 x 1 vCPUs (+100%)")


def test_the_claim_tells_a_stopped_sweep_from_a_settled_one() -> None:
    from benchmark.experiments.measures import Span  # noqa: PLC0415
    from benchmark.experiments.multi_region import claim  # noqa: PLC0415

    def cap(rate: int, above: int | None, runs: int = 5) -> Span:
        return Span(rate, above, runs, high_excluded=True)

    assert "**Apart: the claim holds here**" in claim(cap(20, 24), cap(30, 32))
    # Four regions stopped at their sweep's top below where one region may lie.
    assert "**Not settled**" in claim(cap(500, None), cap(300, None))
    assert "**Overlapping: not decided**" in claim(cap(24, 32), cap(24, 28))
    assert "**Apart: the claim does not hold here**" in claim(cap(24, 28), cap(16, 24))
    assert "unknown (no runs)" in claim(cap(24, 28), None)

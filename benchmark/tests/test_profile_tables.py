"""The pages' profiling and per-rate tables from synthetic summaries: the modes page's flame graphs,
queues and hops at capacity and its one projection rule, the per-rate tables of modes and
workloads, the parallel page's measured table, and the verifier's batch sweep on the links page
(the real runs are in test_experiments.py)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.resources.profiles import load_profiles
from benchmark.analysis.run_summary import Summary, summarize
from benchmark.analysis.stages.projection import ONE_PER_CORE, project
from benchmark.config import BenchParameters
from benchmark.experiments import (
    Configuration,
    Outcome,
    at_capacity,
    links,
    modes,
    parallel_execution,
    profiled,
    speedups,
    verifier_batches,
    workloads,
)
from benchmark.experiments.measures import capacity
from benchmark.experiments.page import Page
from benchmark.experiments.rates import rate_rows

from .synthetic import write_run
from .test_experiment_tables import shaped


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    logs = write_run(tmp_path_factory.mktemp("run"))
    return summarize(
        load_run(logs), {"mode": "hotcrypto", "nodes": 2, "where": "local", "cores": 2}
    )


# -- a profiled run at the capacity ----------------------------------------------------------------


def test_the_profiled_run_is_the_sweeps_last_point_at_its_capacity(base: Summary) -> None:
    runs = [shaped(base, rate=r, delivered=d) for r, d in ((100, 100), (200, 199), (300, 150))]
    outcome = Outcome(Configuration("hotcrypto", {}), summaries=runs)
    last = BenchParameters(mode="hotcrypto", rate=300, runs=3, duration=20)
    point = profiled.capacity_point(outcome, last)
    assert point == replace(last, rate=200, runs=1)
    # Nothing kept up: no capacity, nothing to profile.
    short = Outcome(Configuration("hotcrypto", {}), [shaped(base, rate=100, delivered=10)])
    assert profiled.capacity_point(short, last) is None
    # A run that asks no rate is run as it was, once.
    movevm = Outcome(
        Configuration("movevm", {}), [shaped(base, rate=None, delivered=5, mode="movevm")]
    )
    alone = BenchParameters(mode="movevm", runs=5, duration=10)
    assert profiled.capacity_point(movevm, alone) == replace(alone, runs=1)


def test_every_mode_is_profiled_at_its_capacity_apart_from_its_sweep() -> None:
    for quick in (True, False):
        configurations = modes.MODES.configurations(quick)
        assert all(c.profile_at_capacity and not c.profile for c in configurations)


# -- the modes page's profiles, queues and hops --------------------------------------------------


def _profiled_run(base: Summary, logs: Path, rate: int) -> Summary:
    """A run whose node 0 left a profile: consensus 30 samples, the verifier's pool 50 (two
    threads), the executor 15, another thread 5."""
    profile = logs / "profile-node-0"
    profile.mkdir(parents=True)
    (profile / "profile.folded").write_text(
        "consensus;tokio::run;seal 30\n"
        "verifier-0;verify;ed25519 30\n"
        "verifier-1;verify;ed25519 20\n"
        "executor;execute 15\n"
        "main;metrics 5\n"
    )
    (profile / "flamegraph.svg").write_text("<svg/>\n")
    return replace(
        shaped(base, rate=rate, delivered=rate, logs=str(logs)), profile=load_profiles(logs)
    )


def test_a_node_at_capacity_is_split_by_its_threads_and_its_flame_graph_copied(
    base: Summary, tmp_path: Path
) -> None:
    assert [at_capacity.thread_group(t) for t in ("verifier-12", "executor", "main")] == [
        "verifier",
        "executor",
        "other",
    ]
    outcome = Outcome(
        Configuration("hotcrypto", {"mode": "hotcrypto", "rate": "1000,2000", "runs": "3"}),
        summaries=[shaped(base, rate=2000, delivered=2000)],
        profiled=[_profiled_run(base, tmp_path / "run", 2000)],
    )
    unprofiled = Outcome(Configuration("hotstuff", {}), [shaped(base, rate=10, delivered=10)])
    page = Page("modes", "Modes", tmp_path / "pages")
    rows = at_capacity.profile_rows([outcome, unprofiled], page)
    assert rows == [
        [
            "hotcrypto",
            "2,000",
            "100",
            "30%",
            "50%",
            "15%",
            "5%",
            "[profile-node-0](modes/flamegraph-hotcrypto.svg)",
        ]
    ]
    assert (tmp_path / "pages" / "modes" / "flamegraph-hotcrypto.svg").read_text() == "<svg/>\n"
    # Without the run's logs (a page written again on a clone, from its committed record): the
    # same row, from the summary, linking the copy beside the page.
    shutil.rmtree(tmp_path / "run")
    assert at_capacity.profile_rows([outcome, unprofiled], page) == rows
    assert at_capacity.profiled_commands([outcome, unprofiled]) == [
        "  - hotcrypto: `fab local --mode=hotcrypto --rate=2000 --runs=1 --profile`"
    ]


def test_the_queues_and_hops_at_capacity_are_the_runs_medians(base: Summary) -> None:
    runs = [shaped(base, rate=1000, delivered=1000) for _ in range(3)]
    # One run's verifier queue grew: its mean counts in the median, its max is the largest.
    stages = tuple(
        replace(row, queue_mean=30.0, queue_max=40) if row.name == "verifier" else row
        for row in runs[2].stages
    )
    runs[2] = replace(runs[2], stages=stages)
    capacities = {"hotcrypto": capacity(runs), "hotstuff": None}
    rows = {row[1]: row for row in at_capacity.channel_rows(capacities)}
    # The synthetic nodes: consensus->verifier holds 1 (max 2) and never blocks, the verifier is
    # busy 60 % of the time and waits 100 ms a second on verifier->executor, which holds 3 (max
    # 5). The third run's queue of 30 (max 40) moves no median, and is the largest.
    assert rows["`consensus->verifier`"] == [
        "hotcrypto",
        "`consensus->verifier`",
        "1.0",
        "40",
        "0%",
        "60%",
    ]
    assert rows["`verifier->executor`"][2:5] == ["3.0", "5", "10%"]
    names = at_capacity.hop_names(capacities)
    assert names[0] == "send → receive"
    assert names[-1] == "send → execute"
    (hops,) = at_capacity.hop_rows(capacities)
    by_name = dict(zip(names, hops[1:], strict=True))
    # The synthetic samples: received 5 ms after they are sent, sealed 45 ms later.
    assert by_name["send → receive"] == "5.0 / 5.0"
    assert by_name["receive → seal"] == "45.0 / 45.0"
    assert by_name["send → execute"] == "200.0 / 200.0"


def test_the_modes_page_projects_only_at_capacity_and_says_how_it_errs(
    base: Summary, tmp_path: Path
) -> None:
    sweep = [shaped(base, rate=r, delivered=r if r <= 200 else 150) for r in (100, 200, 300)]
    rows = modes.sweep_rows([Outcome(Configuration("hotcrypto", {}), sweep)])
    # No projection at every rate: what was asked, delivered, and whether it was kept up.
    assert rows == [
        ["hotcrypto", "100", "1", "100 (100-100)", "yes (1 of 1)"],
        ["hotcrypto", "200", "1", "200 (200-200)", "yes (1 of 1)"],
        ["hotcrypto", "300", "1", "150 (150-150)", "no (0 of 1)"],
    ]
    caveats = modes.projection_caveats({"hotcrypto": capacity(sweep), "hotmove": None})
    assert caveats == [
        "- µs/tx measured with 2 nodes sharing 2 cores include the cost of sharing them: the"
        " projection errs low (hotcrypto)."
    ]


def test_a_rates_runs_say_how_many_of_them_kept_up(base: Summary) -> None:
    runs = [shaped(base, rate=1000, delivered=d) for d in (1000, 990, 600)]
    assert rate_rows("x", runs) == [["x", "1,000", "3", "990 (600-1,000)", "no (2 of 3)"]]
    movevm = [shaped(base, rate=None, delivered=d, mode="movevm") for d in (10, 30, 20)]
    assert rate_rows("m", movevm) == [["m", "as fast as it can", "3", "20 (10-30)", "-"]]


def test_the_workloads_page_has_a_per_rate_table_of_its_hotmove_sweeps(base: Summary) -> None:
    label = workloads.label_of("hotmove", "smallbank", "bare", "entry")
    # A tenth of the payments abort without the funds: processed, not delivered.
    runs = []
    for rate, got in ((1000, 1000), (1000, 1000), (1000, 980), (2000, 1500)):
        run = shaped(base, rate=rate, delivered=got * 0.9)
        stages = tuple(
            replace(row, throughput=float(got)) if row.name == "executor" else row
            for row in run.stages
        )
        runs.append(replace(run, stages=stages))
    movevm = workloads.label_of("movevm", "smallbank", "bare", "entry")
    outcomes = [
        Outcome(Configuration(label, {"mode": "hotmove"}), runs),
        Outcome(Configuration(movevm, {"mode": "movevm"}), [shaped(base, rate=None, delivered=5)]),
    ]
    assert workloads.sweep_rows(outcomes) == [
        [label, "1,000", "3", "900 (882-900)", "1,000 (980-1,000)", "yes (3 of 3)"],
        [label, "2,000", "1", "1,350 (1,350-1,350)", "1,500 (1,500-1,500)", "no (0 of 1)"],
    ]
    full = [c for c in workloads.WORKLOADS_EXPERIMENT.configurations(False)]
    assert {c.flags["runs"] for c in full} == {"3"}


# -- the parallel page: measured rows, one projection ------------------------------------------


def test_the_parallel_page_has_a_measured_row_per_exec_and_the_summarys_projection(
    base: Summary, tmp_path: Path
) -> None:
    def run(scheme: str) -> Summary:
        threads = 1 if scheme == "sequential" else ONE_PER_CORE
        projection = project({"executor": 1000.0, "verifier": 100.0}, 4, executor_threads=threads)
        shaped_run = shaped(base, rate=1000, delivered=1000.0, executor_us=1000.0, exec=scheme)
        return replace(shaped_run, projection=projection)

    outcomes = [
        Outcome(c, summaries=[] if c.bench else [run(str(c.flags["exec"]))])
        for c in parallel_execution.PARALLEL.configurations(True)
    ]
    rows = parallel_execution.projection_rows(outcomes)
    # One row per `--exec`: nothing repeated for more cores (the scale page measures those).
    assert [r[0] for r in rows] == ["sequential", "blockstm"]
    assert all(r[4] == "1,000.0" for r in rows)  # the executor's µs/tx, as measured
    # Sequential: the executor's one thread holds 1,000 tx/s; Block-STM: 4 cores at 1,100 µs/tx.
    assert rows[0][-2:] == ["1,000", "executor (1 thread)"]
    assert rows[1][-2:] == ["3,636", "the cores (executor costs most)"]
    assert parallel_execution.projected_cores(outcomes) == "4"
    # Labelled as a projection, with the caveat its runs carry.
    erring = [
        replace(
            o,
            summaries=[
                replace(r, projection=replace(r.projection, caveat="errs low")) for r in o.summaries
            ],
        )
        for o in outcomes
    ]
    page = Page("parallel", "Parallel", tmp_path)
    parallel_execution.PARALLEL.write(erring, page)
    text = "\n".join(page.lines)
    assert "The projection is not a measurement" in text
    assert "- errs low (sequential, blockstm)." in text


def test_the_parallel_page_sets_sequential_execution_against_one_worker(tmp_path: Path) -> None:
    def row(group: str, column: str, tps: float) -> dict:
        return {"group": group, "configuration": column, "block": 1000, "tps": tps}

    rows = [
        row("one-thread/cpuheavy/uniform/1000", "sequential", 1000.0),
        row("one-thread/cpuheavy/uniform/1000", "waves-1", 980.0),
        row("one-thread/cpuheavy/uniform/1000", "blockstm-1", 950.0),
        row("cpuheavy/uniform/1000", "sequential", 1000.0),
        row("cpuheavy/uniform/1000", "blockstm-2", 1900.0),
    ]
    assert speedups.one_thread_rows(rows) == [
        ["cpuheavy/uniform/1000", "1000", "980 (0.98x)", "950 (0.95x)"]
    ]
    bench = next(
        c for c in parallel_execution.PARALLEL.configurations(False) if c.bench is not None
    )
    page = Page("parallel", "Parallel", tmp_path)
    parallel_execution.PARALLEL.write([Outcome(bench, table=rows)], page)
    text = "\n".join(page.lines)
    assert "## Sequential execution against one worker" in text
    assert "- One worker ran at 0.95-0.98x sequential execution here." in text
    # The speedup table holds the bench's groups of every configuration, not the one-thread ones.
    speedup = text.split("## Speedup over sequential execution")[1].split("## ")[0]
    assert "| cpuheavy/uniform/1000 | 1000 | 1900 (1.90x) |" in speedup
    assert "one-thread" not in speedup


# -- the verifier's batch sweep ------------------------------------------------------------------


def _batch_runs(base: Summary, per_batch: float, costs: tuple[float, ...]) -> list[Summary]:
    runs = []
    for cost in costs:
        run = shaped(base, rate=12_000, delivered=12_000)
        stages = tuple(
            replace(row, batch_size=per_batch, us_per_tx=cost) if row.name == "verifier" else row
            for row in run.stages
        )
        runs.append(replace(run, stages=stages))
    return runs


def test_the_verifier_sweep_sets_its_cost_against_the_transactions_a_batch(
    base: Summary, tmp_path: Path
) -> None:
    small, large = verifier_batches.BATCH_BYTES[0], verifier_batches.BATCH_BYTES[-1]
    outcomes = [
        Outcome(
            Configuration(verifier_batches.label_of(small), {"rate": "12000"}),
            _batch_runs(base, 100.0, (60.0, 55.0, 58.0)),
        ),
        Outcome(
            Configuration(verifier_batches.label_of(large), {"rate": "12000"}),
            _batch_runs(base, 1500.0, (40.0, 42.0, 41.0)),
        ),
    ]
    assert verifier_batches.rows(outcomes) == [
        ["15,200", "100", "58.0 (55.0-60.0)", "12,000 (12,000-12,000)", "195"],
        ["228,000", "1,500", "41.0 (40.0-42.0)", "12,000 (12,000-12,000)", "195"],
    ]
    (line,) = verifier_batches.comparison(outcomes)
    assert line.startswith(
        "- At 100 transactions a batch the verifier spent 58.0 µs per transaction, at 1,500"
        " 41.0 µs, 1.41 times (medians; the report set 146 against 1,201 transactions a batch)."
    )
    assert line.endswith(
        "The ranges are apart: every run with the small batches cost more than every run with"
        " the large."
    )
    overlapping = [
        outcomes[0],
        replace(outcomes[1], summaries=_batch_runs(base, 1500.0, (40.0, 56.0, 41.0))),
    ]
    assert (
        "overlapping: the runs do not tell the two apart"
        in verifier_batches.comparison(overlapping)[0]
    )
    single = [outcomes[0], replace(outcomes[1], summaries=outcomes[1].summaries[:1])]
    assert "not settled: a side has a single run" in verifier_batches.comparison(single)[0]
    page = Page("links", "Links", tmp_path)
    verifier_batches.write_section(outcomes, page)
    assert (tmp_path / "links" / "verifier.png").stat().st_size > 0


def test_the_links_experiment_sweeps_the_verifiers_batches_in_hotcrypto() -> None:
    for quick in (True, False):
        swept = [c for c in links.LINKS.configurations(quick) if c.label.startswith("verifier: ")]
        assert {c.flags["mode"] for c in swept} == {"hotcrypto"}
        sizes = [int(str(c.flags["batch_size"])) for c in swept]
        assert len(sizes) == (2 if quick else 5)
        # About 100 to about 1,500 transactions of 152 bytes a batch.
        assert sizes[0] // 152 == 100
        if not quick:
            assert sizes[-1] // 152 == 1500

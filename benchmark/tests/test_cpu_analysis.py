"""CPU per stage, the machine-aware verdict, resources and timelines, on the synthetic run of
`synthetic.py` (numbers in its docstring) and on hand-made machines and costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.resources.usage import Machine
from benchmark.analysis.run_summary import Summary, summarize
from benchmark.analysis.stages.cpu_bound import cpu_bound
from benchmark.report.text import render_summary

from .synthetic import write_run


def _summary(tmp_path: Path, cores: int | None = 2, **config: object) -> Summary:
    run = load_run(write_run(tmp_path / "logs"))
    return summarize(run, {"mode": "hotcrypto", "nodes": 2, "cores": cores, **config})


def test_stage_table_has_cores_and_cpu_per_transaction(tmp_path: Path) -> None:
    summary = _summary(tmp_path)
    expected = {"consensus": (0.1, 100.0), "verifier": (0.5, 500.0), "executor": (0.05, 50.0)}
    for name, (cores, us_per_tx) in expected.items():
        row = summary.stage(name)
        assert row is not None
        assert row.cpu_cores == pytest.approx(cores)
        assert row.us_per_tx == pytest.approx(us_per_tx)
        assert row.us_per_tx_sum == pytest.approx(2 * us_per_tx)
    verifier = summary.stage("verifier")
    assert verifier is not None
    assert verifier.busy_share == pytest.approx(0.6)  # wall-clock busy stays beside it


def test_a_durable_store_is_a_stage_of_its_own(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "logs", store_ms=20.0))
    summary = summarize(run, {"mode": "hotcrypto", "nodes": 2, "cores": 2})
    assert [row.name for row in summary.stages] == ["consensus", "store", "verifier", "executor"]
    store = summary.stage("store")
    assert store is not None
    # Its items are the committed transactions: 1,000 a second, like consensus.
    assert store.throughput == pytest.approx(1000.0)
    assert (store.cpu_cores, store.us_per_tx) == (pytest.approx(0.02), pytest.approx(20.0))
    assert store.batch_size is None
    assert store.busy_share is None
    # The projection counts its cost with the others' (4 cores / 670 µs per transaction).
    assert summary.projection is not None
    assert {s.stage for s in summary.projection.stages} == {
        "consensus",
        "store",
        "verifier",
        "executor",
    }
    assert summary.projection.cpu_tps == pytest.approx(4e6 / 670.0)
    assert summary.timeline["stages"]["store"]["cpu_cores"] == [pytest.approx(0.02)] * 9
    assert " store " in render_summary(summary)
    # Without --store there is no such row.
    assert _summary(tmp_path / "plain").stage("store") is None


def test_saturated_machine_names_the_costliest_stage(tmp_path: Path) -> None:
    summary = _summary(tmp_path)
    verdict = summary.bottleneck
    assert (verdict.stage, verdict.rule) == ("verifier", "CPU-bound")
    assert verdict.explanation.startswith("CPU-bound: 1.90 of 2 cores.")
    assert "1000.0 µs/tx" in verdict.explanation
    assert verdict.evidence["cpu_used_cores"] == pytest.approx(1.9)
    assert verdict.notes == ()
    text = render_summary(summary)
    assert "LIMITING STAGE: verifier (CPU-bound)" in text
    assert "nodes: cpu 0.70 cores, rss 100 MiB (mean per node)" in text
    assert "clients: cpu 0.25 cores, rss 20 MiB (mean per client)" in text


def test_a_machine_with_cores_to_spare_falls_back_to_the_queue_rules(tmp_path: Path) -> None:
    summary = _summary(tmp_path, cores=16)
    assert summary.bottleneck.rule == "back-pressure"  # verifier blocked 10 % on the executor
    assert summary.bottleneck.stage == "executor"


def test_without_known_cores_remote_hosts_use_the_cores_processes_report(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "logs", cores=1))
    config = {"mode": "hotcrypto", "hosts": ["10.0.0.1", "10.0.0.2"], "where": "remote"}
    summary = summarize(run, config)
    assert summary.resources is not None
    machines = summary.resources.machines
    assert [(m.name, m.cores) for m in machines] == [("10.0.0.1", 1.0), ("10.0.0.2", 1.0)]
    assert machines[0].cpu_used == pytest.approx(0.95)
    assert summary.bottleneck.stage == "verifier"
    assert "on 10.0.0.1" in summary.bottleneck.explanation
    assert "assume synchronised clocks" in render_summary(summary)


def test_resources_and_timelines_are_per_second(tmp_path: Path) -> None:
    summary = _summary(tmp_path)
    assert summary.resources is not None
    node = summary.resources.series["node-0"]
    assert node["t_s"] == [float(s) for s in range(1, 10)]
    assert node["cpu_cores"] == [pytest.approx(0.7)] * 9
    assert node["rss_mib"] == [pytest.approx(100.0)] * 9
    timeline = summary.timeline
    assert timeline["t_s"] == list(range(1, 10))
    verifier = timeline["stages"]["verifier"]
    assert verifier["tps"] == [pytest.approx(1000.0)] * 9
    assert verifier["cpu_cores"] == [pytest.approx(0.5)] * 9
    assert verifier["queue"] == [pytest.approx(1.0)] * 9
    assert verifier["blocked_share"] == [pytest.approx(0.1)] * 9
    assert timeline["stages"]["executor"]["blocked_share"] == [None] * 9


def test_old_logs_without_cpu_print_dashes(fixtures: Path) -> None:
    summary = summarize(load_run(fixtures / "hotcrypto"), {"mode": "hotcrypto", "cores": 2})
    assert all(row.cpu_cores is None and row.us_per_tx is None for row in summary.stages)
    assert summary.bottleneck.rule == "back-pressure"
    assert summary.projection is None
    text = render_summary(summary)
    assert "nodes: cpu - cores, rss - MiB (mean per node)" in text


# -- the CPU rule on its own ---------------------------------------------------------------------


def test_cpu_bound_needs_ninety_percent_of_the_cores() -> None:
    costs = {"verifier": 40.0, "executor": 10.0}
    assert cpu_bound(costs, [Machine("m", 2, 1.79)]) is None
    verdict = cpu_bound(costs, [Machine("m", 2, 1.8)])
    assert verdict is not None
    assert verdict.stage == "verifier"


def test_idle_runs_and_unknown_cores_are_not_cpu_bound() -> None:
    assert cpu_bound({}, [Machine("m", 2, 0.0)]) is None
    assert cpu_bound({"verifier": 40.0}, [Machine("m", None, 1.99)]) is None
    assert cpu_bound({"verifier": 40.0}, [Machine("m", 2, None)]) is None
    assert cpu_bound({"verifier": 40.0}, []) is None


def test_saturated_without_costs_says_so() -> None:
    verdict = cpu_bound({"verifier": 0.0}, [Machine("m", 2, 1.96)])
    assert verdict is not None
    assert verdict.stage == "cpu"
    assert "CPU-bound: 1.96 of 2 cores" in verdict.explanation


def test_two_stages_within_ten_percent_get_a_second_line() -> None:
    verdict = cpu_bound(
        {"verifier": 40.0, "executor": 37.0, "consensus": 30.0}, [Machine("m", 2, 1.96)]
    )
    assert verdict is not None
    assert verdict.stage == "verifier"
    assert len(verdict.notes) == 1
    assert verdict.notes[0].startswith("executor costs nearly as much: 37.0 µs/tx (92%")
    exact_tie = cpu_bound({"verifier": 40.0, "executor": 40.0}, [Machine("m", 2, 2.0)])
    assert exact_tie is not None
    # A tie is broken by name, so the verdict is the same from run to run.
    assert exact_tie.stage == "executor"
    assert exact_tie.notes[0].startswith("verifier costs nearly as much")


def test_the_busiest_of_several_machines_decides() -> None:
    machines = [Machine("a", 4, 1.0), Machine("b", 4, 3.8)]
    verdict = cpu_bound({"executor": 5.0}, machines)
    assert verdict is not None
    assert "3.80 of 4 cores on b" in verdict.explanation


# -- a CPU budget per node (--node-cpus) ---------------------------------------------------------


def test_a_node_at_its_budget_is_cpu_bound_on_its_budget(tmp_path: Path) -> None:
    """Nodes use 0.7 cores each: 93 % of a 0.75-core budget, judged before the machine (95 % of
    its 2 cores, which the note names)."""
    summary = _summary(tmp_path, where="local", node_cpus=0.75)
    assert summary.resources is not None
    assert summary.resources.node_cpus == 0.75
    budgets = [m for m in summary.resources.machines if m.budget]
    assert [(m.name, m.cores) for m in budgets] == [("node-0", 0.75), ("node-1", 0.75)]
    assert budgets[0].cpu_used == pytest.approx(0.7)
    verdict = summary.bottleneck
    assert (verdict.stage, verdict.rule) == ("verifier", "CPU-bound")
    assert verdict.explanation.startswith(
        "CPU-bound: 0.70 of 0.75 cores on node-0 (its --node-cpus budget)."
    )
    assert verdict.evidence["cpu_cores"] == 0.75
    assert verdict.notes == (
        "this machine was full too (95% of 2 cores): a node may at times have had less than its"
        " budget.",
    )
    text = render_summary(summary)
    assert (
        " + RESOURCES (--node-cpus: every node capped at 0.75 cores, a CFS quota; the clients"
        " outside it):"
    ) in text
    assert "nodes: cpu 0.70 cores of at most 0.75, rss 100 MiB (mean per node)" in text
    assert "clients: cpu 0.25 cores, rss 20 MiB (mean per client)" in text
    assert "this machine: 1.90 of 2 cores used (95%)" in text
    assert "node-1: 0.70 of at most 0.75 cores used (93%)" in text


def test_a_budget_with_room_left_is_not_cpu_bound(tmp_path: Path) -> None:
    """The same run at 1 core per node on a machine of 16: neither the nodes (70 %) nor the
    machine is full, so the queue rules decide, as they do without a budget."""
    summary = _summary(tmp_path, cores=16, where="local", node_cpus=1.0)
    assert summary.bottleneck.rule == "back-pressure"


def test_a_full_machine_under_the_budgets_says_the_nodes_had_less(tmp_path: Path) -> None:
    """Budgets of 1 core each on 2 cores, with the clients beside them: the machine is full (95 %)
    before any node reaches its budget (70 %)."""
    summary = _summary(tmp_path, where="local", node_cpus=1.0)
    verdict = summary.bottleneck
    assert verdict.explanation.startswith("CPU-bound: 1.90 of 2 cores on this machine.")
    assert verdict.notes == (
        "no node reached its budget of 1 cores: this machine's cores, shared by every node and"
        " client, ran out first, so the nodes had less than their budget.",
    )


def test_a_budget_is_judged_before_a_fuller_machine() -> None:
    machines = [
        Machine("this machine", 2, 1.98),
        Machine("node-0", 0.25, 0.24, budget=True),
        Machine("node-1", 0.25, 0.1, budget=True),
    ]
    verdict = cpu_bound({"consensus": 50.0}, machines)
    assert verdict is not None
    assert "0.24 of 0.25 cores on node-0 (its --node-cpus budget)" in verdict.explanation
    assert verdict.notes[-1].startswith("this machine was full too (99% of 2 cores)")
    # Fractions show as given.
    verdict = cpu_bound({"consensus": 50.0}, [Machine("node-0", 0.125, 0.12, budget=True)])
    assert verdict is not None
    assert verdict.explanation.startswith("CPU-bound: 0.12 of 0.125 cores on node-0")


# -- nodes of virtual CPUs in a dilated run (--dilation, --vcpus) --------------------------------


def test_a_dilated_run_is_judged_in_virtual_cpus(tmp_path: Path) -> None:
    """The same logs as a run dilated 4 times with nodes of 0.75 virtual CPUs: the processes wrote
    their timestamps on their slowed clocks, so the figures need no rescaling; the machine is 4
    times its 2 cores of virtual CPUs, each node judged against its 0.75, and every section of
    the summary says the run was dilated."""
    summary = _summary(tmp_path, where="local", vcpus=0.75, dilation=4, client_vcpus=1.0)
    assert summary.resources is not None
    machine, *budgets = summary.resources.machines
    assert (machine.name, machine.cores) == ("this machine", 8.0)
    assert [(m.name, m.cores, m.budget_flag) for m in budgets] == [
        ("node-0", 0.75, "--vcpus"),
        ("node-1", 0.75, "--vcpus"),
    ]
    assert summary.end_to_end.tps == pytest.approx(1000)
    verdict = summary.bottleneck
    assert verdict.explanation.startswith(
        "CPU-bound: 0.70 of 0.75 cores on node-0 (its --vcpus budget)."
    )
    text = render_summary(summary)
    assert " + [dilated ×4] END-TO-END:" in text
    assert " + [dilated ×4] RESOURCES (--vcpus: every node 0.75 virtual CPUs" in text
    assert "this machine: 1.90 of 8 cores used (24%)" in text
    assert "time dilated ×4: every clock 4 times slower" in text
    assert not [
        line for line in text.splitlines() if line.startswith(" + ") and "dilated" not in line
    ]

"""`fab experiment`: the commands a page quotes, the verdicts it draws, and each `--quick`
experiment run for real (marked `e2e`), its page checked: the tables hold numbers parsed from
the runs it made, the figures exist, the machine and commit are said."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.resources.profiles import parse_folded
from benchmark.analysis.run_summary import Summary, summarize
from benchmark.experiments import EXPERIMENTS, Configuration, diemvm
from benchmark.experiments import fault_scenarios as faults
from benchmark.experiments.experiment import Outcome
from benchmark.experiments.leaders import ROUND_ROBIN_LOSSES
from benchmark.experiments.machine_section import machine_section
from benchmark.experiments.measures import Rule
from benchmark.experiments.overload import forged, kept_up_cell, verdict, versus
from benchmark.experiments.page import Page
from benchmark.experiments.probe import Probe, probe
from benchmark.experiments.report_figures import CAPACITY

from .conftest import fab, run_flags
from .synthetic import write_run


def test_a_configuration_is_the_command_a_user_types() -> None:
    configuration = Configuration(
        "with a store",
        {"mode": "hotstuff", "rate": "1000,2000", "store": True},
        crash=("2@5:15",),
        kill_leader_every="5",
    )
    assert configuration.command() == (
        "fab local --mode=hotstuff --rate=1000,2000 --store --crash=2@5:15 --kill-leader-every=5"
    )


@pytest.fixture(scope="module")
def run_summary(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    logs = write_run(tmp_path_factory.mktemp("run"))
    return summarize(load_run(logs), {"mode": "hotcrypto", "nodes": 2})


def _at(summary: Summary, rate: int, delivered: float) -> Summary:
    """`summary` as a run asked for `rate` that delivered `delivered` tx/s (its executor got
    through as many)."""
    stages = tuple(
        replace(row, throughput=delivered) if row.name == "executor" else row
        for row in summary.stages
    )
    return replace(
        summary,
        config={**summary.config, "rate": rate},
        end_to_end=replace(summary.end_to_end, tps=delivered),
        stages=stages,
    )


def _leaders_page(summary: Summary, tmp_path: Path, delivered: dict[str, tuple[float, ...]]) -> str:
    """The quick leaders page of runs asked for 1,000 tx/s that delivered, per scenario, what
    `delivered` says (a run each)."""
    outcomes = [
        Outcome(c, [_at(summary, 1000, d) for d in delivered[c.label.split(": ", 1)[1]]])
        for c in EXPERIMENTS["leaders"].configurations(True)
        if c.label.split(": ", 1)[1] in delivered
    ]
    page = Page("leaders", "Leaders", tmp_path)
    EXPERIMENTS["leaders"].write(outcomes, page)
    return "\n".join(page.lines)


def test_each_leaders_row_is_held_to_the_fault_free_run_of_as_many_nodes(
    run_summary: Summary, tmp_path: Path
) -> None:
    delivered = {
        "fault-free": 1000,
        "--faults=1": 900,
        "--nodes=7": 500,
        "--nodes=7 --faults=2": 450,
    }
    text = _leaders_page(run_summary, tmp_path, {k: (v,) for k, v in delivered.items()})
    assert "| --faults=1 | 1 | 900 | 90% |" in text
    assert "| --nodes=7 | 1 | 500 | 100% |" in text
    assert "| --nodes=7 --faults=2 | 1 | 450 | 90% |" in text
    # The round-robin table says why a crashed member costs it two rounds in every n.
    assert ("`--leader=round-robin`" in text) == (ROUND_ROBIN_LOSSES in text)


def test_a_leaders_row_of_several_runs_gives_their_spread_and_the_ratio_of_medians(
    run_summary: Summary, tmp_path: Path
) -> None:
    delivered = {"fault-free": (990, 1000, 1010), "--faults=1": (850, 900, 920)}
    text = _leaders_page(run_summary, tmp_path, delivered)
    assert "| fault-free | 3 | 1,000 (990-1,010) | 100% |" in text
    assert "| --faults=1 | 3 | 900 (850-920) | 90% |" in text


def test_the_full_workloads_experiment_settles_every_hotmove_capacity() -> None:
    full = EXPERIMENTS["workloads"].configurations(False)
    hotmove = [c for c in full if c.flags["mode"] == "hotmove"]
    assert hotmove
    assert all(c.search is not None for c in hotmove)
    assert all(c.search is None for c in full if c.flags["mode"] == "movevm")
    assert all(c.search is None for c in EXPERIMENTS["workloads"].configurations(True))


def test_the_full_leaders_and_faults_experiments_repeat_every_scenario() -> None:
    for name in ("leaders", "faults"):
        for quick, runs in ((True, "1"), (False, "3")):
            assert {c.flags["runs"] for c in EXPERIMENTS[name].configurations(quick)} == {runs}


def test_the_overload_verdict_finds_the_capacity_and_the_holes(run_summary: Summary) -> None:
    runs = [
        _at(run_summary, 100, 99),
        _at(run_summary, 200, 199),
        _at(run_summary, 300, 150),  # one run of 300 fell behind: a hole below the capacity
        _at(run_summary, 300, 299),
        _at(run_summary, 400, 398),
        _at(run_summary, 600, 420),
    ]
    lines = verdict(runs)
    assert lines[0] == "- Capacity (highest rate at which every run kept up): 400 tx/s."
    assert "at: 300 tx/s" in lines[1]
    assert "worst run delivered 420 tx/s, 100% of the best" in lines[2]
    above = verdict(
        [_at(run_summary, 100, 100), _at(run_summary, 200, 150), _at(run_summary, 300, 100)]
    )
    assert above[1] == "- Every run at every rate below it kept up."
    assert "worst run delivered 100 tx/s, 67% of the best run (150 tx/s" in above[2]
    # The synthetic nodes use 0.7 cores each in every run: the same CPU, different costs.
    assert above[3] == (
        "- Those runs' nodes used 1.40-1.40 cores between them, at 4666.67-7000.00 µs of a"
        " node's CPU per transaction: each got the same CPU, so they differ in what a"
        " transaction cost, not in the CPU they got."
    )


def test_the_overload_verdict_says_when_saturated_runs_got_different_cpu(
    run_summary: Summary,
) -> None:
    starved = replace(
        run_summary,
        resources=replace(
            run_summary.resources,
            nodes=replace(run_summary.resources.nodes, cpu_cores=0.35),
        ),
    )
    runs = [_at(run_summary, 100, 100), _at(run_summary, 200, 150), _at(starved, 200, 100)]
    line = verdict(runs)[3]
    assert line.startswith("- Those runs' nodes used 0.70-1.40 cores between them, at 3500.00-")
    assert line.endswith("per transaction.")


def test_attested_is_held_to_all_at_every_rate_and_to_its_capacity_above_it(
    run_summary: Summary,
) -> None:
    all_, attested = [c for c in EXPERIMENTS["overload"].configurations(True)][2:4]
    assert (all_.flags["verify"], attested.flags["verify"]) == ("all", "attested")

    def runs(rate: int, *delivered: float) -> list[Summary]:
        return [_at(run_summary, rate, d) for d in delivered]

    outcomes = [
        Outcome(all_, runs(100, 100, 100, 100) + runs(200, 150, 150, 150)),
        Outcome(attested, runs(100, 100, 100, 100) + runs(200, 160, 160, 160)),
    ]
    lines = versus(outcomes)
    assert lines[0] == (
        "- 100 tx/s asked: `attested` delivered 100 tx/s (median), `all` 100: +0% (ranges overlap)."
    )
    assert lines[1] == (
        "- 200 tx/s asked: `attested` delivered 160 tx/s (median), `all` 150: +7% (ranges apart)."
    )
    assert lines[2] == "- `attested` delivered at least what `all` delivered at every rate."
    # Its capacity is 100 tx/s: above it, it delivered more than that.
    assert "`attested`'s worst run delivered 160 tx/s, 160% of it" in lines[3]
    collapsed = [outcomes[0], Outcome(attested, runs(100, 90, 91, 92))]
    assert versus(collapsed)[-1] == (
        "- `attested` delivered less than `all`, the runs' ranges apart, at: 100."
    )
    # A lower median within the runs' spread is no loss.
    noisy = [outcomes[0], Outcome(attested, runs(100, 99, 99.5, 101))]
    assert versus(noisy)[0].endswith("(ranges overlap).")
    assert versus(noisy)[-1].startswith(
        "- `attested` never delivered less than `all` beyond the runs' spread: its median was"
        " lower at 100,"
    )
    assert versus(outcomes[:1]) == ["- Needs runs of both."]


def test_forged_runs_are_held_to_the_valid_rate_and_set_beside_the_honest_ones(
    run_summary: Summary,
) -> None:
    honest_all, honest_attested, forged_all, forged_attested = [
        c for c in EXPERIMENTS["overload"].configurations(True)
    ][2:]
    assert forged_all.flags["invalid_share"] == "0.1"
    assert forged_attested.label == "hotcrypto --verify=attested, 10% forged"

    def with_forged(rate: int, tps: float) -> Summary:
        run = _at(run_summary, rate, tps)
        return replace(run, config={**run.config, "invalid_share": 0.1})

    # Asked 100 with one in ten forged, 90 delivered is all the valid ones: kept up.
    rule = Rule()
    assert kept_up_cell(rule, [with_forged(100, 90)]) == "1 of 1"
    assert kept_up_cell(rule, [_at(run_summary, 100, 90)]) == "0 of 1 (a 1)"
    outcomes = [
        Outcome(honest_all, [_at(run_summary, 200, 150)] * 3),
        Outcome(honest_attested, [_at(run_summary, 200, 180)] * 3),
        Outcome(forged_all, [with_forged(200, 120)] * 3),
        Outcome(forged_attested, [with_forged(200, 170)] * 3),
    ]
    lines = forged(outcomes)
    assert lines == [
        "- `all`, 200 tx/s asked: 120 (120-120) valid tx/s delivered with forgeries, 150"
        " (150-150) without: -20%.",
        "- `all`: with forgeries, the best median 120 tx/s is 80% of the 150 without, at these"
        " rates: below the 85% wanted.",
        "- `attested`, 200 tx/s asked: 170 (170-170) valid tx/s delivered with forgeries, 180"
        " (180-180) without: -6%.",
        "- `attested`: with forgeries, the best median 170 tx/s is 94% of the 180 without, at"
        " these rates: within the 85% wanted.",
    ]
    # The forged runs stay out of `attested` against `all`.
    assert forged(outcomes[:2])[0] == "- `all`: needs runs with and without forgeries at one rate."


NUMBER = re.compile(r"\d[\d,]*")
Table = tuple[list[str], list[dict[str, str]]]


def tables(page: str) -> list[Table]:
    """Every Markdown table of a page: its headers, and its rows keyed by header."""
    found: list[Table] = []
    lines = page.splitlines()
    for i, line in enumerate(lines):
        if not (line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---")):
            continue
        headers = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows = []
        for row in lines[i + 2 :]:
            if not row.startswith("| "):
                break
            cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
            rows.append(dict(zip(headers, cells, strict=True)))
        found.append((headers, rows))
    return found


def table_with(page: str, header: str) -> list[list[dict[str, str]]]:
    """The rows of every table that has a column `header`; at least one such table."""
    found = [rows for headers, rows in tables(page) if header in headers]
    assert found, f"no table with a column {header!r}:\n{page}"
    return found


def numbers_in(rows: list[dict[str, str]], *columns: str) -> None:
    """Each of `columns` is there and holds a figure in every row."""
    assert rows
    for row in rows:
        for column in columns:
            assert NUMBER.search(row[column]), f"{column!r} has no figure in {row}"


def _first_columns(page: str) -> None:
    """Every row of the page's own tables has its first three figures (the speed probe's table,
    every page's, is checked apart)."""
    found = [(headers, rows) for headers, rows in tables(page) if headers[-1] != PROBE_LAST]
    assert found, page
    for headers, rows in found:
        for row in rows:
            cells = [row[h] for h in headers[1:4]]
            assert all(NUMBER.search(cell) for cell in cells), row


# The last column of the speed probe's table.
PROBE_LAST = "load average after"


def _modes(page: str) -> None:
    (rows,) = table_with(page, "capacity (tx/s)")
    assert [r["configuration"] for r in rows] == [
        c.label for c in EXPERIMENTS["modes"].configurations(True)
    ]
    numbers_in(
        rows,
        "capacity (tx/s)",
        "delivered at capacity, median (min-max) (tx/s)",
        "projection, 4 cores per node (tx/s)",
    )
    with_report = [r for r in rows if r["configuration"] in CAPACITY]
    assert len(with_report) == len(CAPACITY)
    numbers_in(with_report, "report's (tx/s)", "capacity / report's", "projection / report's")
    numbers_in(with_report, "peak mean delivered over the sweep, at the rate asked (tx/s)")
    (ratios,) = table_with(page, "ratio")
    assert len(ratios) == 4
    numbers_in(ratios, "capacity", "projection (4 cores)", "report's")
    (sweeps,) = table_with(page, "rate asked (tx/s)")
    numbers_in(sweeps, "runs", "delivered, median (min-max)")
    assert all(re.fullmatch(r"(yes|no) \(\d+ of \d+\)|-", r["kept up"]) for r in sweeps)
    # Every mode at its capacity: a profiled node's threads and its flame graph, the queues
    # between its stages, the latency of each hop.
    (profiles,) = table_with(page, "flame graph")
    assert [r["configuration"] for r in profiles] == [r["configuration"] for r in rows]
    numbers_in(profiles, "samples", "consensus threads", "verifier threads", "executor threads")
    assert all(
        re.fullmatch(r"\[profile-\S+\]\(modes/flamegraph-\S+\.svg\)", r["flame graph"])
        for r in profiles
    )
    (queues,) = table_with(page, "queue mean")
    assert {r["channel"] for r in queues} >= {"`consensus->verifier`", "`verifier->executor`"}
    numbers_in(queues, "queue mean", "queue max", "producer blocked on it", "consumer busy")
    (hops,) = table_with(page, "send → receive")
    numbers_in(hops, "send → receive", "quorum → commit")
    assert "projection errs low" in page
    (energy,) = table_with(page, "energy per tx (mJ), median")
    kept = [r for r in energy if r["energy figure"] != "-"]
    assert kept, page
    numbers_in(kept, "energy per tx (mJ), median", "tx per joule", "USD per million tx (c5.xlarge)")
    assert "- Diem, the chain (1,000 tx/s): " in page


def _multi_region(page: str) -> None:
    (rows,) = table_with(page, "batch fill")
    # Two placements, two modes, two rates; a bound per mode in both placements, one rate.
    assert len(rows) == 12
    bounds = table_with(page, "bound")
    assert len(bounds) == 2  # a table per mode
    for bound_rows in bounds:
        assert [r["bound"] for r in bound_rows] == ["2 MiB"] * 2 + ["8 MiB (default)"] * 2
        assert [r["placement"] for r in bound_rows] == ["one region", "four regions"] * 2
        numbers_in(bound_rows, "delivered at the highest rate", "rounds/s")
    numbers_in(rows, *[h for h in rows[0] if h != "placement"])
    # A run a rate (`--quick`): no comparison is settled, and the page says so for each mode and
    # each bound.
    verdicts = re.findall(r"^- (?:[\d.]+ MiB(?: \(default\))?: )?\*\*Not settled\*\*", page, re.M)
    assert len(verdicts) == 6, page
    same_load = re.findall(r"^- At [\d,]+ tx/s asked .* rounds a second", page, re.MULTILINE)
    assert len(same_load) == 2, page
    assert re.search(r"round trips [\d,]+ to [\d,]+ ms", page)


def _faults(page: str) -> None:
    for rows in table_with(page, "scenario"):
        assert len(rows) == 6
        numbers_in(rows, "delivered tx/s", "of fault-free (medians)", "end-to-end p50 ms")
        for row in rows:
            assert re.fullmatch(r"ok \(\d+ checks\)", row["audit"]), row
        came_back = [r for r in rows if not r["scenario"].startswith(("fault-free", "crash from"))]
        assert len(came_back) == 4
        for row in came_back:
            assert re.search(r"\d+\.\d s", row["caught up after coming back"]), row
        restarted = [r for r in came_back if not r["scenario"].startswith("partition")]
        numbers_in(restarted, "commits resumed after the last restart")
    assert len(table_with(page, "scenario")) == len(faults.QUICK_RULES)


def _workloads(page: str) -> None:
    found = table_with(page, "workload")
    assert len(found) == 2  # movevm, hotmove
    for rows in found:
        assert len(rows) == 5
        numbers_in(
            rows,
            "bare tx/s",
            "bare executor µs/tx",
            "adapter tx/s",
            "adapter executor µs/tx",
        )
    # hotmove: beside each capacity, what its runs processed (a sweep that kept up nowhere has
    # no capacity, and says so in the column before).
    for vm in ("bare", "adapter"):
        kept = [r for r in found[1] if not r[f"{vm} tx/s"].startswith("none kept up")]
        if kept:
            numbers_in(kept, f"{vm} processed at it, median (min-max)")


def _store(page: str) -> None:
    found = table_with(page, "measure")
    assert len(found) == 2  # hotstuff, hotcrypto
    for rows in found:
        both = [r for r in rows if r["measure"] != "store µs/tx"]
        numbers_in(
            both,
            "without --store, median (min-max)",
            "--store, median (min-max)",
            "with / without per pair, median (min-max)",
        )
        (store_row,) = [r for r in rows if r["measure"] == "store µs/tx"]
        numbers_in([store_row], "--store, median (min-max)")
    for rows in table_with(page, "pair"):
        assert len(rows) == 1  # a quick run makes one pair per mode
        numbers_in(rows, *rows[0])


def _parallel(page: str) -> None:
    # The quick run leaves the bench out (see `parallel_execution.QUICK_BENCH`).
    (projected,) = table_with(page, "`--exec`")
    # One measured row per `--exec`: nodes of more cores are the scale page's, measured.
    assert [r["`--exec`"] for r in projected] == ["sequential", "blockstm"]
    numbers_in(projected, "delivered tx/s", "executor µs/tx", "projection, 4 cores per node (tx/s)")
    assert "[scale page](scale.md)" in page


def _scale(page: str) -> None:
    (runs,) = table_with(page, "real s a run")
    numbers_in(runs, "K", "V", "s (dilated)", "real s a run")
    (committee,) = table_with(page, "one bound a round, tx/s")
    assert [r["nodes"] for r in committee] == ["4", "7"]
    numbers_in(committee, "K", "delivered tx/s", "rounds/s", "node µs/tx", "bytes moved/tx")
    assert re.search(r"^- \*\*hotstuff at 7 nodes delivered \d\.\d\d times", page, re.M)
    (regions,) = table_with(page, "placement")
    assert [r["placement"] for r in regions] == ["one region", "three regions"]
    (model,) = table_with(page, "model tx/s")
    assert {r[""] for r in model} == {"fitted", "judged"}
    numbers_in(model, "model tx/s", "delivered tx/s")
    assert re.search(
        r"^- Error on the 2 points the model was not fitted on: median \d+%", page, re.M
    )


def _scale_cores(page: str) -> None:
    (runs,) = table_with(page, "real s a run")
    numbers_in(runs, "K", "V", "s (dilated)", "real s a run")
    (cores,) = table_with(page, "verifier µs/tx")
    assert [r["family"] for r in cores] == ["hotcrypto"]
    numbers_in(cores, "K", "delivered tx/s", "verifier µs/tx")
    (model,) = table_with(page, "model tx/s")
    # One point, the one its model is fitted on: nothing is left to judge.
    assert [r[""] for r in model] == ["fitted"]
    assert "- No point was left out of the fit: nothing to judge." in page


def _scale_cores_36(page: str) -> None:
    (runs,) = table_with(page, "real s a run")
    numbers_in(runs, "K", "V", "s (dilated)", "real s a run")
    # A quick run reads the quick record of scale-cores, which is never committed.
    assert "The smaller nodes are left out: no usable record of scale-cores's page" in page
    (cores,) = table_with(page, "verifier µs/tx")
    assert [(r["family"], r["vCPUs"]) for r in cores] == [("hotcrypto", "0.8")]
    numbers_in(cores, "K", "delivered tx/s", "verifier µs/tx")


def _links(page: str) -> None:
    (links,) = table_with(page, "link Mbit/s")
    assert [r["link Mbit/s"] for r in links] == ["no limit", "25"]
    numbers_in(links, "delivered tx/s: median (min-max)", "a node's traffic, Mbit/s")
    # A run each (`--quick`): the comparison is not settled, and the page says so.
    assert "- `hotstuff`: **not settled** against 25 Mbit/s" in page
    (batches,) = table_with(page, "batch size B")
    assert [r["batch size B"] for r in batches] == ["50,000", "500,000"]
    numbers_in(batches, "delivered tx/s: median (min-max)", "rounds/s")
    assert "- 4 nodes: **not settled**: no single batch size delivered most;" in page
    (verifier,) = table_with(page, "verifier µs/tx")
    assert [r["`--batch-size` B"] for r in verifier] == ["15,200", "76,000"]
    numbers_in(verifier, "tx per batch", "verifier µs/tx", "delivered tx/s")
    assert re.search(r"^- At [\d,]+ transactions a batch the verifier spent [\d.]+ µs", page, re.M)


def _diemvm(page: str) -> None:
    (rows,) = table_with(page, "adapter µs/tx")
    by_what = {r["what"]: r for r in rows}
    numbers_in([by_what["all"]], "bare µs/tx", "adapter µs/tx", "the adapter adds µs/tx")
    # The adapter's own parts show in its profile, and not in the bare VM's.
    for part in ("prologue", "epilogue and fees"):
        assert re.match(r"[\d.]+ \(\d+%\)", by_what[part]["adapter µs/tx"]), by_what[part]
        assert by_what[part]["bare µs/tx"].startswith("0.00"), by_what[part]
    assert re.search(r"^- Adapter over bare: \d\.\d\d here against the report's 0\.125", page, re.M)


def _dilation(page: str) -> None:
    """The gate's table: the undilated row and a dilated one with each figure, its deviation in
    brackets, and a verdict by the rule; then which K passed."""
    (gate,) = table_with(page, "verdict")
    assert [r["K"] for r in gate] == ["1 (undilated)", "2"]
    numbers_in(gate, "delivered tx/s", "e2e p50 ms", "rounds/s", "node CPU µs/tx")
    assert re.search(r"\([+-]\d+%\)$", gate[1]["delivered tx/s"]), gate[1]
    assert re.fullmatch(r"agrees|(\S.* [+-]\d+%(, )?)+", gate[1]["verdict"]), gate[1]
    passed = r"^K passed by every configuration run at it .*: (2|none), of 2 tried"
    assert re.search(passed, page, re.M)


PAGE_CHECKS = {
    "overload": _first_columns,
    "leaders": _first_columns,
    "modes": _modes,
    "multi-region": _multi_region,
    "faults": _faults,
    "workloads": _workloads,
    "store": _store,
    "parallel": _parallel,
    "scale": _scale,
    "scale-cores": _scale_cores,
    "scale-cores-36": _scale_cores_36,
    "links": _links,
    "diemvm": _diemvm,
    "dilation": _dilation,
}


def test_every_experiment_has_its_page_checked() -> None:
    assert set(PAGE_CHECKS) == set(EXPERIMENTS)


@pytest.mark.e2e
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_each_quick_experiment_writes_its_page(
    name: str, tmp_path: Path, built_binaries: Path
) -> None:
    result = fab(
        "experiment", f"--name={name}", "--quick", "--no-build", f"--output={tmp_path / 'pages'}",
        f"--binaries={built_binaries}", *run_flags(tmp_path), timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = (tmp_path / "pages" / f"{name}.md").read_text()
    assert "Runs that did not finish" not in page, page
    assert "- Machine: " in page
    assert " cores, " in page
    assert re.search(r"- Commit: `[0-9a-f]{12}", page)
    configurations = EXPERIMENTS[name].configurations(True)
    assert "## The machine during the runs" in page
    (probes,) = [rows for headers, rows in tables(page) if headers[-1] == PROBE_LAST]
    assert [r["configuration"] for r in probes] == [c.label for c in configurations]
    numbers_in(probes, "SHA-256 MB/s, before / after", "signatures/s, before / after")
    for configuration in configurations:
        assert f"`{configuration.command()}`" in page
    PAGE_CHECKS[name](page)
    figures = re.findall(r"\]\(([^)]+\.png)\)", page)
    for figure in figures:
        assert (tmp_path / "pages" / figure).stat().st_size > 0

    # As on a clone: without the runs' logs, the page and its figures are written again from
    # the record committed beside it, byte for byte.
    drawn = {figure: (tmp_path / "pages" / figure).read_bytes() for figure in figures}
    shutil.rmtree(tmp_path / "logs")
    again = fab(
        "experiment", f"--name={name}", "--quick", "--rewrite", f"--output={tmp_path / 'pages'}",
        *run_flags(tmp_path), timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert (tmp_path / "pages" / f"{name}.md").read_text() == page
    for figure, before in drawn.items():
        assert (tmp_path / "pages" / figure).read_bytes() == before, figure


def test_the_speed_probe_does_its_work_on_every_core() -> None:
    found = probe(0.05)
    assert found.sha256_mb_per_s > 0
    assert found.signatures_per_s > 0
    assert found.load >= 0


def test_a_page_shows_the_probe_around_each_configuration_and_the_drift(tmp_path: Path) -> None:
    configurations = EXPERIMENTS["overload"].configurations(True)
    fast, slow = Probe(2_000.0, 40_000.0, 0.5), Probe(1_500.0, 30_000.0, 2.25)
    outcomes = [
        Outcome(configurations[0], probe_before=fast, probe_after=slow),
        Outcome(configurations[1], probe_before=slow, probe_after=fast),
    ]
    page = Page("overload", "Overload", tmp_path)
    machine_section(page, outcomes)
    text = "\n".join(page.lines)
    assert "| in-memory store | 2,000 / 1,500 | 40,000 / 30,000 | 2.25 |" in text
    assert "- SHA-256 on every core: 1,500-2,000 MB/s over 3 probes, 33% apart." in text
    assert "- 1-minute load average at the probes: 0.50-2.25." in text


def test_the_drift_counts_the_probes_of_a_configuration_run_again_alone(tmp_path: Path) -> None:
    # `--only`: the second configuration ran again later, between probes of its own; the first
    # and the third keep the probes of the run before, which were chained.
    configurations = EXPERIMENTS["modes"].configurations(True)
    first, second, third = (Probe(2_000.0 + i, 40_000.0, 1.0) for i in range(3))
    again_before, again_after = Probe(2_100.0, 41_000.0, 2.0), Probe(1_400.0, 39_000.0, 3.0)
    outcomes = [
        Outcome(configurations[0], probe_before=first, probe_after=second),
        Outcome(configurations[1], probe_before=again_before, probe_after=again_after),
        Outcome(configurations[2], probe_before=third, probe_after=first),
    ]
    page = Page("modes", "Modes", tmp_path)
    machine_section(page, outcomes)
    text = "\n".join(page.lines)
    assert "- SHA-256 on every core: 1,400-2,100 MB/s over 6 probes, 50% apart." in text


def test_a_stack_is_put_in_the_most_specific_category_one_of_its_frames_matches() -> None:
    run = "main;movevm::run;executor::adapter::rules::AdapterRules::run"
    folded = [
        f"{run};executor::adapter::rules::AdapterRules::prologue;move_vm_runtime::execute 40",
        f"{run};executor::adapter::rules::payload;move_vm_runtime::execute 30",
        f"{run};executor::adapter::rules::payload;executor::move_vm::gas::Meter::charge 10",
        f"{run};executor::adapter::rules::AdapterRules::prologue;bcs::to_bytes 5",
        "main;movevm::generator;rand::next 15",
    ]
    counts: dict[str, int] = {}
    for frames, samples in parse_folded(folded):
        name = diemvm.category_of(frames)
        counts[name] = counts.get(name, 0) + samples
    assert counts == {
        "prologue": 40,
        "the payload (the script)": 30,
        "gas metering": 10,
        "serialization (BCS, serde)": 5,
        diemvm.OTHER: 15,
    }

"""`diemvm`: where the adapter's time goes. The report measured its DiemVM at an eighth of the bare
Move VM and left "where the DiemVM spends this additional time" to further work; the adapter here
(`executor/src/adapter`) rebuilds what Diem's puts around the VM, and a profile can answer it.

`movevm` (one process: a generator thread feeding the VM, no consensus, no signatures, the
report's setup) bare and behind the adapter, each run with `--profile`. Every sampled stack of
the process is put in the first of `CATEGORIES` one of its frames matches (most specific first:
serialization inside the prologue counts as serialization), and each category's share of the
samples times the process's CPU per transaction gives its µs per transaction. The adapter's
prologue, payload and epilogue are functions of their own (`adapter/rules.rs` keeps them out of
line) so that they show as frames.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from ..analysis.resources.profiles import FLAMEGRAPH, FOLDED, parse_folded
from ..analysis.run_summary import Summary
from .experiment import Configuration, Experiment, Outcome
from .measures import delivered, fmt, median_of, spread
from .page import Page
from .report_figures import CAPACITY

BARE = "movevm (bare VM)"
ADAPTER = "movevm --vm=adapter"
OTHER = "everything else (generator, ledger, hashing)"
# (category, substrings of a frame that put a stack in it), most specific first.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("serialization (BCS, serde)", ("bcs::", "serde::", "serialize", "deserialize")),
    ("gas metering", ("gas::Meter", "GasMeter", "intrinsic_gas", "charge_")),
    (
        "session set-up and finish",
        ("new_session", "Session<S>::finish", "Session::finish", "SessionExt"),
    ),
    ("prologue", ("rules::AdapterRules::prologue", "::prologue")),
    ("epilogue and fees", ("::epilogue", "credit_fees", "charge_after_failure")),
    ("the payload (the script)", ("rules::payload", "execute_function", "execute_script")),
    ("the VM outside a session's calls", ("move_vm_runtime", "move_vm_types")),
)


def _configurations(quick: bool) -> Sequence[Configuration]:
    runs = {"runs": "1", "duration": "3"} if quick else {"runs": "3", "duration": "10"}
    return [
        Configuration(BARE, {"mode": "movevm", **runs}, profile=True),
        Configuration(ADAPTER, {"mode": "movevm", "vm": "adapter", **runs}, profile=True),
    ]


def category_of(frames: Sequence[str]) -> str:
    for name, needles in CATEGORIES:
        if any(needle in frame for frame in frames for needle in needles):
            return name
    return OTHER


@dataclass(frozen=True)
class Breakdown:
    samples: int
    shares: dict[str, float]
    flamegraphs: tuple[Path, ...]


PROFILE = "profile"


def read_logs(summary: Summary) -> dict[str, Any]:
    """What the page reads from a run's logs: its profiles' samples by category, and its flame
    graphs."""
    counts: Counter[str] = Counter()
    graphs = []
    logs = summary.config.get("logs")
    for folded in sorted(Path(str(logs)).glob(f"profile-*/{FOLDED}")) if logs else []:
        for frames, count in parse_folded(folded.read_text().splitlines()):
            counts[category_of(frames)] += count
        graph = folded.with_name(FLAMEGRAPH)
        if graph.exists():
            graphs.append(str(graph))
    return {PROFILE: {"samples": dict(sorted(counts.items())), "flamegraphs": graphs}}


def breakdown(summaries: Sequence[Summary]) -> Breakdown | None:
    """The categories' shares over every profile of the runs."""
    counts: Counter[str] = Counter()
    graphs = []
    for summary in summaries:
        profile = (summary.readings or read_logs(summary))[PROFILE]
        counts.update(profile["samples"])
        graphs += [Path(graph) for graph in profile["flamegraphs"]]
    total = sum(counts.values())
    if not total:
        return None
    return Breakdown(total, {c: n / total for c, n in counts.items()}, tuple(graphs))


def us_per_tx(summary: Summary) -> float | None:
    """The process's CPU per transaction delivered (µs): all its threads."""
    used = summary.resources.nodes.cpu_cores if summary.resources else None
    tps = delivered(summary)
    return None if used is None or tps <= 0 else used * 1e6 / tps


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    runs = {o.configuration.label: o.summaries for o in outcomes}
    bare, adapter = runs.get(BARE, []), runs.get(ADAPTER, [])
    costs = {label: median_of([us_per_tx(s) for s in r]) for label, r in runs.items()}
    parts = {label: breakdown(r) for label, r in runs.items()}
    page.section(
        "Throughput",
        f"- Bare: {spread([delivered(s) for s in bare])} tx/s; behind the adapter:"
        f" {spread([delivered(s) for s in adapter])} tx/s (median (min-max) of the runs).",
        *_ratio_line(bare, adapter),
    )
    page.section(
        "Where the time goes",
        "µs of the process's CPU per transaction, by what the sampled stack was doing (the"
        " first category a frame of it matches; `benchmark/experiments/diemvm.py` lists the"
        " frames); share of the samples in brackets.",
    )
    names = [name for name, _ in CATEGORIES] + [OTHER]
    rows = []
    for name in names:
        cells = []
        for label in (BARE, ADAPTER):
            found, cost = parts.get(label), costs.get(label)
            share = found.shares.get(name, 0.0) if found else None
            cells.append(
                "-" if share is None or cost is None else f"{share * cost:,.2f} ({share:.0%})"
            )
        added = _added(parts, costs, name)
        if all(cell.startswith("0.00 (0%)") for cell in cells):
            # No sample: the work has no frame of its own in this build (inlined into its
            # caller's), not no work.
            cells = ["no frame of its own"] * 2
            added = None
        rows.append([name, *cells, fmt(added, 2)])
    rows.append(["all", fmt(costs.get(BARE), 2), fmt(costs.get(ADAPTER), 2), fmt(_total(costs), 2)])
    page.table(["what", "bare µs/tx", "adapter µs/tx", "the adapter adds µs/tx"], rows)
    if any(row[1] == "no frame of its own" for row in rows if row[0] == "gas metering"):
        page.add(
            "",
            "Gas metering has no frame of its own in this build: the meter's calls are inlined"
            " into the interpreter, so its cost is inside the payload's row (the adapter runs the"
            " payload metered, the bare VM unmetered).",
        )
    graphs = []
    for label, stem in ((BARE, "bare"), (ADAPTER, "adapter")):
        found = parts.get(label)
        if found is None or not found.flamegraphs:
            continue
        # Beside the page, so that the link works wherever the page is read; a page written
        # again where the runs' logs are not keeps the copy it has.
        page.figure_dir.mkdir(parents=True, exist_ok=True)
        copy = page.figure_dir / f"flamegraph-{stem}.svg"
        if found.flamegraphs[0].is_file():
            shutil.copyfile(found.flamegraphs[0], copy)
        if copy.is_file():
            graphs.append(f"[{label}]({page.name}/{copy.name})")
    if graphs:
        page.add("", "Flame graphs of one run each: " + ", ".join(graphs) + ".")
    page.section("What Diem's framework does that this adapter does not", *DIEM_EXTRAS)
    _plot(parts, costs, names, page)


def _added(
    parts: dict[str, Breakdown | None], costs: dict[str, float | None], name: str
) -> float | None:
    values = []
    for label in (BARE, ADAPTER):
        found, cost = parts.get(label), costs.get(label)
        if found is None or cost is None:
            return None
        values.append(found.shares.get(name, 0.0) * cost)
    return values[1] - values[0]


def _total(costs: dict[str, float | None]) -> float | None:
    bare, adapter = costs.get(BARE), costs.get(ADAPTER)
    return None if bare is None or adapter is None else adapter - bare


def _ratio_line(bare: Sequence[Summary], adapter: Sequence[Summary]) -> list[str]:
    ours_bare = median_of([delivered(s) for s in bare])
    ours_adapter = median_of([delivered(s) for s in adapter])
    report = CAPACITY["movevm --vm=adapter"].low / CAPACITY["movevm"].low
    if not ours_bare or ours_adapter is None:
        return []
    return [
        f"- Adapter over bare: {ours_adapter / ours_bare:.2f} here against the report's"
        f" {report:.3f} (its DiemVM {CAPACITY['movevm --vm=adapter'].text()} tx/s over its Move"
        f" VM {CAPACITY['movevm'].text()})."
    ]


DIEM_EXTRAS = (
    "Read from Diem's framework (`DiemAccount.move`, `TransactionFee.move`) and set beside"
    " `executor/move/Account.move`; each is work per transaction the report's DiemVM did and"
    " this adapter does not, so part of the gap between the two ratios:",
    "",
    "- the prologue also checks the chain id, the transaction's expiration time against the"
    " chain's clock (a read of `DiemTimestamp`), that the account is not frozen, the gas price"
    " and currency, and that max gas covers the intrinsic cost; here it checks the sequence"
    " number, the authentication key and the balance only;",
    "- balances are per currency (`Balance<Currency>` resources, the gas currency chosen per"
    " transaction), and a payment emits a sent and a received event on the two accounts' event"
    " handles; here one coin, no events;",
    "- the epilogue pays the fee through `TransactionFee` into a per-currency pool; here a"
    " transfer, or a deduction credited once per block (`--fees=block`);",
    "- the DiemVM verifies the transaction's signature and the script against an allow-list"
    " before the VM runs, which the report's setup turned off.",
)


def _plot(
    parts: dict[str, Breakdown | None], costs: dict[str, float | None], names: list[str], page: Page
) -> None:
    figure, axes = plt.subplots(figsize=(8, 4))
    bottoms = [0.0, 0.0]
    labels = [BARE, ADAPTER]
    for name in names:
        heights = []
        for label in labels:
            found, cost = parts.get(label), costs.get(label)
            heights.append(found.shares.get(name, 0.0) * cost if found and cost else 0.0)
        axes.bar(labels, heights, bottom=bottoms, label=name)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    axes.set_ylabel("CPU per transaction (µs)")
    axes.legend(fontsize=7)
    page.figure(figure, "breakdown", "Where a transaction's CPU goes, bare and behind the adapter")


DIEMVM = Experiment(
    name="diemvm",
    title="DiemVM: where the adapter's time goes",
    question=(
        "The report's DiemVM ran at an eighth of its bare Move VM and it left where the time"
        " goes to further work. From profiles of `movevm` bare and behind the adapter: how much"
        " CPU per transaction do the prologue, the epilogue, gas metering, sessions,"
        " serialization and the script take, and what would Diem's framework add?"
    ),
    configurations=_configurations,
    write=_write,
    read_logs=read_logs,
)

"""Human-readable rendering of a run's summary (the text `fab local` and `fab remote` print)."""

from __future__ import annotations

from ..analysis.consensus.rounds import rounds_section
from ..analysis.run_summary import StageRow, Summary, Throughput, dilation
from ..analysis.stats import LatencyStats
from ..analysis.throughput import beyond_offered
from .sections import (
    cost_section,
    energy_section,
    hops_section,
    profile_section,
    projection_section,
    resources_section,
)

RULE = "-" * 78


def _num(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def _setting(value: float | None, unit: str) -> str:
    """A node parameter: the value that was set, or the node's own default (which the harness
    does not know, on purpose: the node is the one source of its defaults)."""
    return "node default" if value is None else _num(value, suffix=unit)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _latency(stats: LatencyStats) -> str:
    if stats.count == 0:
        return "no samples"
    return (
        f"mean {_num(stats.mean_ms)} ms, p50 {_num(stats.p50_ms)} ms, p99 {_num(stats.p99_ms)} ms"
        f" ({stats.count:,} samples)"
    )


def _throughput(title: str, value: Throughput) -> list[str]:
    return [
        f" + {title}:",
        f"   TPS: {_num(value.tps)} tx/s{_counted(value)}",
        f"   BPS: {_num(value.bps)} B/s",
        f"   Latency: {_latency(value.latency)}",
    ]


def _counted(value: Throughput) -> str:
    """Which nodes the rates are the mean of, when a fault schedule stopped some of them."""
    if value.nodes is None or value.nodes_counted is None or value.nodes_counted == value.nodes:
        return ""
    if value.nodes_counted == 0:
        return " (every node was down in the window: rates within each life, catch-up included)"
    return f" (mean of the {value.nodes_counted} of {value.nodes} nodes up through the window)"


# Who checked signatures (`--verify`), as the configuration lines say it.
_VERIFY_TEXT = {
    "all": "every node checks every one (--verify=all)",
    "attested": "attested (--verify=attested: each batch checked by f+1 stake of members)",
}


def _config(summary: Summary) -> list[str]:
    config = summary.config
    pipeline = summary.pipeline
    lines = [" + CONFIG:", f"   Mode: {summary.mode}"]
    if pipeline.consensus:
        lines += [
            f"   Nodes: {config.get('nodes', '-')} (faults: {config.get('faults', 0)})",
            f"   Input rate: {_num(config.get('rate'))} tx/s",
        ]
        if not pipeline.executes:
            # Opaque transactions of the size asked (the others' size is their encoding).
            lines.append(f"   Transaction size: {_num(config.get('tx_size'))} B")
        lines += [
            f"   Batch size: {_setting(config.get('batch_size'), ' B')}, "
            f"max batch delay: {_setting(config.get('max_batch_delay'), ' ms')}",
        ]
        if pipeline.signatures:
            threads = config.get("verifier_threads")
            lines.append(f"   Verifier threads: {threads if threads else 'node default'}")
            lines.append(f"   Signatures: {_VERIFY_TEXT[config.get('verify', 'all')]}")
        links = []
        if config.get("delay_ms") is not None:
            links.append(f"{config['delay_ms']} ms one way")
        elif config.get("delay_matrix") is not None:
            links.append(f"latencies of {config['delay_matrix']}")
        if config.get("bandwidth_mbit") is not None:
            links.append(f"{config['bandwidth_mbit']:g} Mbit/s each way")
        if links:
            lines.append(f"   Emulated links: {', '.join(links)}")
    if pipeline.runs_move:
        arg = config.get("workload_arg")
        lines.append(
            f"   Move: {config.get('vm', 'bare')} VM, {config.get('payload', 'script')} payloads,"
            f" workload {config.get('workload', 'transfer')}" + (f" ({arg})" if arg else "")
        )
    if pipeline.executes and config.get("dest") not in (None, "ring"):
        lines.append(f"   Payees: {config['dest']} (--dest)")
    if pipeline.runs_move and config.get("exec") not in (None, "sequential"):
        threads = config.get("exec_threads")
        lines.append(
            f"   Execution: {config['exec']}, "
            + (f"{threads} threads" if threads else "a thread per core")
            + f"; fees credited per {'transaction' if config.get('fees') == 'per-tx' else 'batch'}"
        )
    lines += [
        f"   Duration: {config.get('duration', '-')} s "
        f"(steady window {summary.window.seconds:.1f} s after warm-up)",
    ]
    factor = dilation(config)
    if config.get("vcpus") is not None:
        lines.append(
            f"   Emulated nodes: {config['vcpus']:g} virtual CPUs each, each thread at most one,"
            f" clients {config.get('client_vcpus', 1):g} together"
            + (
                f"; time dilated ×{factor}: every clock {factor} times slower, a virtual CPU"
                f" 1/{factor} of a core, figures in dilated time"
                if factor > 1
                else " (undilated)"
            )
        )
    if config.get("run") is not None:
        lines.append(f"   Run: {config['run']}")
    return lines


STAGE_HEADER = (
    f"   {'stage':<10} {'tx/s':>10} {'cpu':>5} {'µs/tx':>7} {'busy':>5} {'blocked':>7}"
    f" {'queue':>7} {'max q':>6} {'batch':>7} {'invalid':>8} {'failed':>7} {'dropped':>8}"
)


def _stage_row(row: StageRow) -> str:
    return (
        f"   {row.name:<10} {_num(row.throughput):>10} {_num(row.cpu_cores, 2):>5}"
        f" {_num(row.us_per_tx, 1):>7} {_share(row.busy_share):>5}"
        f" {_share(row.blocked_share):>7} {_num(row.queue_mean, 1):>7} {_num(row.queue_max):>6}"
        f" {_num(row.batch_size, 1):>7} {_num(row.invalid):>8} {_num(row.failed):>7}"
        f" {_num(row.dropped):>8}"
    )


def render_summary(summary: Summary) -> str:
    lines = ["", RULE, " SUMMARY", RULE, *_config(summary), ""]
    if summary.consensus is not None:
        lines += [*_throughput("CONSENSUS", summary.consensus), ""]
    lines += [*_throughput("END-TO-END", summary.end_to_end)]
    if summary.clients is not None:
        clients = summary.clients
        held = (
            ""
            if clients.held_back_share is None
            else f", held back {clients.held_back_share:.0%} of the window (bursts skipped)"
        )
        lines += [
            f"   Clients: {clients.clients}, sent {_num(clients.sent_tps)} tx/s of "
            f"{_num(clients.target_tps)} tx/s asked{held}, {clients.missed_bursts:,} late bursts, "
            f"{clients.samples_matched:,}/{clients.samples_sent:,} samples matched",
        ]
        excess = beyond_offered(summary.end_to_end.tps, clients)
        if excess is not None:
            lines.append(
                f"   Delivered {excess:.1%} more than the clients sent in the window: it drained"
                " a backlog from before the window, so it is not a steady state"
            )
        if clients.invalid_sent or clients.ingress_invalid:
            dropped = (
                f", {clients.ingress_invalid:,} dropped by the nodes' ingress checks"
                if clients.ingress_invalid is not None
                else ""
            )
            lines.append(f"   Forged: {clients.invalid_sent:,} sent{dropped}")
    rounds = rounds_section(summary.rounds)
    if rounds:
        lines += ["", *rounds]
    lines += [
        "",
        " + STAGES (cpu: cores used; µs/tx: CPU per transaction per node; busy: share of",
        "   wall time working; blocked: on a full output channel; queue: mean/max input length):",
        STAGE_HEADER,
    ]
    lines += [_stage_row(row) for row in summary.stages]
    remote = summary.config.get("where") == "remote"
    for section in (
        hops_section(summary.hops, remote),
        resources_section(summary.resources),
        projection_section(summary.projection),
        cost_section(summary.cost),
        energy_section(summary.energy),
        profile_section(summary.profile),
    ):
        if section:
            lines += ["", *section]
    bottleneck = summary.bottleneck
    lines += [
        "",
        f" + LIMITING STAGE: {bottleneck.stage} ({bottleneck.rule})",
        f"   {bottleneck.explanation}",
    ]
    if bottleneck.evidence:
        lines.append(
            "   "
            + ", ".join(f"{key} = {_evidence(key, v)}" for key, v in bottleneck.evidence.items())
        )
    lines += [f"   {note}" for note in bottleneck.notes]
    malformed = summary.processes.get("malformed_lines", 0)
    if malformed:
        lines.append(f"   ({malformed} malformed METRICS lines skipped)")
    lines += [RULE, ""]
    return "\n".join(_labelled(lines, dilation(summary.config)))


def _labelled(lines: list[str], factor: int) -> list[str]:
    """Every section of a dilated run's summary says so in its heading: its figures are in
    dilated time."""
    if factor <= 1:
        return lines
    mark = f" + [dilated ×{factor}] "
    return [mark + line[3:] if line.startswith(" + ") else line for line in lines]


def _evidence(key: str, value: float) -> str:
    return _share(value) if key.endswith("_share") else _num(value, 1)

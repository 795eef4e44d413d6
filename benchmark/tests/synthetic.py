"""Synthetic METRICS logs with the CPU, process and hop fields, whose numbers are round enough to
check by hand.

Two nodes and two clients report every second from T0 + 1 s to T0 + 10 s, so the steady window is
[T0 + 1.9 s, T0 + 10 s] (8.1 s). Per node and second: 1,000 transactions through every stage;
consensus uses 100 ms of CPU, the verifier `verifier_ms`, the executor 50 ms, the process
`node_ms`; each client uses `client_ms`; every process has 100 MiB resident (clients 20 MiB).
Client k's sample of second s is sent at T0 + s·1000 - 500; node k receives it 5 ms later, seals
it at +50, sees a quorum at +80; every node commits at +150, verifies at +170 and executes at +200,
except that node 1 executes client 0's samples at +190 (not their origin: hops ignore it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmark.faults.events import CRASH, RESTART, FaultEvent, FaultLog

from .conftest import describe_into

T0 = 1_700_000_000_000
MIB = 1024 * 1024
SECONDS = range(1, 11)
OFFSETS = {"receive": 5, "seal": 50, "quorum": 80, "commit": 150, "verify": 170, "execute": 200}


def _process(cpu_ms: float, rss_mib: int, second: int, cores: int) -> dict[str, Any]:
    return {"cpu_ms": cpu_ms * second, "rss_bytes": rss_mib * MIB, "cores": cores}


def node_record(
    index: int, second: int, verifier_ms: float, node_ms: float, cores: int
) -> dict[str, Any]:
    txs = 1000 * second
    samples = []
    for client in range(2):
        sent = T0 + second * 1000 - 500
        for event, offset in OFFSETS.items():
            if event in ("receive", "seal", "quorum") and client != index:
                continue
            late = -10 if (event == "execute" and index == 1 and client == 0) else 0
            samples.append(
                {"id": f"{client}:{second}", "event": event, "t_ms": sent + offset + late}
            )
    stage = {"invalid": 0, "failed": 0, "dropped": 0, "backlog": 0, "batch_size_mean": 100.0}
    return {
        "role": "node",
        "name": f"{index:064x}",
        "mode": "hotcrypto",
        "time_ms": T0 + second * 1000,
        "consensus": {
            "committed_txs": txs,
            "committed_batches": second * 10,
            "committed_bytes": txs * 200,
            "cpu_ms": 100.0 * second,
        },
        "samples": samples,
        "stages": {
            "verifier": {
                **stage,
                "items": txs,
                "busy_ms": 600.0 * second,
                "cpu_ms": verifier_ms * second,
            },
            "executor": {
                **stage,
                "items": txs,
                "executed": txs,
                "busy_ms": 900.0 * second,
                "cpu_ms": 50.0 * second,
            },
        },
        "channels": {
            "consensus->verifier": {"full": 0, "blocked_ms": 0.0, "mean_len": 1.0, "max_len": 2},
            "verifier->executor": {
                "full": 0,
                "blocked_ms": 100.0 * second,
                "mean_len": 3.0,
                "max_len": 5,
            },
        },
        "process": _process(node_ms, 100, second, cores),
    }


def client_record(index: int, second: int, client_ms: float, cores: int) -> dict[str, Any]:
    return {
        "role": "client",
        "name": f"client-{index}",
        "mode": "hotcrypto",
        "time_ms": T0 + second * 1000,
        "sent": 1000 * second,
        "rate": 1000,
        "samples": [{"id": f"{index}:{second}", "t_ms": T0 + second * 1000 - 500}],
        "process": _process(client_ms, 20, second, cores),
    }


def write_run(
    directory: Path,
    *,
    verifier_ms: float = 500.0,
    node_ms: float = 700.0,
    client_ms: float = 250.0,
    cores: int = 2,
    store_ms: float | None = None,
    mode: str = "hotcrypto",
) -> Path:
    """Write node-i.log and client-i.log; returns the directory. With `store_ms`, the nodes ran
    with `--store`: their writer threads use that much CPU a second (a `store` section). The
    records are those of a hotcrypto run; `mode` is the pipeline described beside them."""
    describe_into(directory, mode)
    for index in range(2):
        nodes = [node_record(index, s, verifier_ms, node_ms, cores) for s in SECONDS]
        if store_ms is not None:
            for second, record in zip(SECONDS, nodes, strict=True):
                record["store"] = {"cpu_ms": store_ms * second}
        clients = [client_record(index, s, client_ms, cores) for s in SECONDS]
        for name, records in ((f"node-{index}", nodes), (f"client-{index}", clients)):
            lines = [f"METRICS {json.dumps(record)}" for record in records]
            (directory / f"{name}.log").write_text("\n".join(lines) + "\n")
    return directory


def restart_node(
    directory: Path, index: int, *, crash_s: float, restart_s: int, verifier_ms: float = 500.0,
    node_ms: float = 700.0, cores: int = 2,
) -> None:  # fmt: skip
    """Rewrite node `index` of a `write_run` directory as killed at T0 + crash_s and started again
    at T0 + restart_s: it reports up to the crash, nothing while down, and then counts from zero
    as a new process does (its record at second s of the run is second s - restart_s of its new
    life). The harness's `faults.json` records both events (after those already in it)."""
    records = []
    for second in SECONDS:
        if second <= crash_s:
            records.append(node_record(index, second, verifier_ms, node_ms, cores))
        elif second > restart_s:
            fresh = node_record(index, second - restart_s, verifier_ms, node_ms, cores)
            real = node_record(index, second, verifier_ms, node_ms, cores)
            records.append({**fresh, "time_ms": real["time_ms"], "samples": real["samples"]})
    lines = [f"METRICS {json.dumps(record)}" for record in records]
    (directory / f"node-{index}.log").write_text("\n".join(lines) + "\n")
    faults = FaultLog.load(directory)
    faults.start_ms = T0
    for kind, t in ((CRASH, crash_s), (RESTART, float(restart_s))):
        faults.events.append(FaultEvent(kind, index, t, T0 + t * 1000, "schedule"))
    faults.save(directory)

"""Network emulation of a run: latency per link (`--delay=MS`, `--delay-matrix=FILE`), the rate
of every link (`--bandwidth=MBIT`) and partitions (`--partition=NODES@T1-T2`), carried out by
the nodes themselves (`node run
--net-emulation FILE`: this machine has no netem). The harness writes one JSON file that every
node reads; each applies its row to its committee links (never to client connections).

`--delay-matrix` is a CSV file of N rows of N numbers (N = the committee size): row i, column j
is the one-way latency in ms from node i to node j (the diagonal is ignored). Blank lines and
lines starting with `#` are skipped.

Partition times count like `--crash` times, from the start of the clients. The node file holds
them in wall-clock unix ms, so the start must be known before the nodes boot: with partitions
the harness fixes it in advance (`PARTITION_LEAD_S` after it writes the file), boots the nodes
meanwhile and starts the clients at that moment.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..config import MAX_DELAY_MS, BenchParameters
from ..errors import HarnessError
from ..run_clock import RunClock

FILE_NAME = "net-emulation.json"
# Seconds between writing the node file and the clients' start when partitions are scheduled:
# the nodes boot meanwhile (locally in about a second; remotely the SSH round trips count too).
LOCAL_PARTITION_LEAD_S = 5.0
REMOTE_PARTITION_LEAD_S = 20.0


class EmulationError(HarnessError):
    """A network flag cannot be read or does not fit the run; the message names the flag."""


_PARTITION = re.compile(r"^\s*(\d+(?:\s*,\s*\d+)*)\s*@\s*([0-9.]+)\s*-\s*([0-9.]+)\s*$")


@dataclass(frozen=True)
class Partition:
    """`nodes` cut off from the rest of the committee from `start` to `end` s."""

    nodes: tuple[int, ...]
    start: float
    end: float

    @property
    def spec(self) -> str:
        return f"{','.join(map(str, self.nodes))}@{self.start:g}-{self.end:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "start": self.start, "end": self.end}


def parse_partition(text: str) -> Partition:
    """`"3@5-25"` -> Partition((3,), 5.0, 25.0); `"1,2@5-25"` isolates nodes 1 and 2 together."""
    match = _PARTITION.match(text)
    if match is None:
        raise EmulationError(
            f"--partition={text!r} is not NODES@T1-T2 (node indices separated by commas,"
            " seconds from the start of the clients)"
        )
    try:
        start, end = float(match.group(2)), float(match.group(3))
    except ValueError as error:
        raise EmulationError(f"--partition={text!r}: {error}") from error
    nodes = tuple(sorted({int(n) for n in match.group(1).split(",")}))
    if end <= start:
        raise EmulationError(
            f"--partition={text!r}: the heal ({end:g} s) must come after {start:g} s"
        )
    return Partition(nodes, start, end)


def parse_partitions(texts: Sequence[str] | None) -> tuple[Partition, ...]:
    return tuple(sorted((parse_partition(t) for t in texts or ()), key=lambda p: p.start))


def read_delay_matrix(path: Path, nodes: int) -> list[list[float]]:
    """The N x N one-way latencies (ms) of `--delay-matrix`, checked against the committee. A
    file of R rows for R < N regions places node i in region i mod R: the latency from node i to
    node j is that between their regions, the diagonal's within a region."""
    try:
        text = path.read_text()
    except OSError as error:
        raise EmulationError(f"--delay-matrix: cannot read {path}: {error}") from error
    rows = [
        row
        for row in csv.reader(line for line in text.splitlines() if not line.startswith("#"))
        if any(cell.strip() for cell in row)
    ]
    if not rows or len(rows) > nodes:
        raise EmulationError(
            f"--delay-matrix {path}: {len(rows)} rows for {nodes} nodes (one row per node, or"
            " per region for fewer regions than nodes)"
        )
    size = len(rows)
    regions = []
    for i, row in enumerate(rows):
        if len(row) != size:
            raise EmulationError(
                f"--delay-matrix {path}: row {i} has {len(row)} values for {size} rows"
            )
        try:
            values = [float(cell) for cell in row]
        except ValueError as error:
            raise EmulationError(f"--delay-matrix {path}: row {i}: {error}") from error
        for j, value in enumerate(values):
            if (i != j or size < nodes) and not 0 <= value <= MAX_DELAY_MS:
                what = "node" if size == nodes else "region"
                raise EmulationError(
                    f"--delay-matrix {path}: {value:g} ms from {what} {i} to {j} is not within"
                    f" 0..{MAX_DELAY_MS} ms"
                )
        regions.append(values)
    return [[regions[i % size][j % size] for j in range(nodes)] for i in range(nodes)]


def check_partitions(partitions: Sequence[Partition], nodes: int, duration: float) -> None:
    """Every partition names booted nodes (`nodes` of them), leaves someone on the other side
    and starts within the run."""
    for partition in partitions:
        spec = partition.spec
        unknown = [n for n in partition.nodes if n >= nodes]
        if unknown:
            raise EmulationError(
                f"--partition={spec}: node {unknown[0]} is not a booted node (0..{nodes - 1})"
            )
        if len(partition.nodes) >= nodes:
            raise EmulationError(f"--partition={spec}: isolates every node from nobody")
        if partition.start >= duration:
            raise EmulationError(
                f"--partition={spec}: {partition.start:g} s is not within the {duration} s run"
            )


def node_file(
    names: Sequence[str],
    *,
    delay_ms: float | None,
    matrix: Sequence[Sequence[float]] | None,
    partitions: Sequence[Partition],
    start_ms: float | None,
    bandwidth_mbit: float | None = None,
) -> dict[str, Any]:
    """The JSON of `node run --net-emulation`: node i is `names[i]`; partition times are
    counted from `start_ms` (wall clock ms of the clients' start); no `bandwidth_mbit`:
    unlimited links."""
    data: dict[str, Any] = {"default_delay_ms": round(delay_ms or 0)}
    if bandwidth_mbit is not None:
        data["bandwidth_mbit"] = bandwidth_mbit
    if matrix is not None:
        data["delays_ms"] = {
            names[i]: {names[j]: round(value) for j, value in enumerate(row) if j != i}
            for i, row in enumerate(matrix)
        }
    if partitions:
        if start_ms is None:
            raise ValueError("partitions need the clients' start time")
        data["partitions"] = [
            {
                "nodes": [names[n] for n in p.nodes],
                "start_unix_ms": round(start_ms + p.start * 1000.0),
                "end_unix_ms": round(start_ms + p.end * 1000.0),
            }
            for p in partitions
        ]
    return data


def emulates(bench: BenchParameters, partitions: Sequence[Partition]) -> bool:
    """Whether the nodes of a run get a `--net-emulation` file at all (else they pay nothing)."""
    return bench.emulated_links or bool(partitions)


def check_links(bench: BenchParameters) -> None:
    """`--delay-matrix` is readable and fits the committee (before anything starts)."""
    if bench.delay_matrix is not None:
        read_delay_matrix(Path(bench.delay_matrix), bench.nodes)


def write_node_file_if_emulating(
    directory: Path,
    names: Sequence[str],
    bench: BenchParameters,
    partitions: Sequence[Partition],
    clients_at: float | None,
) -> Path | None:
    """The run's `--net-emulation` file, written into `directory` if its nodes emulate anything
    (else None: they get no file); partitions count from `clients_at`, the clients' planned
    start (wall clock s)."""
    if not emulates(bench, partitions):
        return None
    start_ms = clients_at * 1000.0 if clients_at is not None else None
    return write_node_file(directory, names, bench, partitions, start_ms)


def wait_for_clients_start(
    clients_at: float | None, lead: float, out: TextIO, clock: RunClock | None = None
) -> None:
    """Sleep until the clients' planned start (seconds on the processes' `clock`, real unless
    dilated; None: no plan, start now). Nodes that took longer than the `lead` allowed are worth
    a warning, not a stop: the partitions still count from the planned start, before the
    clients'."""
    if clients_at is None:
        return
    clock = clock or RunClock()
    late = clock.now() - clients_at
    if late > 0:
        out.write(
            f"warning: the nodes took {late:.1f} s longer to start than the {lead:g} s allowed;"
            " partitions count from the planned start, before the clients'\n"
        )
    else:
        clock.sleep(-late)


def write_node_file(
    directory: Path,
    names: Sequence[str],
    bench: BenchParameters,
    partitions: Sequence[Partition],
    start_ms: float | None,
) -> Path:
    """Write the run's `--net-emulation` file into `directory`."""
    matrix = None
    if bench.delay_matrix is not None:
        matrix = read_delay_matrix(Path(bench.delay_matrix), bench.nodes)
    data = node_file(
        names,
        delay_ms=bench.delay_ms,
        matrix=matrix,
        partitions=partitions,
        start_ms=start_ms,
        bandwidth_mbit=bench.bandwidth_mbit,
    )
    path = directory / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path

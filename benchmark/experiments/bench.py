"""Runs an experiment's criterion bench (`CriterionBench`) on this machine and reads its table.

The bench is built and run by `cargo bench` in the repository, with the environment `fab` has
(so a CI run's profile settings apply to it as to the tests), and writes its table as JSON to
the file `HOTMOVE_BENCH_TABLE` names: the page is written from that file, and `--rewrite` reads
it again.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import TextIO

from ..errors import HarnessError
from .experiment import CriterionBench


class BenchRunError(HarnessError):
    pass


def run_bench(bench: CriterionBench, repo_root: Path, table: Path, out: TextIO) -> list[dict]:
    """Runs `bench`, its output passed on to `out`; returns the rows it wrote to `table`."""
    table.parent.mkdir(parents=True, exist_ok=True)
    table.unlink(missing_ok=True)
    env = {**os.environ, **bench.env(), "HOTMOVE_BENCH_TABLE": str(table)}
    try:
        process = subprocess.Popen(
            bench.argv(),
            cwd=repo_root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    except FileNotFoundError as error:
        raise BenchRunError("cargo not found: install the Rust toolchain (rustup)") from error
    tail: list[str] = []
    for line in process.stdout or ():
        out.write(line)
        tail = [*tail[-40:], line]
    out.flush()
    if process.wait() != 0:
        raise BenchRunError(
            f"`{bench.command()}` failed with code {process.returncode}:\n{''.join(tail)}"
        )
    return read_table(table)


def read_table(table: Path) -> list[dict]:
    """The rows a bench wrote to `table`."""
    try:
        rows = json.loads(table.read_text())
    except (OSError, ValueError) as error:
        raise BenchRunError(f"the bench wrote no readable table to {table} ({error})") from error
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise BenchRunError(f"{table} does not hold a list of rows")
    if not rows:
        raise BenchRunError(f"{table} holds no rows: did the filter match any benchmark?")
    return rows

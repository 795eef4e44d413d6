"""What a test run may leave in the checkout: nothing but build output and Python's caches.

Tests write under pytest's temporary directories (`tmp_path`) or pass the harness a directory
there (`--logs`, `--results`, `--work`, `--output`); a default such as `results/` or `.bench/`
taken by mistake would fill the checkout a little more at every run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

# Directories a run may write anywhere in the tree: Cargo's build output and Python's caches.
MAY_WRITE = ("target", "__pycache__", ".pytest_cache", ".ruff_cache")


def tree_state(repo: Path) -> set[str] | None:
    """Every entry `git status` gives for the working tree, ignored and untracked files one by one
    (what `MAY_WRITE` holds left out); None outside a git checkout."""
    excluded = [f":(exclude,glob)**/{name}/**" for name in MAY_WRITE]
    try:
        result = subprocess.run(
            [
                "git", "status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=all",
                "--", ".", *excluded,
            ],
            cwd=repo,
            capture_output=True,
            timeout=60,
            check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return {entry for entry in result.stdout.decode(errors="replace").split("\0") if entry}


def left_behind(before: set[str] | None, after: set[str] | None) -> list[str]:
    """The entries that appeared between two states (none when either could not be read)."""
    if before is None or after is None:
        return []
    return sorted(after - before)

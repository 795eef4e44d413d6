"""The check that a test run leaves the checkout as it found it (conftest.py) sees what it must."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .checkout import left_behind, tree_state


def _repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / ".gitignore").write_text("/results/\n")
    (path / "kept.txt").write_text("kept\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    return path


def test_new_ignored_untracked_and_changed_files_are_left_behind(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    before = tree_state(repo)
    assert before is not None
    (repo / "results").mkdir()
    (repo / "results" / "run.json").write_text("{}")
    (repo / "stray.txt").write_text("x")
    (repo / "kept.txt").write_text("changed\n")
    left = left_behind(before, tree_state(repo))
    assert left == ["!! results/run.json", "?? stray.txt", "AM kept.txt"]


def test_build_output_and_caches_are_not(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    before = tree_state(repo)
    for directory in ("target/release", "benchmark/__pycache__", ".pytest_cache"):
        (repo / directory).mkdir(parents=True)
        (repo / directory / "file").write_text("x")
    assert left_behind(before, tree_state(repo)) == []


def test_outside_a_checkout_nothing_is_reported(tmp_path: Path) -> None:
    assert tree_state(tmp_path) is None
    assert left_behind(None, {"?? x"}) == []

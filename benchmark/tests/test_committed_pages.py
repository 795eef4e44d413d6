"""Every results page committed with its run record (`docs/results/NAME/record.json`) is what
`fab experiment NAME --rewrite` writes from that record on a clone, byte for byte: a change to
the analysis that would alter a committed page comes with the page written again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmark.experiments import EXPERIMENTS
from benchmark.experiments.records import page_record_path
from benchmark.experiments.results_page import rewrite_experiment

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS = REPO_ROOT / "docs/results"
RECORDED = sorted(name for name in EXPERIMENTS if page_record_path(RESULTS, name).is_file())


def test_the_pages_with_records_are_found() -> None:
    assert {"dilation", "scale", "scale-cores"} <= set(RECORDED)


@pytest.mark.parametrize("name", RECORDED)
def test_a_committed_page_is_its_record_written_again(name: str, tmp_path: Path) -> None:
    # A copy of every page: a page may read its neighbours (their processors, their records).
    pages = tmp_path / "results"
    shutil.copytree(RESULTS, pages)
    rewrite_experiment(
        EXPERIMENTS[name],
        quick=False,
        repo_root=REPO_ROOT,
        output=pages,
        logs_dir=tmp_path / "no-logs",
    )
    written = (pages / f"{name}.md").read_text()
    assert written == (RESULTS / f"{name}.md").read_text(), (
        f"docs/results/{name}.md is not what its record writes: run"
        f" `fab experiment {name} --rewrite` and commit the page with the analysis"
    )
    assert page_record_path(pages, name).read_text() == page_record_path(RESULTS, name).read_text()

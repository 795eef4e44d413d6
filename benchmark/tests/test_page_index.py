"""Pages that compare each other say when they ran on different processors, and the index of
the results pages lists every page with its processor, commit and probe."""

from __future__ import annotations

from pathlib import Path

from benchmark.experiments.page_index import (
    comparison_lines,
    index_lines,
    read_facts,
    write_index,
)

AMD = "AMD EPYC"
INTEL = "Intel(R) Xeon(R) Processor"


def _page(directory: Path, name: str, cpu: str, *, probe: bool = True, quick: bool = False) -> None:
    size = "`--quick`: a CI-sized version (short runs)." if quick else "the full experiment."
    lines = [
        f"# {name.title()}: a question",
        "",
        "## How this page was made",
        "",
        f"Written by `fab experiment {name}`, {size}",
        "",
        f"- Machine: 2 cores, {cpu}, Linux 6.18.44; load average before the runs 1.00 / 1.00"
        " / 1.00 (1 / 5 / 15 min).",
        f"- Commit: `abc{len(name)}`.",
    ]
    if probe:
        lines += ["- SHA-256 on every core: 3,350-3,589 MB/s over 18 probes, 7% apart."]
    (directory / f"{name}.md").write_text("\n".join(lines) + "\n")


def test_a_page_says_what_it_ran_on(tmp_path: Path) -> None:
    _page(tmp_path, "overload", INTEL)
    facts = read_facts(tmp_path / "overload.md")
    assert facts is not None
    assert (facts.processor, facts.cores, facts.commit) == (INTEL, 2, "abc8")
    assert facts.hashing == "3,350-3,589 MB/s"
    assert read_facts(tmp_path / "missing.md") is None


def test_a_comparison_names_a_page_on_another_processor(tmp_path: Path) -> None:
    _page(tmp_path, "overload", INTEL)
    _page(tmp_path, "scaling", AMD)
    lines = comparison_lines(AMD, ("overload", "scaling", "leaders"), tmp_path)
    assert lines[0].startswith("- Compared with [overload](overload.md), which ran on another")
    assert INTEL in lines[0]
    assert AMD in lines[0]
    assert lines[1] == (
        "- Compared with [scaling](scaling.md), which ran on the same processor (AMD EPYC)."
    )
    assert "not written yet" in lines[2]


def test_the_index_lists_every_page_and_says_when_processors_differ(tmp_path: Path) -> None:
    _page(tmp_path, "overload", INTEL, probe=False)
    _page(tmp_path, "scaling", AMD)
    _page(tmp_path, "modes", AMD, quick=True)
    (tmp_path / "notes.md").write_text("no title here\n")
    path = write_index(tmp_path)
    text = path.read_text()
    assert "these pages ran on 2 (AMD EPYC; Intel(R) Xeon(R) Processor)" in text
    assert f"| [Overload: a question](overload.md) | {INTEL} | 2 | `abc8` | not probed |" in text
    assert (
        "| [Scaling: a question](scaling.md) | AMD EPYC | 2 | `abc7` | 3,350-3,589 MB/s |" in text
    )
    assert "[Modes: a question](modes.md) (`--quick`)" in text
    # A page whose configurations ran at several commits (`--only`) names them all.
    modes = tmp_path / "modes.md"
    modes.write_text(
        modes.read_text()
        + "- Only the configurations whose label contains `x` ran at this commit (`--only`); the"
        " others are from earlier runs:\n  - at `def1`: y.\n  - at `def2`: z.\n"
    )
    assert "| `abc5`, `def1`, `def2` |" in write_index(tmp_path).read_text()
    text = path.read_text()
    assert "notes" not in text
    # Rewriting it reads the pages again, not the index itself.
    assert index_lines(tmp_path) == text.rstrip("\n").split("\n")

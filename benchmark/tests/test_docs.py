"""The documentation holds together: README.md stays a guide (at most `README_MAX_LINES` lines),
every relative link in it, in `benchmark/README.md` and in `docs/**/*.md` names a file that
exists, and every `#anchor` names a heading of its target, as GitHub renders it. The test command
README.md gives is the one `.ci/run` runs."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from .conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
README_MAX_LINES = 300

# An inline link or image, `[text](target)` or `[text](target "title")`: the target is group 1.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def documents() -> list[Path]:
    return [
        README,
        REPO_ROOT / "benchmark" / "README.md",
        *sorted((REPO_ROOT / "docs").rglob("*.md")),
    ]


def _prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks, inline code spans blanked."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "``", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: the rendered text lower-cased, punctuation dropped (not `-`
    nor `_`), spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub makes for the headings of `path` (repeats get `-1`, `-2`, ...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    targets = []
    for line in _prose_lines(path.read_text()):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.IGNORECASE):
                continue  # https:, mailto:, ...
            targets.append(target)
    return targets


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
            continue
        if resolved.is_relative_to(REPO_ROOT.resolve()) is False:
            broken.append(f"{target}: outside the repository")
            continue
        if anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


def test_the_readme_is_a_guide_of_at_most_300_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference to docs/"


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_readme_links_into_docs() -> None:
    linked = {t.partition("#")[0] for t in relative_links(README)}
    pages = {f"docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md")}
    assert pages <= linked, f"docs pages the README does not link: {sorted(pages - linked)}"


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    """`.ci/run` runs the README's test command; they must not drift apart."""
    ci = (REPO_ROOT / ".ci" / "run").read_text().strip().splitlines()[-1].strip()
    readme = README.read_text()
    assert re.search(rf"^{re.escape(ci)}\s+#", readme, flags=re.MULTILINE), ci


# The checker itself, on small documents.


def test_slugs_follow_github() -> None:
    assert slug("Watching a run with Prometheus/Grafana") == "watching-a-run-with-prometheusgrafana"
    assert slug("`fab local`") == "fab-local"
    assert slug("The adapter (`--vm=adapter`) against the bare VM") == (
        "the-adapter---vmadapter-against-the-bare-vm"
    )
    assert slug("Faults and the audit") == "faults-and-the-audit"


def test_a_missing_file_or_heading_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.REPO_ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Same\n\n## Same\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md#same-1) [ok](#top) [web](https://example.org/x)\n"
        "[gone](docs/b.md) [no heading](docs/a.md#other) [too far](docs/a.md#same-2)\n"
        "`[in code](docs/c.md)`\n```\n[in a block](docs/d.md)\n```\n# Top\n"
    )
    assert broken_links(page) == [
        "docs/b.md: no such file",
        "docs/a.md#other: no heading #other in a.md",
        "docs/a.md#same-2: no heading #same-2 in a.md",
    ]

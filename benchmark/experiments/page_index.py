"""What each results page ran on, read back from the pages: a page that sets figures of another
page beside its own says when the two ran on different processors, and `docs/results/README.md`
lists every page with its processor, commit and speed probe, so that a reader comparing any two
sees it too."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

INDEX = "README.md"
_TITLE = re.compile(r"^# (.+)$", re.MULTILINE)
_MACHINE = re.compile(r"^- Machine: (\d+) cores, (.+?), (?:Linux|Darwin|Windows)\b", re.MULTILINE)
_COMMIT = re.compile(r"^- Commit: `([^`]+)`", re.MULTILINE)
# The commits some configurations ran at before (`--only`), as `runner._commit_lines` writes them.
_EARLIER = re.compile(r"^  - at `([^`]+)`: ", re.MULTILINE)
_PROBE = re.compile(r"^- SHA-256 on every core: ([^.]+ MB/s)", re.MULTILINE)
_QUICK = "`--quick`: a CI-sized version"


@dataclass(frozen=True)
class PageFacts:
    name: str
    title: str
    cores: int | None
    processor: str | None
    commit: str | None
    # Commits some of its configurations ran at, before `commit` (`--only` reran the others).
    earlier: tuple[str, ...]
    hashing: str | None
    quick: bool


def read_facts(path: Path) -> PageFacts | None:
    """What `path` (a page `fab experiment` wrote) says it ran on; None if it is no such page."""
    try:
        text = path.read_text()
    except OSError:
        return None
    title = _TITLE.search(text)
    if title is None:
        return None
    machine = _MACHINE.search(text)
    commit = _COMMIT.search(text)
    probe = _PROBE.search(text)
    return PageFacts(
        name=path.stem,
        title=title.group(1),
        cores=int(machine.group(1)) if machine else None,
        processor=machine.group(2) if machine else None,
        commit=commit.group(1) if commit else None,
        earlier=tuple(_EARLIER.findall(text)),
        hashing=probe.group(1) if probe else None,
        quick=_QUICK in text,
    )


def comparison_lines(processor: str, others: tuple[str, ...], directory: Path) -> list[str]:
    """A line per page named in `others` whose figures this page sets beside its own: whether
    it ran on this page's processor."""
    lines = []
    for name in others:
        facts = read_facts(directory / f"{name}.md")
        link = f"[{name}]({name}.md)"
        if facts is None or facts.processor is None:
            lines.append(f"- Compared with {link}, which says no machine (or is not written yet).")
        elif facts.processor == processor:
            lines.append(f"- Compared with {link}, which ran on the same processor ({processor}).")
        else:
            lines.append(
                f"- Compared with {link}, which ran on another processor ({facts.processor}, this"
                f" page {processor}): differences between the two pages include the machines'."
            )
    return lines


def index_lines(directory: Path) -> list[str]:
    """The index of the pages in `directory`: each with its processor, commit and probe."""
    pages = [
        facts
        for path in sorted(directory.glob("*.md"))
        if path.name != INDEX and (facts := read_facts(path)) is not None
    ]
    processors = sorted({p.processor for p in pages if p.processor})
    lines = [
        "# Results pages",
        "",
        "Written by `fab experiment NAME` (each page says how it was made and what it ran); this"
        " index is rewritten with every page. Pages made on different processors are not"
        " comparable figure for figure: "
        + (
            f"these pages ran on {len(processors)} ({'; '.join(processors)})."
            if len(processors) > 1
            else "these all ran on one."
        ),
        "",
        "| page | processor | cores | commit (then those some configurations ran at before) |"
        " SHA-256 probe on every core |",
        "|---|---|---:|---|---|",
    ]
    for p in pages:
        quick = " (`--quick`)" if p.quick else ""
        lines.append(
            f"| [{p.title}]({p.name}.md){quick} | {p.processor or '-'} | {p.cores or '-'}"
            f" | `{p.commit or '-'}`{''.join(f', `{c}`' for c in p.earlier)}"
            f" | {p.hashing or 'not probed'} |"
        )
    return lines


def write_index(directory: Path) -> Path:
    path = directory / INDEX
    path.write_text("\n".join(index_lines(directory)) + "\n")
    return path

"""A results page: Markdown with its figures beside it, written from an experiment's runs.

The page says where its numbers come from: the machine (cores, CPU model, kernel, load before
the runs), the commit, and the exact commands. Figures are PNG files in a folder named after the
page.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # after mpl.use: the backend must be chosen first
from matplotlib.figure import Figure


@dataclass(frozen=True)
class Machine:
    cores: int | None
    cpu: str
    kernel: str
    load: tuple[float, float, float]

    @classmethod
    def this_one(cls) -> Machine:
        return cls(
            cores=os.cpu_count(),
            cpu=_cpu_model(),
            kernel=f"{platform.system()} {platform.release()}",
            load=os.getloadavg(),
        )

    def describe(self) -> str:
        one, five, fifteen = self.load
        return (
            f"{self.cores} cores, {self.cpu}, {self.kernel}; load average before the runs"
            f" {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"
        )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def commit_of(repo: Path) -> str:
    """The checkout's commit, marked when the working tree (its pages aside) differs from it."""

    def git(*args: str) -> str:
        result = subprocess.run(
            ["git", *args], cwd=repo, capture_output=True, text=True, check=False
        )
        return result.stdout.strip() if result.returncode == 0 else ""

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # The pages themselves are left out: writing one page must not mark the next as made from
    # a changed checkout.
    dirty = git(
        "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/results"
    )
    return f"{commit} (with uncommitted changes)" if dirty else commit


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table; numbers right-aligned (a header starting with a digit or a unit is not
    told apart: every column but the first is right-aligned)."""
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


@dataclass
class Page:
    name: str
    title: str
    directory: Path
    lines: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    # Written from a `--quick` run: a page that reads another page's record reads its quick one.
    quick: bool = False

    @property
    def path(self) -> Path:
        return self.directory / f"{self.name}.md"

    @property
    def figure_dir(self) -> Path:
        return self.directory / self.name

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def section(self, heading: str, *lines: str) -> None:
        self.lines += ["", f"## {heading}", "", *lines]

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.lines += ["", *table(headers, rows)]

    def figure(self, figure: Figure, stem: str, caption: str) -> None:
        self.figure_dir.mkdir(parents=True, exist_ok=True)
        path = self.figure_dir / f"{stem}.png"
        figure.savefig(path, bbox_inches="tight", dpi=110)
        plt.close(figure)
        self.figures.append(path)
        self.lines += ["", f"![{caption}]({self.name}/{stem}.png)", "", f"*{caption}*"]

    def write(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join([f"# {self.title}", *self.lines]).rstrip() + "\n")
        return self.path

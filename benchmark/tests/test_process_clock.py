"""Every duration and timestamp of the node and the client goes through the process's clock
(`plumbing::clock`), which `--dilation K` slows: a timer or clock read that went around it would
run at real speed in a dilated run and bend its figures without a word.

The check reads the workspace's Rust sources: production code only (a file's `mod tests` at its
end, `tests/`, `benches/`, fuzz targets and test-only modules are left out; tests drive tokio's
paused clock directly, which the process's clock follows).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .conftest import REPO_ROOT

# The real clock and the runtime's timers, named directly.
AROUND_THE_CLOCK = re.compile(
    r"tokio::time::(sleep|sleep_until|timeout|interval|interval_at|Instant)\b"
    r"|std::time::(\{[^}]*\b)?(Instant|SystemTime)\b"
    r"|\bSystemTime::now\b"
    r"|\bthread::sleep\("
    r"|use tokio::time::\{[^}]*\b(sleep|sleep_until|timeout|interval|Instant)\b"
)
# Where the real clock is read on purpose: the clock itself, the links' precise timer (which the
# clock hands real deadlines, `clock::sleep_until_precise`), and code that only tests run.
EXEMPT = (
    "consensus/plumbing/src/clock.rs",
    "consensus/plumbing/src/precise_sleep.rs",
    "consensus/plumbing/src/test_alloc.rs",
)
TEST_ONLY = ("/tests/", "/benches/", "/fuzz/", "/twins/", "tests.rs", "testing.rs")
TESTS_MODULE = re.compile(r"^#\[cfg\(test\)\]\s*\nmod tests", re.MULTILINE)


def production_part(source: str) -> str:
    """A file's code before its `#[cfg(test)] mod tests` (unit tests come last, by convention)."""
    found = TESTS_MODULE.search(source)
    return source[: found.start()] if found else source


def reads_around_the_clock(path: str, source: str) -> list[str]:
    """`path:line: text` of each production line that names the real clock or timers."""
    if path in EXEMPT or any(part in path for part in TEST_ONLY):
        return []
    return [
        f"{path}:{number}: {line.strip()}"
        for number, line in enumerate(production_part(source).splitlines(), start=1)
        if AROUND_THE_CLOCK.search(line)
    ]


def test_the_check_finds_a_timer_that_goes_around_the_clock() -> None:
    source = (
        "use std::time::{Duration, Instant};\n"
        "async fn f() { tokio::time::sleep(Duration::from_millis(5)).await; }\n"
        "fn g() { plumbing::clock::sleep_blocking(Duration::ZERO); }\n"
        "#[cfg(test)]\nmod tests {\n    fn h() { std::thread::sleep(D); }\n}\n"
    )
    found = reads_around_the_clock("consensus/x/src/a.rs", source)
    assert [line.split(": ", 1)[0] for line in found] == [
        "consensus/x/src/a.rs:1",
        "consensus/x/src/a.rs:2",
    ]
    assert reads_around_the_clock("consensus/x/tests/a.rs", source) == []


def test_production_code_reads_time_only_through_the_process_clock() -> None:
    files = subprocess.run(
        ["git", "ls-files", "*.rs"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "consensus/plumbing/src/clock.rs" in files
    found = [
        line
        for path in files
        for line in reads_around_the_clock(path, Path(REPO_ROOT, path).read_text())
    ]
    assert not found, "use plumbing::clock instead:\n" + "\n".join(found)

"""Shell snippets run on the hosts of `fab remote` (bash): installing, starting a process in the
background with its pid file, stopping process groups, and reading their state back."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.metrics import MalformedLineError, Record, parse_line
from ..aws.settings import Settings

# The run directory on every host, below the login's home.
BENCH_DIR = "hotmove-bench"

# A pid is alive if /proc has it and it is not a zombie (PID 1 may not reap in containers).
_ALIVE = (
    "alive() { [ -e /proc/$1 ] && [ \"$(sed 's/^.*) //' /proc/$1/stat 2>/dev/null | cut -c1)\" "
    "!= Z ]; }"
)


def install_script(settings: Settings, skip_toolchain: bool) -> str:
    repo = shlex.quote(settings.repo_name)
    url = shlex.quote(settings.repo_url)
    branch = shlex.quote(settings.branch)
    steps = []
    if not skip_toolchain:
        steps += [
            "sudo apt-get update -y",
            "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y "
            "build-essential cmake clang pkg-config libssl-dev git curl",
            "curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs "
            "| sh -s -- -y --profile minimal",
        ]
    steps += [
        f"if [ -d {repo}/.git ]; then git -C {repo} fetch --prune origin; "
        f"else git clone {url} {repo}; fi",
        f"git -C {repo} checkout -f -B {branch} origin/{branch}",
        'if [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi',
        f"cd {repo} && cargo build --release",
    ]
    return "set -e\n" + "\n".join(steps)


def background_script(name: str, command: list[str], *, append: bool = False) -> str:
    """Start `command` detached in its own session; record its pid and its exit code.

    The wrapping bash leads the process group. It traps SIGTERM with a no-op so that a SIGTERM to
    the group stops only the command (bash runs the trap after the command exits, then records
    its code): the leader stays alive exactly as long as the command, which is what `stop` waits
    for. A trap, unlike an ignored signal, is not inherited by the command. `append` keeps the
    log of an earlier life (a node restarted by a fault schedule)."""
    inner = f"trap : TERM; {shlex.join(command)}; echo $? > pids/{name}.exit"
    return (
        f"cd {BENCH_DIR} && rm -f pids/{name}.exit && "
        f"{{ setsid nohup bash -c {shlex.quote(inner)} {'>>' if append else '>'} logs/{name}.log"
        " 2>&1 < /dev/null & "
        f"echo $! > pids/{name}.pid; }}"
    )


def stop_script(pattern: str, grace: float) -> str:
    """SIGTERM the process groups of the matching pid files, SIGKILL after `grace` seconds."""
    return f"""{_ALIVE}
cd {BENCH_DIR} 2>/dev/null || exit 0
pids=""
for f in pids/{pattern}.pid; do
  [ -e "$f" ] || continue
  p=$(cat "$f"); rm -f "$f"
  case "$p" in ''|*[!0-9]*) continue;; esac
  pids="$pids $p"
  kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
done
end=$(( $(date +%s) + {max(1, int(grace + 0.999))} ))
while :; do
  left=""
  for p in $pids; do alive "$p" && left="$left $p"; done
  [ -z "$left" ] && break
  [ "$(date +%s)" -ge "$end" ] && break
  sleep 0.1
done
for p in $pids; do kill -KILL -- "-$p" 2>/dev/null || true; done
"""


def status_script(names: Sequence[str]) -> str:
    """Prints `name state [code]` per process, then the last METRICS line of each log.

    Liveness is checked before the exit file: the wrapper writes the exit file before it exits,
    so a process found dead has its exit file already (the other order races)."""
    lines = [_ALIVE, f"cd {BENCH_DIR} || exit 1"]
    for name in names:
        lines.append(
            f'if [ -f pids/{name}.pid ] && alive "$(cat pids/{name}.pid)"; then '
            f'echo "{name} running"; '
            f'elif [ -f pids/{name}.exit ]; then echo "{name} exited $(cat pids/{name}.exit)"; '
            f'else echo "{name} gone"; fi'
        )
    for name in names:
        lines.append(f"grep '^METRICS ' logs/{name}.log 2>/dev/null | tail -n 1 || true")
    return "\n".join(lines)


def bash(script: str) -> str:
    return f"bash -c {shlex.quote(script)}"


@dataclass(frozen=True)
class HostStatus:
    states: dict[str, tuple[str, int | None]]
    records: list[Record]


def parse_status(text: str) -> HostStatus:
    states: dict[str, tuple[str, int | None]] = {}
    records: list[Record] = []
    for line in text.splitlines():
        if line.startswith("METRICS "):
            try:
                record = parse_line(line)
            except MalformedLineError:
                continue
            if record is not None:
                records.append(record)
            continue
        parts = line.split()
        if len(parts) >= 2:
            code = int(parts[2]) if len(parts) > 2 and parts[2].lstrip("-").isdigit() else None
            states[parts[0]] = (parts[1], code)
    return HostStatus(states, records)

"""Hosts of their own on this machine for `fab remote`: network namespaces on a bridge.

Each host is a network namespace with its own address on a /24, joined to the others and to this
machine by a veth pair whose outer end sits on a bridge in the root namespace (which holds the
.254 address, so the harness reaches every host as it would an instance). Each host runs its own
sshd, and that sshd also has its own mount namespace in which the login user's home directory is
a directory of that host's: like instances that all have an `ubuntu` user, the hosts share a
user name but not a home, so the remote runner's layout (`~/hotmove`, `~/hotmove-bench`) is per
host. The filesystem is otherwise shared (the hosts fetch a local git repository). Needs root,
iproute2 (`ip`), util-linux (`unshare`, `mount`) and openssh-server.

The names of what is made (namespaces, bridge, user, working directory) carry the creating
process's id: two test sessions at once share nothing, and a later session removes what one that
died before cleaning up left behind.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from .sshhosts import SSHD, processes_of, wait_for_sshd, write_sshd_config

USER_NAME = re.compile(r"^hmns(\d+)$")
NAMESPACE = re.compile(r"^hmns(\d+)-\d+$")
BRIDGE = re.compile(r"^hmbr(\d+)$")
WORKDIR = re.compile(r"^hotmove-nshosts-(\d+)-")
SUBNETS = range(1, 250)  # 10.231.X.0/24
# Each host has an address of its own: its sshd listens on the standard port.
SSH_PORT = 22
TOOLS = ("ip", "unshare", "mount", "useradd", "userdel", "usermod", "ssh-keygen", "git")


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def _must(*command: str) -> None:
    result = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed: {result.stderr.strip()}")


def skip_reason() -> str | None:
    """Why namespace hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces, a bridge and a user"
    if not SSHD.exists():
        return "needs /usr/sbin/sshd (apt-get install -y openssh-server)"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"needs {tool} (apt-get install -y iproute2 util-linux passwd git)"
    probe = f"hmns{os.getpid()}-probe"
    made = _ip("netns", "add", probe)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


@dataclass(frozen=True)
class NamespaceHosts:
    """Host i is `addresses[i]`, reached over SSH as `user` with `key_path`; its home is
    `homes[i]` here. `shared_dir` is readable by the user on every host."""

    addresses: tuple[str, ...]
    user: str
    key_path: Path
    homes: tuple[Path, ...]
    shared_dir: Path
    namespaces: tuple[str, ...]

    def processes(self) -> list[psutil.Process]:
        """The user's live processes on any host, except their SSH sessions."""
        return processes_of([self.user])


def _alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and pid != os.getpid()


def _remove_namespace(name: str) -> None:
    """Kill what still runs in the namespace, then delete it (its veth end goes with it)."""
    listed = _ip("netns", "pids", name)
    for pid in listed.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _ip("netns", "del", name)


def remove_stale() -> None:
    """Namespaces, bridges and users left by a test process that died before removing them."""
    for entry in pwd.getpwall():
        match = USER_NAME.match(entry.pw_name)
        if match and not _alive(int(match.group(1))):
            _remove_user(entry.pw_name)
    for line in _ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        match = NAMESPACE.match(name)
        if match and not _alive(int(match.group(1))):
            _remove_namespace(name)
    for line in _ip("-o", "link", "show", "type", "bridge").stdout.splitlines():
        parts = line.split(":")
        name = parts[1].strip() if len(parts) > 1 else ""
        match = BRIDGE.match(name)
        if match and not _alive(int(match.group(1))):
            _ip("link", "del", name)
    for path in Path(tempfile.gettempdir()).glob("hotmove-nshosts-*"):
        match = WORKDIR.match(path.name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def _free_subnet() -> str:
    """A 10.231.X prefix no interface of this machine uses (X from this process's id on)."""
    used = _ip("-4", "-o", "addr", "show").stdout
    start = os.getpid() % len(SUBNETS)
    for offset in range(len(SUBNETS)):
        prefix = f"10.231.{SUBNETS[(start + offset) % len(SUBNETS)]}"
        if f" {prefix}." not in used:
            return prefix
    raise RuntimeError("no free 10.231.X.0/24 subnet")


def _own(path: Path, entry: pwd.struct_passwd, mode: int) -> None:
    os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(mode)


def _make_home(home: Path, entry: pwd.struct_passwd, public_key: str) -> None:
    home.mkdir()
    _own(home, entry, 0o755)
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir()
    _own(ssh_dir, entry, 0o700)
    keys = ssh_dir / "authorized_keys"
    keys.write_text(public_key)
    _own(keys, entry, 0o600)


def _make_user(user: str) -> None:
    """The login user of every host (its home directory is where each host mounts its own)."""
    _must("useradd", "--create-home", "--shell", "/bin/bash", user)
    # '!' (locked) makes sshd refuse even key logins without PAM; '*' disables passwords.
    _must("usermod", "--password", "*", user)


def _remove_user(user: str) -> None:
    """Kill the user's processes, then remove the user and its home directory."""
    with contextlib.suppress(KeyError):
        uid = pwd.getpwnam(user).pw_uid
        for process in psutil.process_iter(["uids"]):
            with contextlib.suppress(psutil.Error):
                if process.info["uids"] and process.info["uids"].real == uid:
                    process.kill()
        subprocess.run(["userdel", "--remove", user], check=False, capture_output=True)


def _link(namespace: str, outer: str, bridge: str, address: str) -> None:
    """The namespace, its `eth0` with `address`, and the outer end of the pair on the bridge."""
    _must("ip", "netns", "add", namespace)
    _must("ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", namespace)
    _must("ip", "link", "set", outer, "master", bridge)
    _must("ip", "link", "set", outer, "up")
    inside = ("ip", "netns", "exec", namespace, "ip")
    _must(*inside, "addr", "add", f"{address}/24", "dev", "eth0")
    _must(*inside, "link", "set", "eth0", "up")
    _must(*inside, "link", "set", "lo", "up")


def _start_sshd(
    namespace: str, address: str, home: Path, workdir: Path, host_key: Path, *, user: str
) -> subprocess.Popen[bytes]:
    """sshd in the namespace, in a mount namespace of its own where the user's home is `home`
    (its sessions, and what they start, inherit both)."""
    config = workdir / f"sshd-{namespace}.config"
    write_sshd_config(
        config,
        address=address,
        port=SSH_PORT,
        host_key=host_key,
        pid_file=workdir / f"sshd-{namespace}.pid",
        users=[user],
    )
    _must(str(SSHD), "-t", "-f", str(config))
    user_home = pwd.getpwnam(user).pw_dir
    start = f"mount --bind {home} {user_home} && exec {SSHD} -D -e -f {config}"
    command = ["ip", "netns", "exec", namespace, "unshare", "--mount", "--propagation", "private"]
    log = workdir / f"sshd-{namespace}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "sh", "-c", start],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    wait_for_sshd(address, SSH_PORT, process, log)
    return process


def _tear_down(
    sshds: list[subprocess.Popen[bytes]], namespaces: tuple[str, ...], bridge: str, user: str
) -> None:
    for process in sshds:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    _remove_user(user)
    for namespace in namespaces:
        _remove_namespace(namespace)
    _ip("link", "del", bridge)


@contextlib.contextmanager
def namespace_hosts(count: int = 4) -> Iterator[NamespaceHosts]:
    """`count` hosts, each a network namespace with its own address and sshd; every namespace,
    the bridge, the user and its processes are removed again on exit, whatever
    happened."""
    remove_stale()
    tag = str(os.getpid())
    user = f"hmns{tag}"
    bridge = f"hmbr{tag}"
    namespaces = tuple(f"hmns{tag}-{i}" for i in range(count))
    workdir = Path(tempfile.mkdtemp(prefix=f"hotmove-nshosts-{tag}-"))
    workdir.chmod(0o755)  # the user reads the shared files below it
    sshds: list[subprocess.Popen[bytes]] = []
    try:
        _make_user(user)
        entry = pwd.getpwnam(user)
        key = workdir / "id_ed25519"
        _must("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hotmove-tests", "-f", str(key))
        host_key = workdir / "host_ed25519"
        _must("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key))
        public_key = (workdir / "id_ed25519.pub").read_text()
        shared = workdir / "shared"
        shared.mkdir(mode=0o755)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        prefix = _free_subnet()
        _must("ip", "link", "add", bridge, "type", "bridge")
        _must("ip", "addr", "add", f"{prefix}.254/24", "dev", bridge)
        _must("ip", "link", "set", bridge, "up")
        addresses = tuple(f"{prefix}.{i + 1}" for i in range(count))
        homes = tuple(workdir / f"home-{i}" for i in range(count))
        for i, namespace in enumerate(namespaces):
            _link(namespace, f"hmv{tag}-{i}", bridge, addresses[i])
            _make_home(homes[i], entry, public_key)
            sshd = _start_sshd(namespace, addresses[i], homes[i], workdir, host_key, user=user)
            sshds.append(sshd)
        yield NamespaceHosts(
            addresses=addresses,
            user=user,
            key_path=key,
            homes=homes,
            shared_dir=shared,
            namespaces=namespaces,
        )
    finally:
        _tear_down(sshds, namespaces, bridge, user)
        shutil.rmtree(workdir, ignore_errors=True)

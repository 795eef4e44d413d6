"""Real SSH "hosts" on this machine for the remote runner's tests.

Debian's OpenSSH server listens on a free loopback port (127.0.0.1 only) with its own host key
and configuration; every "host" is a Unix user with its own home directory, authorised for one
generated key. Needs root (to create users and run sshd) and /usr/sbin/sshd.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from benchmark.run_files import PORTS_PER_NODE
from benchmark.runners.remote import Host

SSHD = Path("/usr/sbin/sshd")
USERS: tuple[str, ...] = ("hotmove-h1", "hotmove-h2", "hotmove-h3")
STARTUP_TIMEOUT = 15.0


def skip_reason() -> str | None:
    """Why the SSH hosts cannot be set up here, or None."""
    if os.geteuid() != 0:
        return "needs root to create Unix users and run sshd"
    if not SSHD.exists():
        return "needs /usr/sbin/sshd (apt-get install -y openssh-server)"
    for tool in ("useradd", "userdel", "usermod", "ssh-keygen", "git"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


@dataclass(frozen=True)
class SshHosts:
    port: int
    users: tuple[str, ...]
    key_path: Path
    shared_dir: Path

    def hosts(self) -> list[Host]:
        return [Host("127.0.0.1", user, self.port) for user in self.users]

    def home(self, user: str) -> Path:
        return Path(pwd.getpwnam(user).pw_dir)

    def write_file(self, user: str, relative: str, text: str, mode: int = 0o644) -> Path:
        """Write a file into a user's home as that user would own it."""
        entry = pwd.getpwnam(user)
        path = Path(entry.pw_dir) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in [path.parent, *path.parent.parents]:
            if parent == Path(entry.pw_dir) or not str(parent).startswith(entry.pw_dir):
                break
            os.chown(parent, entry.pw_uid, entry.pw_gid)
        path.write_text(text)
        os.chown(path, entry.pw_uid, entry.pw_gid)
        path.chmod(mode)
        return path

    def user_processes(self) -> list[psutil.Process]:
        """Live processes owned by the host users, except their SSH sessions."""
        return processes_of(self.users)


def processes_of(users: Sequence[str]) -> list[psutil.Process]:
    """Live processes owned by `users`, except their SSH sessions. Zombies are dead: detached
    processes are reparented to PID 1, which in a container may never reap them."""
    uids = {pwd.getpwnam(user).pw_uid for user in users}
    found = []
    for process in psutil.process_iter(["uids", "name", "status"]):
        with contextlib.suppress(psutil.Error):
            if not process.info["uids"] or process.info["uids"].real not in uids:
                continue
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if process.info["name"] not in ("sshd", "sshd-session"):
                found.append(process)
    return found


# A committee of the tests' size (at most 4 nodes) listens on this many consecutive ports.
COMMITTEE_PORTS = 4 * PORTS_PER_NODE
LOWEST_TEST_PORT = 10_000


def _ephemeral_start() -> int:
    """Where the kernel starts picking ports for outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port(count: int = 1) -> int:
    """The first of `count` consecutive free loopback ports, all below the ephemeral range.

    A port the kernel handed out for binding to port 0 lies in the ephemeral range, where any
    outgoing connection (a client, a peer, another test) can take it, or the ports after it,
    before the process under test listens there: `Address already in use`.
    """
    highest_base = _ephemeral_start() - count
    for _ in range(1_000):
        base = random.randrange(LOWEST_TEST_PORT, highest_base)
        if all(_bindable(port) for port in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports below {highest_base + count}")


def _run(*command: str) -> None:
    subprocess.run(list(command), check=True, capture_output=True)


def _prepare_user(user: str, public_key: str) -> None:
    try:
        pwd.getpwnam(user)
    except KeyError:
        _run("useradd", "--create-home", "--shell", "/bin/bash", user)
    # '!' (locked) makes sshd refuse even key logins without PAM; '*' just disables passwords.
    _run("usermod", "--password", "*", user)
    entry = pwd.getpwnam(user)
    home = Path(entry.pw_dir)
    # A fresh home for every session: the tests own these users.
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(mode=0o755)
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700)
    (ssh_dir / "authorized_keys").write_text(public_key)
    (ssh_dir / "authorized_keys").chmod(0o600)
    for path in (home, ssh_dir, ssh_dir / "authorized_keys"):
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _kill_user_processes(users: tuple[str, ...]) -> None:
    uids = set()
    for user in users:
        with contextlib.suppress(KeyError):
            uids.add(pwd.getpwnam(user).pw_uid)
    for process in psutil.process_iter(["uids"]):
        with contextlib.suppress(psutil.Error):
            if process.info["uids"] and process.info["uids"].real in uids:
                process.kill()


@contextlib.contextmanager
def ssh_hosts(users: tuple[str, ...] = USERS) -> Iterator[SshHosts]:
    """Users, keys and a running sshd; everything is removed again on exit."""
    workdir = Path(tempfile.mkdtemp(prefix="hotmove-sshd-"))
    # Readable by the host users: the tests put shared files (a git repository) here.
    shared = Path(tempfile.mkdtemp(prefix="hotmove-shared-"))
    shared.chmod(0o755)
    created = [u for u in users if not _user_exists(u)]
    process: subprocess.Popen[bytes] | None = None
    try:
        key = workdir / "id_ed25519"
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hotmove-tests", "-f", str(key))
        host_key = workdir / "host_ed25519"
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key))
        public_key = (workdir / "id_ed25519.pub").read_text()
        for user in users:
            _prepare_user(user, public_key)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        port = free_port()
        config = workdir / "sshd_config"
        write_sshd_config(
            config,
            address="127.0.0.1",
            port=port,
            host_key=host_key,
            pid_file=workdir / "sshd.pid",
            users=users,
        )
        _run(str(SSHD), "-t", "-f", str(config))
        with (workdir / "sshd.log").open("wb") as log:
            process = subprocess.Popen(
                [str(SSHD), "-D", "-e", "-f", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        wait_for_sshd("127.0.0.1", port, process, workdir / "sshd.log")
        yield SshHosts(port=port, users=users, key_path=key, shared_dir=shared)
    finally:
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        _kill_user_processes(users)
        for user in created:
            subprocess.run(["userdel", "--remove", user], check=False, capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)


def _user_exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def write_sshd_config(
    path: Path, *, address: str, port: int, host_key: Path, pid_file: Path, users: Sequence[str]
) -> None:
    """The sshd of test hosts: on `address:port`, key logins of `users` only, sftp included."""
    lines = [
        f"Port {port}",
        f"ListenAddress {address}",
        f"HostKey {host_key}",
        f"PidFile {pid_file}",
        "AuthorizedKeysFile .ssh/authorized_keys",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PermitRootLogin no",
        "StrictModes yes",
        f"AllowUsers {' '.join(users)}",
        "Subsystem sftp internal-sftp",
        "MaxStartups 100",
        "MaxSessions 100",
        "LogLevel ERROR",
    ]
    path.write_text("\n".join(lines) + "\n")


def wait_for_sshd(address: str, port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until the sshd `process` listens on `address:port`; its log in the error if it never does."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"sshd on {address}:{port} exited ({process.returncode}): {log.read_text()}"
            )
        with contextlib.suppress(OSError), socket.create_connection((address, port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on {address}:{port}: {log.read_text()}")

"""Machines for the SSH tests: OpenSSH's own sshd started by the test on a free port of a
loopback address (127.0.0.2, 127.0.0.3, …), one a "machine" with its own home and output
directory, key authentication only (a throwaway key made with ssh-keygen), run as the
current user with its own configuration; and an ssh client configuration file for
`ssh -F FILE` (GOSSAMER_SSH / --ssh)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"


def require_ssh() -> None:
    if not (Path(SSHD).is_file() and shutil.which("ssh") and shutil.which("ssh-keygen")):
        pytest.skip("OpenSSH (openssh-server, openssh-client) is not installed")


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def remote_gossamer() -> str:
    """The remote command running this checkout's gossamer with this interpreter (what a
    user writes to point at a venv): PYTHONPATH passed on explicitly, as sshd gives the
    session a fresh environment."""
    path = os.environ.get("PYTHONPATH", "")
    env = f"env PYTHONPATH={path} " if path else ""
    return f"{env}{sys.executable} -m gossamer"


@dataclass
class Machine:
    """One sshd "machine": its address and port, home, output directory, process."""

    host: str
    port: int
    root: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def line(self) -> str:
        """Its line in a machine list."""
        return f"{self.host}:{self.port} out={self.out}"

    def start(self) -> None:
        """Start its sshd (again) and wait until it listens."""
        log = (self.root / "sshd.log").open("ab")
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        log.close()
        _wait_listening(self.host, self.port, self.proc, 20)

    def kill_all(self) -> None:
        """SIGKILL its sshd and every process under it (the sessions and their workers)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for pid in [*descendants(self.proc.pid), self.proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@dataclass
class Machines:
    """The machines of a test and the ssh client configuration reaching them."""

    machines: list[Machine]
    ssh_config: Path

    @property
    def ssh(self) -> str:
        return f"ssh -F {self.ssh_config}"

    def write_list(self, path: Path, *extra: str) -> Path:
        path.write_text(
            "# the test's machines\n" + "".join(f"{m.line}\n" for m in self.machines)
            + "".join(f"{e}\n" for e in extra)
        )  # fmt: skip
        return path


def _wait_listening(host: str, port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd on {host}:{port} exited {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd on {host}:{port} is not listening after {timeout}s")


@contextlib.contextmanager
def ssh_machines(
    tmp_path: Path, hosts: tuple[str, ...] = ("127.0.0.2", "127.0.0.3")
) -> Iterator[Machines]:
    """An sshd on each of `hosts` (a free port), one key for all, and the client's
    configuration; every sshd and its sessions killed at the end."""
    require_ssh()
    base = tmp_path / "ssh"
    base.mkdir()
    key = base / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    host_key = base / "host_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True
    )
    authorized = base / "authorized_keys"
    shutil.copy(key.with_suffix(".pub"), authorized)
    if os.geteuid() == 0:  # sshd's privilege separation directory
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    config = base / "ssh_config"
    config.write_text(
        "Host *\n"
        f"  IdentityFile {key}\n"
        "  IdentitiesOnly yes\n"
        "  UserKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking no\n"
        "  LogLevel ERROR\n"
        "  ConnectTimeout 5\n"
        "  ServerAliveInterval 1\n"
        "  ServerAliveCountMax 3\n"
    )
    machines: list[Machine] = []
    try:
        for n, host in enumerate(hosts, 1):
            root = base / f"m{n}"
            m = Machine(host, free_port(host), root)
            m.home.mkdir(parents=True)
            m.out.mkdir()
            conf = root / "sshd_config"
            conf.write_text(
                f"ListenAddress {host}:{m.port}\n"
                f"HostKey {host_key}\n"
                f"AuthorizedKeysFile {authorized}\n"
                f"PidFile {root / 'sshd.pid'}\n"
                "StrictModes no\n"
                "UsePAM no\n"
                "PasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
                "PubkeyAuthentication yes\n"
                "PermitRootLogin prohibit-password\n"
                f"SetEnv HOME={m.home}\n"
            )
            machines.append(m)
            m.start()
        yield Machines(machines, config)
    finally:
        for m in machines:
            m.kill_all()

"""Workers on other machines over SSH: the machine list, what each machine runs (its
gossamer's version, its cores), and a `gossamer worker` started there through the system
OpenSSH client.

The machine list (`--machines FILE`, $GOSSAMER_MACHINES) is one machine a line:

    [user@]host[:port]  [workers=N]  [out=DIR]      # a comment

`workers=N`: that machine's share of the workers (else the command's --workers spread evenly
over the machines without one, or its cores when --workers is not given); `out=DIR`: the
workers' -o DIR there (else the command's -o). Blank lines and `#` comments are skipped.

The ssh command is `ssh` (settable: `--ssh "ssh -F FILE"`, $GOSSAMER_SSH), always with
`-o BatchMode=yes` (no password prompt: key authentication, the user's ~/.ssh/config
honoured). The gossamer run on the other side is `gossamer` on its PATH (settable:
`--remote-command`, $GOSSAMER_REMOTE_COMMAND, a shell fragment such as `env
PYTHONPATH=/opt/src /opt/venv/bin/python -m gossamer`).

A remote worker is `REMOTE worker --redis - …`: the Redis URL is the first line of its
standard input, and the second the password of a URL without one (this command's
$REDISCLI_AUTH; empty otherwise) — never on a command line, where `ps` shows it on both
machines — and its standard input then stays its control channel: a `stop` line asks it to stop as
SIGTERM does, and its end (the SSH connection gone) too (`watch_control`). ssh forwards no
signal, so `RemoteWorker.ask_to_stop` writes that line.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .._version import __version__
from ..logs import child_env
from ..urls import url_password
from .spawn import REDIS_PASSWORD_ENV

__all__ = [
    "MACHINES_ENV",
    "REMOTE_ENV",
    "SSH_ENV",
    "Machine",
    "Probe",
    "RemoteWorker",
    "machine_list",
    "parse_machines",
    "probe_all",
    "read_machines",
    "remote_shell",
    "spread",
    "ssh_argv",
    "start_detached_remote",
    "start_remote_worker",
    "watch_control",
]

MACHINES_ENV = "GOSSAMER_MACHINES"
SSH_ENV = "GOSSAMER_SSH"
REMOTE_ENV = "GOSSAMER_REMOTE_COMMAND"
DEFAULT_SSH = "ssh"
DEFAULT_REMOTE = "gossamer"
#: seconds a machine has to answer the probe (connecting included)
PROBE_TIMEOUT_S = 30.0
#: the control line that asks a remote worker to stop
STOP_LINE = "stop"

_DEST = re.compile(r"(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s\[\]]+)(?::(?P<port>\d+))?")


@dataclass(frozen=True, slots=True)
class Machine:
    """One line of the machine list."""

    host: str
    user: str | None = None
    port: int | None = None
    workers: int | None = None
    out: str | None = None

    @property
    def name(self) -> str:
        """The machine as its line writes it: `[user@]host[:port]`."""
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.host}" + (f":{self.port}" if self.port else "")

    @property
    def line(self) -> str:
        """Its line in a machine list (what `parse_machines` reads back)."""
        return " ".join(
            [self.name]
            + ([f"workers={self.workers}"] if self.workers is not None else [])
            + ([f"out={self.out}"] if self.out is not None else [])
        )

    @property
    def destination(self) -> str:
        """ssh's destination argument (the port goes in `-p`)."""
        host = self.host.strip("[]")
        return f"{self.user}@{host}" if self.user else host


def parse_machines(text: str, source: str = "machines") -> list[Machine]:
    """The machines of a machine list's text. ValueError names `source`, the line and what
    is wrong with it."""
    machines: list[Machine] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}, line {number}"
        dest, *rest = line.split()
        m = _DEST.fullmatch(dest)
        if m is None:
            raise ValueError(f"{where}: {dest!r} is not [user@]host[:port]")
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"{where}: port {port} is not 1 to 65535")
        workers: int | None = None
        out: str | None = None
        for word in rest:
            key, eq, value = word.partition("=")
            if key == "workers" and eq and value.isdigit():
                workers = int(value)
            elif key == "out" and eq and value:
                out = value
            else:
                raise ValueError(
                    f"{where}: {word!r}: expected workers=N or out=DIR after the destination"
                )
        machines.append(Machine(m["host"], m["user"], port, workers, out))
    names = [m.name for m in machines]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"{source}: {twice} is listed twice")
    if not machines:
        raise ValueError(f"{source}: no machine (one [user@]host[:port] a line)")
    return machines


def machine_list(machines: Sequence[Machine]) -> str:
    """`machines` as a machine list's text, one line each (`parse_machines` reads it)."""
    return "".join(f"{m.line}\n" for m in machines)


def read_machines(path: Path) -> list[Machine]:
    """The machine list in `path`. ValueError (OSError included) names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"machine list {path}: {exc}") from exc
    return parse_machines(text, str(path))


def ssh_argv(ssh: str, machine: Machine, remote: str) -> list[str]:
    """The command line running the shell line `remote` on `machine`: `ssh` (a command with
    its options, split as a shell would) with BatchMode, the port, the destination."""
    argv = [*shlex.split(ssh), "-o", "BatchMode=yes"]
    if machine.port is not None:
        argv += ["-p", str(machine.port)]
    return [*argv, "--", machine.destination, remote]


def remote_shell(ssh: str, machine: Machine) -> str:
    """The ssh command with BatchMode and the port as one shell word list, for rsync's -e."""
    argv = [*shlex.split(ssh), "-o", "BatchMode=yes"]
    if machine.port is not None:
        argv += ["-p", str(machine.port)]
    return shlex.join(argv)


def _no_held_signals() -> None:  # in the child: a parent's held SIGINT/SIGTERM are not its
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))


@dataclass(frozen=True, slots=True)
class Probe:
    """What a machine said when asked for its gossamer's version and its cores: `problem`,
    when set, is the one line saying why it cannot take workers."""

    machine: Machine
    version: str | None = None
    cores: int | None = None
    problem: str | None = None
    hostname: str | None = None  # what its workers call their machine (`hostname`)


def probe(machine: Machine, ssh: str, remote: str, timeout: float = PROBE_TIMEOUT_S) -> Probe:
    """Ask `machine` for its gossamer's version (`REMOTE --version`) and its cores."""
    line = f"{remote} --version; getconf _NPROCESSORS_ONLN; hostname"
    try:
        done = subprocess.run(
            ssh_argv(ssh, machine, line),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            preexec_fn=_no_held_signals,
        )
    except subprocess.TimeoutExpired:
        return Probe(machine, problem=f"machine {machine.name}: no answer over SSH in {timeout:g}s")
    except OSError as exc:
        return Probe(machine, problem=f"machine {machine.name}: cannot run ssh: {exc}")
    out = done.stdout.decode("utf-8", "replace").split()
    err = [x.strip() for x in done.stderr.decode("utf-8", "replace").splitlines() if x.strip()]
    version = out[1] if len(out) >= 2 and out[0] == "gossamer" else None
    cores = int(out[2]) if version is not None and len(out) >= 4 and out[2].isdigit() else None
    hostname = out[3] if cores is not None else None
    if done.returncode == 255 and version is None:
        said = err[-1] if err else "ssh exited 255"
        return Probe(machine, problem=f"machine {machine.name}: cannot be reached over SSH: {said}")
    if version is None:
        said = err[-1] if err else f"it printed {' '.join(out)!r}"
        problem = f"machine {machine.name}: `{remote} --version` failed: {said}"
        return Probe(machine, problem=problem)
    if version != __version__:
        return Probe(
            machine,
            version,
            cores,
            problem=f"machine {machine.name} runs gossamer {version}, this is gossamer "
            f"{__version__}: refused (install the same version on both)",
        )
    return Probe(machine, version, cores, hostname=hostname)


def probe_all(machines: Sequence[Machine], ssh: str, remote: str) -> list[Probe]:
    """`probe` every machine at once; in the machines' order."""
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(machines)))) as pool:
        return list(pool.map(lambda m: probe(m, ssh, remote), machines))


def spread(total: int | None, probes: Sequence[Probe]) -> list[int]:
    """How many workers each usable machine (`probes` without a problem) starts: its line's
    `workers=N`; the rest of `total` spread evenly over the machines without one (the first
    ones take one more); `total` None: each of those its cores. ValueError when `total` is
    less than the lines' counts."""
    fixed = sum(p.machine.workers or 0 for p in probes)
    free = [i for i, p in enumerate(probes) if p.machine.workers is None]
    counts = [p.machine.workers or 0 for p in probes]
    if total is None:
        for i in free:
            counts[i] = probes[i].cores or 1
        return counts
    if total < fixed:
        raise ValueError(
            f"--workers {total} is fewer than the machine list's workers=N ({fixed})"
        )
    rest = total - fixed
    if rest and not free:
        raise ValueError(
            f"--workers {total}: every machine has its workers=N ({fixed} in all); leave "
            "--workers out or change the list"
        )
    for k, i in enumerate(free):
        counts[i] = rest // len(free) + (1 if k < rest % len(free) else 0)
    return counts


class RemoteWorker(subprocess.Popen[bytes]):
    """The ssh process of one remote worker: `pid` is ssh's; `ask_to_stop` sends the worker
    its stop line (ssh forwards no signal); `machine` is where it runs."""

    machine: Machine

    def ask_to_stop(self) -> None:
        stdin = self.stdin
        if stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            stdin.write(f"{STOP_LINE}\n".encode())
            stdin.flush()


def start_remote_worker(
    machine: Machine,
    *,
    ssh: str,
    remote: str,
    url: str,
    crawl_id: str,
    out: str,
    log: IO[bytes] | None = None,
) -> RemoteWorker:
    """Start `REMOTE worker --redis - --crawl ID -o OUT -q` on `machine` (in a session of
    its own: a terminal's ^C is for the command, which forwards it) and give it the Redis
    URL on its standard input. Its output (ssh's too) goes to `log`, else to ours."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(child_env().items()))
    line = (
        (f"env {env} " if env else "")
        + f"{remote} worker --redis - --crawl {shlex.quote(crawl_id)} -o {shlex.quote(out)} -q"
    )
    proc = RemoteWorker(
        ssh_argv(ssh, machine, line),
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        start_new_session=True,
        preexec_fn=_no_held_signals,
    )
    proc.machine = machine
    assert proc.stdin is not None
    password = "" if url_password(url) is not None else os.environ.get(REDIS_PASSWORD_ENV, "")
    with contextlib.suppress(OSError):
        proc.stdin.write(f"{url}\n{password}\n".encode())
        proc.stdin.flush()
    return proc


def start_detached_remote(
    machine: Machine, *, ssh: str, remote: str, url: str, crawl_id: str, out: str
) -> str | None:
    """Start `REMOTE worker --crawl ID -o OUT -q` on `machine` in a session of its own there
    (`setsid`, `nohup`): it outlives the SSH connection and this command (`gossamer workers
    --scale`), its output in `OUT/logs/worker-remote-<shell pid>.log` there. The URL and a
    password for it go through the connection's standard input into the remote shell's
    variables GOSSAMER_REDIS and REDISCLI_AUTH (the worker's environment), never on a
    command line. None, or the line saying why it could not be started."""
    q = shlex.quote(out)
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(child_env().items()))
    line = (
        "IFS= read -r GOSSAMER_REDIS; IFS= read -r REDISCLI_AUTH; export GOSSAMER_REDIS; "
        '[ -n "$REDISCLI_AUTH" ] && export REDISCLI_AUTH || unset REDISCLI_AUTH; '
        f"mkdir -p {q}/logs && "
        f"{{ setsid nohup {'env ' + env + ' ' if env else ''}{remote} worker "
        f"--crawl {shlex.quote(crawl_id)} -o {q} -q "
        f"</dev/null >>{q}/logs/worker-remote-$$.log 2>&1 & }}"
    )
    password = "" if url_password(url) is not None else os.environ.get(REDIS_PASSWORD_ENV, "")
    try:
        done = subprocess.run(
            ssh_argv(ssh, machine, line),
            input=f"{url}\n{password}\n".encode(),
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            preexec_fn=_no_held_signals,
        )
    except (subprocess.TimeoutExpired, OSError) as exc:
        return f"machine {machine.name}: cannot start a worker over SSH: {exc}"
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return (
            f"machine {machine.name}: cannot start a worker over SSH: "
            f"{err[-1] if err else f'exit {done.returncode}'}"
        )
    return None


def read_url(stdin: IO[str]) -> str:
    """`--redis -`: the Redis URL, the first line of standard input; the second line, when
    not empty, is the password of a URL without one (put in $REDISCLI_AUTH, where every
    Redis connection of gossamer looks for it)."""
    url = stdin.readline().strip()
    password = stdin.readline().rstrip("\n")
    if password:
        os.environ[REDIS_PASSWORD_ENV] = password
    return url


def watch_control(stdin: IO[str] = sys.stdin) -> threading.Thread:
    """`--redis -`: once the URL is read, watch standard input in a daemon thread: a `stop`
    line, or its end (the SSH connection gone), sends this process SIGTERM (a worker's
    stop: it finishes its batches); a second `stop`, SIGTERM again (it abandons them)."""

    def watch() -> None:
        for line in stdin:
            if line.strip() == STOP_LINE:
                os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="control-stdin", daemon=True)
    thread.start()
    return thread

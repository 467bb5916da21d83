"""Starting a crawl's processes as new interpreters: the one place that builds the command
line and the environment of a `gossamer` child (a cluster worker, `crawl --redis`, `graph
follow`, the live graph's child) and starts it.

A child's command line never holds a password: `ps` shows it to every user of the machine.
A Redis URL goes to the child in its environment: as GOSSAMER_REDIS (the default of every
subcommand's --redis but `crawl`'s), or, for `crawl --redis`, on the command line without
its password and the password in REDISCLI_AUTH, which every subcommand reads for a URL that
has none (cluster.connect.connect_redis). A `gossamer` child logs as this process was told
to (`logs.child_env`) unless asked not to.

Workers on other machines are ssh processes started by runner/machines.py: their
interpreter is the other machine's, and the Redis URL goes on their standard input.

The fork pool of `--workers N` (runner/pool.py) starts no interpreter: its workers are forks
of the crawl's process, which inherit its imports, its settings and the IP gate broker's
sockets; they have no command line or environment to build, so they are not started here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..logs import child_env
from ..urls import url_password, without_password

__all__ = [
    "REDIS_ENV",
    "REDIS_PASSWORD_ENV",
    "Command",
    "gossamer_command",
    "module_command",
    "start",
]

#: the variable of the Redis URL, every subcommand's --redis default but `crawl`'s
REDIS_ENV = "GOSSAMER_REDIS"
#: the variable of the password of a URL given without one (redis-cli's)
REDIS_PASSWORD_ENV = "REDISCLI_AUTH"


@dataclass(frozen=True, slots=True)
class Command:
    """A child to start: its command line, and its whole environment (None: ours)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] | None = None


def module_command(module: str, *args: str) -> Command:
    """`python -m MODULE ARGS…` with this interpreter, in our environment."""
    return Command((sys.executable, "-m", module, *args))


def gossamer_command(
    *args: str, redis: str | None = None, redis_flag: bool = False, logs: bool = True
) -> Command:
    """`gossamer ARGS…` (the subcommand first) with this interpreter. `redis`: the Redis URL
    the child uses, in GOSSAMER_REDIS; with `redis_flag` (`crawl --redis`, whose flag has no
    default) as `--redis` and the URL without its password after the subcommand, the
    password in REDISCLI_AUTH. `logs`: the child logs in this process's format and level."""
    env = {**os.environ, **(child_env() if logs else {})}
    argv = [sys.executable, "-m", "gossamer", *args]
    if redis is not None and redis_flag:
        argv[3:4] = [args[0], "--redis", without_password(redis)]
        if (password := url_password(redis)) is not None:
            env[REDIS_PASSWORD_ENV] = password
    elif redis is not None:
        env[REDIS_ENV] = redis
    return Command(tuple(argv), env)


def start(
    command: Command,
    *,
    log: Path | IO[bytes] | None = None,
    stdin: int = subprocess.DEVNULL,
    stdout: int | None = None,
    new_session: bool = False,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `command` (its standard input `stdin`: none, or PIPE). Its stderr, and its
    stdout unless `stdout` says where (PIPE), go to `log` (a file appended to, or one open
    for writing), else to ours. `new_session`: in a session of its own (a terminal's ^C
    does not reach it; it may outlive us). `preexec_fn` runs in the child before the exec."""
    if isinstance(log, Path):
        with log.open("ab") as opened:
            return start(
                command, log=opened, stdin=stdin, stdout=stdout, new_session=new_session,
                preexec_fn=preexec_fn,
            )  # fmt: skip
    out: int | IO[bytes] | None = stdout
    err: int | IO[bytes] | None = None
    if log is not None:
        out, err = (log, subprocess.STDOUT) if stdout is None else (stdout, log)
    return subprocess.Popen(
        command.argv,
        stdin=stdin,
        stdout=out,
        stderr=err,
        start_new_session=new_session,
        preexec_fn=preexec_fn,
        env=command.env,
    )

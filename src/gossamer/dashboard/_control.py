"""The dashboard's Setup and control requests (docs/dashboard.md, "Setup and control"):
start a crawl, resume it, scale its workers.

Start and resume run the real command line (`gossamer crawl … -o DIR`, `gossamer crawl
--resume DIR`; for a cluster crawl `gossamer crawl --redis URL --detach …` and `gossamer
crawl --resume --redis URL --crawl ID --detach …`) as a detached process in its own
session, so the form refuses exactly what the command line refuses (in the form's words: its
labels for the flags), and stopping the dashboard does not stop the crawl. A crawl that
fetched no page may be started again in its directory (EmbeddedSource.new_crawl replaces its
files). A cluster crawl may be started on other machines (the form's Machines: a machine
list, `--machines FILE`); it keeps its list, and scaling or resuming it start and stop its
workers there. Scaling takes the code path of `gossamer workers --scale N`. Every function here is
synchronous and called off the event loop; each raises ControlError with the HTTP status and
the one line to answer."""

from __future__ import annotations

import math
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ..config import NO_LIMIT
from ..exitcodes import Exit
from ..runner import spawn
from ..runner.machines import machine_list, parse_machines
from ..runner.pool import MAX_POOL_WORKERS, ScaleError, request_scale
from ._setup import FIELDS, form_words
from ._sources import ClusterSource, EmbeddedSource, SourceError, StatusSource

__all__ = ["START_WAIT_S", "ControlError", "resume_crawl", "scale_crawl", "start_crawl"]

#: the longest a start or resume request waits for the command to start or refuse: a
#: refusal comes after the imports (~0.5 s) and the settings' checks; a proxy that does not
#: answer is given its connect time-out (10 s by default)
START_WAIT_S = 30.0
_POLL_S = 0.05
#: how gossamer (and argparse, for a bad flag value) begins an error line
_ERROR = re.compile(r"^gossamer(?: [\w-]+)?: error: (.*)$")


class ControlError(Exception):
    """A request refused: `status` (400 bad input, 409 not possible now) and its line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def start_log(directory: Path) -> Path:
    """Where a started command's stdout and stderr go: beside the crawl directory, not in it
    (a new crawl's directory must be empty), appended to by every start and resume."""
    return directory.parent / f"{directory.name}.dashboard.log"


def _gossamer(*args: str, redis: str | None = None) -> spawn.Command:
    """A `gossamer` command line as the command line runs it (its error lines human, for
    `_error_line`); with `redis`, `--redis` and the URL without its password, the password
    in $REDISCLI_AUTH (runner/spawn.py)."""
    return spawn.gossamer_command(*args, redis=redis, redis_flag=True, logs=False)


def _count(body: dict[str, Any], key: str, low: int, high: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ControlError(400, f"{key}: give a whole number from {low} to {high}, not {value!r}")
    return value


def _crawl_flags(body: dict[str, Any]) -> list[str]:
    """The form's settings as `gossamer crawl` flags (the command line checks their values:
    its refusal is the answer); what is not a setting of the form is refused here."""
    known = {"seeds", "max_pages", "workers", "scope", "delay", "partition", "max_depth",
             "allow_private", "machines"}  # fmt: skip
    unknown = sorted(set(body) - known)
    if unknown:
        names = ", ".join(sorted(known))
        raise ControlError(400, f"unknown setting {unknown[0]!r}; known: {names}")
    flags: list[str] = []
    for key, flag in (("max_pages", "--max-pages"), ("max_depth", "--max-depth")):
        value = body.get(key)
        if value is not None:
            if value != NO_LIMIT and (isinstance(value, bool) or not isinstance(value, int)):
                raise ControlError(
                    400, f"{key}: give a whole number, {NO_LIMIT!r} or null, not {value!r}"
                )
            flags += [flag, str(value)]
    allow_private = body.get("allow_private")
    if allow_private is not None:
        if not isinstance(allow_private, bool):
            raise ControlError(
                400, f"allow_private: give true, false or null, not {allow_private!r}"
            )
        flags.append("--allow-private" if allow_private else "--no-allow-private")
    delay = body.get("delay")
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(
            delay
        ):
            raise ControlError(400, f"delay: give a number of seconds or null, not {delay!r}")
        flags += ["--delay", repr(float(delay))]
    for key, flag in (("scope", "--scope"), ("partition", "--partition")):
        value = body.get(key)
        if value is not None:
            if not isinstance(value, str):
                raise ControlError(400, f"{key}: give a name or null, not {value!r}")
            flags += [f"{flag}={value}"]  # (one word: a value starting with - stays a value)
    return flags


def _seeds(body: dict[str, Any]) -> list[str]:
    seeds = body.get("seeds")
    if not isinstance(seeds, list) or not all(isinstance(u, str) for u in seeds):
        raise ControlError(400, "seeds: give a list of URLs")
    return [u.strip() for u in seeds if u.strip()]


def _error_line(text: str) -> str:
    """The command's refusal: its `gossamer: error:` line (argparse's: `gossamer crawl:
    error:`) and the indented lines that continue it (`; ` between them), without the
    prefix, on one line; else its last line."""
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if m := _ERROR.match(line):
            rest = []
            for more in lines[k + 1 :]:
                if not more.startswith(" "):
                    break
                rest.append(more.strip())
            return " ".join([m.group(1).strip(), "; ".join(rest)]).strip()
    tail = [x for x in lines if x.strip()]
    return tail[-1].removeprefix("gossamer: ") if tail else "the command failed"


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a started command in a thread (no zombie while the dashboard runs; the
    crawl itself is in its own session and outlives the dashboard)."""
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()


def _run_detached(command: spawn.Command, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start `command` in its own session, its output appended to `log`; the process and the
    log's offset where its lines begin."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as f:
            offset = f.tell()
            proc = spawn.start(command, log=f, new_session=True)
    except OSError as exc:
        raise ControlError(409, f"cannot start the crawl (log {log}): {exc}") from exc
    return proc, offset


def _log_since(log: Path, offset: int) -> str:
    try:
        with log.open("rb") as f:
            f.seek(offset)
            return f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return ""


def _wait_started(source: EmbeddedSource, command: spawn.Command, what: str) -> str:
    """Run a `gossamer crawl` command for the embedded crawl and wait until it holds the
    directory's lock (started) or exits (its error line: 400)."""
    log = start_log(source.directory)
    proc, offset = _run_detached(command, log)
    deadline = time.monotonic() + START_WAIT_S
    while True:
        code = proc.poll()
        if code is not None:
            if code == 0:
                return f"{what}: the crawl ran and ended (exit 0); its output is in {log}"
            # a crawl that ran and fetched nothing: what to change, in the form's words (a
            # command that refused its settings left the directory as it was: its own line)
            problem = source.snapshot()["crawl"]["problem"]
            if code == Exit.NOTHING_FETCHED and problem is not None:
                raise ControlError(400, problem["message"])
            raise ControlError(400, form_words(_error_line(_log_since(log, offset))))
        if source.lock_pid() == proc.pid:
            _reap(proc)
            return f"{what}: pid {proc.pid}; its output goes to {log}"
        if time.monotonic() > deadline:
            _reap(proc)
            return f"{what}: pid {proc.pid}, still starting after {START_WAIT_S:g} s; see {log}"
        time.sleep(_POLL_S)


def _machines(body: dict[str, Any]) -> str:
    """The form's machine list (its text; "" for none), checked as `--machines FILE` is:
    a bad line is refused naming it."""
    text = body.get("machines")
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ControlError(400, f"machines: give a machine list's text, not {text!r}")
    if not text.strip():
        return ""
    try:
        return machine_list(parse_machines(text, FIELDS["machines"]))
    except ValueError as exc:
        raise ControlError(400, str(exc)) from exc


def start_crawl(source: StatusSource, body: dict[str, Any]) -> str:
    """POST /api/start: a new crawl, as `gossamer crawl` starts it."""
    seeds = _seeds(body)
    workers = _count(body, "workers", 1, MAX_POOL_WORKERS)
    flags = _crawl_flags(body)
    machines = _machines(body)
    if machines and not isinstance(source, ClusterSource):
        raise ControlError(
            400, "Machines: workers on other machines are for a cluster crawl (`gossamer "
            "dashboard --redis URL`); leave Machines empty",
        )  # fmt: skip
    status = source.snapshot()
    if not status["control"]["can_start"]:
        state = status["crawl"]["state"]
        if isinstance(source, EmbeddedSource):
            if state in ("running", "stopping"):
                raise ControlError(409, f"a crawl is {state} in {source.directory}")
            raise ControlError(
                409, f"{source.directory} already holds a crawl ({state}): resume it, or "
                "start the dashboard on a new directory",
            )  # fmt: skip
        raise ControlError(409, f"crawl {status['crawl']['id']} is {state}: stop it first")
    if isinstance(source, EmbeddedSource):
        if workers is not None:  # (else the crawl's own default: one per core)
            flags = ["--workers", str(workers), *flags]
        command = _gossamer("crawl", "-o", str(source.directory.absolute()),
                            *flags, "-q", "--", *seeds)  # fmt: skip
        with source.new_crawl(status):
            return _wait_started(source, command, "started")
    if isinstance(source, ClusterSource):
        return _start_cluster(source, seeds, workers or 1, flags, machines)
    raise ControlError(409, "this dashboard cannot start a crawl")


def _start_cluster(
    source: ClusterSource, seeds: list[str], workers: int, flags: list[str], machines: str
) -> str:
    """`gossamer crawl --redis URL --workers N --detach`: the crawl is created, its local
    workers spawned in their own sessions, and the command exits printing the crawl's id.
    With a machine list: `--machines FILE` too (FILE beside the outputs: `machines_file`),
    the workers started over SSH on those machines (the dashboard's GOSSAMER_SSH and
    GOSSAMER_REMOTE_COMMAND say how), and the list kept with the crawl for the slider."""
    # a new directory per start (`crawl --redis` refuses one that holds files), under
    # `crawl --redis`'s and `workers`'s default -o, in the dashboard's working directory
    out = Path("gossamer-worker").absolute() / f"crawl-{time.strftime('%Y%m%d-%H%M%S')}"
    more: list[str] = []
    if machines:
        listing = machines_file(out)
        try:
            listing.parent.mkdir(parents=True, exist_ok=True)
            listing.write_text(machines, encoding="utf-8")
        except OSError as exc:
            raise ControlError(409, f"cannot write the machine list {listing}: {exc}") from exc
        more = ["--machines", str(listing)]
    # the password (if any) in the environment, where `ps` does not show it; the command
    # and the workers it spawns read it there (cluster.connect.connect_redis)
    command = _gossamer("crawl", "--workers", str(workers), "--detach", "-o", str(out), *more,
                        *flags, "-q", "--", *seeds, redis=source.redis_url())  # fmt: skip
    code, crawl_id, log, said = _run_cluster_command(command, out, "crawl --redis")
    if code != 0 or not crawl_id:
        raise ControlError(400, form_words(said))
    source.follow(crawl_id)
    source.workers_out = out
    graph = _follow_graph(source, crawl_id, out)
    where = _local(workers) if not machines else _remote(workers, machines)
    return f"started crawl {crawl_id} with {where}{graph}; outputs in {out}, log {log}"


def machines_file(directory: Path) -> Path:
    """Where the machine list of a crawl started from the form is written: beside its
    outputs (as its log, `start_log`), not in them."""
    return directory.parent / f"{directory.name}.machines"


def _remote(workers: int, machines: str) -> str:
    n = len(machines.splitlines())
    return (f"{workers} worker{'' if workers == 1 else 's'} over SSH on {n} "
            f"machine{'' if n == 1 else 's'}")  # fmt: skip


def _local(workers: int) -> str:
    return f"{workers} local worker{'' if workers == 1 else 's'}"


def _run_cluster_command(
    command: spawn.Command, out: Path, what: str
) -> tuple[int, str, Path, str]:
    """Run a `gossamer crawl --redis … --detach` command in its own session, its stderr
    appended to `start_log(out)`, and wait for it (at most START_WAIT_S: it exits once its
    local workers are spawned). Its exit status, the crawl id it printed ("" for none), the
    log, and its error line (`_error_line`) when it failed or printed no id."""
    log = start_log(out)
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as f:
            offset = f.tell()
            proc = spawn.start(command, log=f, stdout=subprocess.PIPE, new_session=True)
            try:
                printed, _ = proc.communicate(timeout=START_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise ControlError(409, f"`gossamer {what}` did not answer in "
                                   f"{START_WAIT_S:g} s; see {log}") from None  # fmt: skip
    except OSError as exc:
        raise ControlError(409, f"cannot start the crawl (log {log}): {exc}") from exc
    crawl_id = printed.decode("utf-8", "replace").strip()
    failed = proc.returncode != 0 or not crawl_id
    return proc.returncode, crawl_id, log, _error_line(_log_since(log, offset)) if failed else ""


def _follow_graph(source: ClusterSource, crawl_id: str, out: Path) -> str:
    """With the live graph on (`live_graph`), `gossamer graph follow` for the crawl, as
    `crawl --redis` without `--detach` runs it (its state and statistics in `out/graph/`):
    it ends once the crawl has; what was done, in words."""
    from ..cluster.control import start_graph_follower
    from ..cluster.crawls import CrawlRecordError

    try:
        record = source.crawl_record(crawl_id)
    except CrawlRecordError:
        return ""
    if not record.settings.get("live_graph"):
        return ""
    follower = start_graph_follower(source.redis_url(), record, out)
    _reap(follower)
    source.graph_follower = follower
    return " and its live graph (`gossamer graph follow`)"


def _follower_ended(source: ClusterSource) -> bool:
    """Whether the graph consumer this dashboard started last has exited (once the crawl
    stopped it reads what the stream holds, writes its statistics and exits: well within
    START_WAIT_S); a consumer still running when the crawl goes on again would share the
    new events with the one the resume starts."""
    follower = source.graph_follower
    deadline = time.monotonic() + START_WAIT_S
    while follower is not None and follower.poll() is None:  # (the reaper thread waits)
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def resume_crawl(source: StatusSource, body: dict[str, Any]) -> str:
    """POST /api/resume: `gossamer crawl --resume DIR` (embedded), `gossamer crawl --resume
    --redis URL --crawl ID --detach` (a stopped cluster crawl)."""
    unknown = sorted(set(body) - {"workers"})
    if unknown:
        raise ControlError(400, f"unknown setting {unknown[0]!r}; a resume takes only workers")
    workers = _count(body, "workers", 1, MAX_POOL_WORKERS)
    if isinstance(source, ClusterSource):
        return _resume_cluster(source, workers or 1)
    if not isinstance(source, EmbeddedSource):
        raise ControlError(409, "this dashboard cannot resume a crawl")
    status = source.snapshot()
    if not status["control"]["can_resume"]:
        state, reason = status["crawl"]["state"], status["crawl"]["end_reason"]
        why = f"{state} ({reason})" if reason else state
        raise ControlError(409, f"the crawl in {source.directory} is {why}: nothing to resume")
    more = () if workers is None else ("--workers", str(workers))
    command = _gossamer("crawl", "--resume", str(source.directory.absolute()), "-q", *more)
    return _wait_started(source, command, "resumed")


def _resume_cluster(source: ClusterSource, workers: int) -> str:
    """`gossamer crawl --resume --redis URL --crawl ID --workers N --detach -o DIR`: the
    stopped crawl is set running again (the leases of workers that died reclaimed), its new
    local workers spawned in their own sessions beside the earlier ones (DIR: where this
    dashboard's workers write, `workers_out`), and the command exits printing the crawl's
    id. A crawl that is not stopped, or has nothing queued, is refused (409) saying why."""
    status = source.snapshot()
    crawl_id, state = status["crawl"]["id"], status["crawl"]["state"]
    if crawl_id is None:
        raise ControlError(409, f"no crawl in {status['source']['redis']} yet: start one")
    if not status["control"]["can_resume"]:
        why = {
            "running": "nothing to resume (scale its workers to add some)",
            "stopping": "its workers are finishing their batches; resume it once they have left",
            "finished": "nothing to resume",
        }
        raise ControlError(409, f"crawl {crawl_id} is {state}: {why[state]}" if state in why
                           else f"crawl {crawl_id} is {state} with no URL queued: nothing to "
                           "resume")  # fmt: skip
    live_graph = _follower_ended(source)
    out = source.workers_out.absolute()
    command = _gossamer("crawl", "--resume", "--crawl", crawl_id, "--workers", str(workers),
                        "--detach", "-o", str(out), "-q", redis=source.redis_url())  # fmt: skip
    code, printed, log, said = _run_cluster_command(command, out, "crawl --resume --redis")
    if code == 0 and not printed:  # finished meanwhile: the command has nothing to resume
        raise ControlError(409, f"crawl {crawl_id} is finished: nothing to resume")
    if code != 0 or printed != crawl_id:  # stopping again meanwhile, or Redis went away
        raise ControlError(409, form_words(said))
    source.follow(crawl_id)
    if live_graph:
        graph = _follow_graph(source, crawl_id, out)
    else:
        graph = " (the live graph's consumer of its last run has not ended: none started)"
    machines = source.crawl_record(crawl_id).machines  # (then the command resumed on them)
    where = _local(workers) if not machines else _remote(workers, machines)
    return f"resumed crawl {crawl_id} with {where}{graph}; outputs in {out}, log {log}"


def scale_crawl(source: StatusSource, body: dict[str, Any]) -> str:
    """POST /api/scale: the code path of `gossamer workers --scale N` (DIR or --redis)."""
    unknown = sorted(set(body) - {"workers"})
    if unknown:
        raise ControlError(400, f"unknown setting {unknown[0]!r}; scaling takes only workers")
    if body.get("workers") is None:
        raise ControlError(400, "workers: give the number of workers")
    if isinstance(source, EmbeddedSource):
        target = _count(body, "workers", 1, MAX_POOL_WORKERS)
        assert target is not None
        try:
            return request_scale(source.directory, target)
        except ScaleError as exc:
            raise ControlError(409, str(exc)) from exc
    if isinstance(source, ClusterSource):
        target = _count(body, "workers", 0, MAX_POOL_WORKERS)
        assert target is not None
        try:
            return source.scale(target)
        except SourceError as exc:
            raise ControlError(409, str(exc)) from exc
    raise ControlError(409, "this dashboard cannot scale its crawl")


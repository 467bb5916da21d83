"""The cluster's lifecycle commands: `crawl --redis`, `crawl --resume --redis`, `status`,
`stop`, `workers --scale`.

Local workers are `gossamer worker` processes: attached ones (`crawl --redis --workers N`)
are children the command waits for (their output in `DIR/logs/worker-<pid>.log` while the
command shows its progress display, which their lines would cut into; the command says one
line of each as it ends); detached ones (`--detach`, `workers --scale`) run in their own
session with their output in `DIR/logs/worker-<pid>.log`, their pids recorded in Redis under
this machine's name (`gs:<crawl>:{m}:spawned:<machine>`). Workers get the Redis
URL in their environment (GOSSAMER_REDIS), not on their command line, where `ps` would show
its password to every user of the machine. With `--machines FILE` the attached workers run
on other machines instead, each an ssh process (`runner.machines.RemoteWorker`, the URL on
its standard input) waited for and stopped like a local one (`plan_machines`,
`_remote_launchers`; docs/deploy.md), or with `--detach` started to outlive it
(`start_detached_on`); the crawl keeps its machine list (`CrawlRecord.machines`), on which
`workers --scale`, `crawl --resume --redis` and the dashboard start its workers after.

These commands try Redis once (CONTROL_PATIENCE): a person or script waits for their answer,
which is "it cannot be reached" (exit 69) or "it refuses the password" (77) at once; only
`gossamer worker` waits for Redis to come up. gossamer.exitcodes has the table.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, cast

from ..config import CLUSTER_DEFAULTS, ClusterSettings, CrawlSettings
from ..crawldir import ClusterDir
from ..exitcodes import Exit
from ..frontier import FrontierStats
from ..outdir import new_directory_problem
from ..partition import PartitionError
from ..report.progress import ProgressDisplay, WorkersProgress
from ..runner.machines import (
    Machine,
    Probe,
    RemoteWorker,
    machine_list,
    parse_machines,
    probe_all,
    spread,
    start_detached_remote,
    start_remote_worker,
)
from ..runner.spawn import Command, gossamer_command, start
from ..runner.stopping import STOP_GRACE_S, STOP_SIGNALS, ask_to_stop, hold_stop_signals
from ._redis import (
    Keys,
    RedisClient,
    redact,
    server_time,
    text,
    wait_replicas,
)
from .connect import (
    report_failure,
    with_client,
)
from .crawls import (
    CrawlRecord,
    CrawlRecordError,
    create_crawl,
    load_crawl,
    open_frontier,
    request_stop,
    resume_command,
    resume_crawl,
    settle_stopped,
    store_machines,
)
from .members import Membership, WorkerStatus

_log = logging.getLogger(__name__)

__all__ = [
    "Machines",
    "crawl_status",
    "resume_cluster_crawl",
    "run_cluster_crawl",
    "scale_machines",
    "scale_message",
    "scale_workers",
    "spawn_detached",
    "start_detached_on",
    "start_detached_workers",
    "status_main",
    "stop_main",
    "workers_main",
]


#: seconds `status`, `stop` and `workers --scale` wait for each answer of Redis (each command
#: sent once): a Redis that accepts connections and never answers ends them with an error
CONTROL_READ_TIMEOUT = 10.0


def worker_command(url: str, crawl_id: str, out: Path) -> Command:
    """The command of a local worker (quiet, its outputs under `out`): `url` in its
    environment, never on its command line (runner/spawn.py), and this command's log format
    and level."""
    return gossamer_command("worker", "--crawl", crawl_id, "-o", str(out), "-q", redis=url)


# ---------------------------------------------------------------------------- crawl --redis


@dataclass(frozen=True, slots=True)
class Machines:
    """`crawl --redis --machines FILE`: the machines (runner/machines.py), the ssh command
    and the gossamer run on them. No machines: those of the crawl's own machine list, the
    one it was created (or last resumed) with (`for_crawl`)."""

    machines: Sequence[Machine]
    ssh: str = "ssh"
    remote: str = "gossamer"

    def for_crawl(self, record: CrawlRecord) -> Machines | None:
        """These machines; none given: the crawl's machine list, reached with this ssh
        and remote command (None: the crawl has none)."""
        if self.machines:
            return self
        if not record.machines:
            return None
        listed = parse_machines(record.machines, f"crawl {record.id}'s machine list")
        return Machines(listed, self.ssh, self.remote)


#: the remote workers to start: (machine, how many) with the ssh and remote commands
RemotePlan = tuple[Machines, Sequence[tuple[Machine, int]]]


def plan_machines(machines: Machines, workers: int | None) -> RemotePlan | int:
    """Ask every machine for its gossamer's version and cores (at once), say one line of each
    that cannot take workers (unreachable, another version), and spread `workers` (None: each
    machine's cores) over the others; the plan, or an exit status when none can."""
    probes = probe_all(machines.machines, machines.ssh, machines.remote)
    for p in probes:
        if p.problem is not None:
            _log.error(p.problem, extra={"machine": p.machine.name})
    usable = [p for p in probes if p.problem is None]
    if not usable:
        _log.error("no machine of the list can take workers: the crawl is not created")
        return Exit.UNAVAILABLE
    try:
        counts = spread(workers, usable)
    except ValueError as exc:
        return report_failure(exc)
    return machines, [(p.machine, c) for p, c in zip(usable, counts, strict=True) if c > 0]


def _plan_workers(
    machines: Machines | None, workers: int | None
) -> tuple[RemotePlan | None, int] | int:
    """(the plan of workers on `machines` or None, how many workers in all), or the exit
    code of a plan refused (no machine reachable)."""
    if machines is None or not machines.machines:
        return None, _local_workers(workers)
    planned = plan_machines(machines, workers)
    if isinstance(planned, int):
        return planned
    return planned, sum(c for _, c in planned[1])


def run_cluster_crawl(
    url: str,
    settings: CrawlSettings,
    *,
    workers: int | None = None,
    detach: bool = False,
    progress: IO[str] | None = None,
    machines: Machines | None = None,
) -> int:
    """Create the crawl in Redis (its id on stdout) with its cluster settings
    (`settings.cluster`: partition, heartbeat TTL, …), then start `workers` local workers
    (None: one per core; 0: none) and wait for them, or leave them running (`detach`).
    With `machines`: the workers run on those machines over SSH (`plan_machines`; None:
    each machine's cores), and the command waits for them, or leaves them running
    (`detach`: `start_detached_on`); the machine list is kept with the crawl
    (`CrawlRecord.machines`), for `workers --scale`, a resume and the dashboard."""
    try:
        weights = shard_weights_of(settings.cluster)
    except ValueError as exc:  # before Redis: a bad SOURCE is the command line's error
        return report_failure(exc)
    planned = _plan_workers(machines, workers)
    if isinstance(planned, int):
        return planned
    plan, n = planned

    def create(client: RedisClient) -> int:
        if n > 0:
            # the local workers write DIR/w1/, DIR/w2/, …: in a directory that holds files
            # (another crawl's w1/, …) they would overwrite them; refused before the crawl
            problem = new_directory_problem(settings.output)
            if problem is not None:
                return report_failure(ValueError(problem))
        try:
            listed = machine_list(machines.machines) if machines is not None else ""
            crawl_id = create_crawl(
                client, settings.seeds, settings, weights=weights, machines=listed
            )
        except PartitionError as exc:
            return report_failure(exc)
        cl = settings.cluster
        wait_replicas(client, crawl_id, cl.replica_acks, cl.replica_ack_timeout)
        print(crawl_id, flush=True)
        if n <= 0:
            _log.info(
                f"crawl {crawl_id} created; join it with "
                f"`gossamer worker --redis {redact(url)} --crawl {crawl_id}`",
                extra={"crawl_id": crawl_id},
            )
            return 0
        record = load_crawl(client, crawl_id)
        if plan is not None:
            if detach:
                return start_detached_on(plan, url, record, str(settings.output))
            remote = (plan, str(settings.output))
            return _run_attached(client, url, record, settings.output, n, progress, remote=remote)
        return _run_local(client, url, record, settings.output, n, detach, progress)

    return with_client(url, create)


def start_detached_on(plan: RemotePlan, url: str, record: CrawlRecord, default_out: str) -> int:
    """`crawl --redis --machines FILE --detach`: the plan's workers started over SSH as
    `workers --scale` starts them (`start_detached_remote`: they outlive this command), the
    machines at once; one line a machine. Exit.UNAVAILABLE when none could be started."""
    machines, counts = plan

    def start_on(item: tuple[Machine, int]) -> str | None:
        machine, count = item
        return start_detached_workers(machines, machine, count, url, record.id, default_out)

    with ThreadPoolExecutor(max_workers=min(16, max(1, len(counts)))) as pool:
        failures = list(pool.map(start_on, counts))
    started = 0
    for (machine, count), failed in zip(counts, failures, strict=True):
        extra = {"crawl_id": record.id, "machine": machine.name}
        if failed is not None:
            _log.error(failed, extra=extra)
            continue
        started += count
        _log.info(
            f"crawl {record.id} on machine {machine.name}: {count} detached "
            f"worker{'s' if count > 1 else ''} started over SSH, outputs under "
            f"{machine.out or default_out}/ there",
            extra=extra,
        )
    return Exit.OK if started else Exit.UNAVAILABLE


def start_detached_workers(
    machines: Machines, machine: Machine, count: int, url: str, crawl_id: str, default_out: str
) -> str | None:
    """Start `count` detached workers on `machine` over SSH (`start_detached_remote`, one
    connection each); None, or the line saying why one could not be started (the rest are
    not tried)."""
    for _ in range(count):
        failed = start_detached_remote(
            machine, ssh=machines.ssh, remote=machines.remote, url=url, crawl_id=crawl_id,
            out=machine.out or default_out,
        )  # fmt: skip
        if failed is not None:
            return failed
    return None


def _local_workers(workers: int | None) -> int:
    """How many local workers `--workers` asks for (None: one per core)."""
    return (os.cpu_count() or 1) if workers is None else workers


def _run_local(
    client: RedisClient,
    url: str,
    record: CrawlRecord,
    out: Path,
    n: int,
    detach: bool,
    progress: IO[str] | None,
) -> int:
    """Start n (> 0) local workers of a running crawl: detached (this command returns at
    once), or attached (it waits for them)."""
    if detach:
        pids = spawn_detached(client, url, record.id, out, n)
        _log.info(
            f"crawl {record.id}: {n} detached workers (pids "
            f"{', '.join(map(str, pids))}), outputs under {out}/",
            extra={"crawl_id": record.id, "pids": pids, "path": str(out)},
        )
        return 0
    return _run_attached(client, url, record, out, n, progress)


def resume_cluster_crawl(
    url: str,
    crawl_id: str | None,
    *,
    out: Path,
    workers: int | None = None,
    detach: bool = False,
    progress: IO[str] | None = None,
    machines: Machines | None = None,
) -> int:
    """`gossamer crawl --resume --redis URL [--crawl ID]`: set a stopped crawl running again
    (`crawls.resume_crawl`: its frontier as the stop left it, the leases of workers that
    died reclaimed), its id on stdout, then start `workers` local workers as `crawl --redis`
    does (None: one per core; 0: none, `gossamer worker` joins it), their outputs under
    `out` beside those of its earlier workers (worker ids are never reused in a crawl). A
    running crawl is left as it is and gets the workers; a finished one has nothing to
    resume (exit 0); a stopping one, whose workers are still finishing their batches, is
    resumed once they have left (exit 2 until then). With `machines`, the workers run on
    those machines over SSH, as for `run_cluster_crawl` (their list kept with the crawl
    from now on); `machines` without any (`Machines.for_crawl`): on the crawl's own machine
    list, if it has one."""
    given = machines if machines is not None and machines.machines else None
    planned = _plan_workers(given, workers)
    if isinstance(planned, int):
        return planned
    plan, n = planned

    def resume(client: RedisClient) -> int:
        nonlocal plan, n
        record = load_crawl(client, crawl_id, among=("stopped", "stopping"))
        if record.state == "stopping" and settle_stopped(client, record):  # its workers died
            record = load_crawl(client, record.id)
        if record.state == "finished":
            _log.info(f"crawl {record.id} is finished: nothing to resume",
                      extra={"crawl_id": record.id})  # fmt: skip
            return Exit.OK
        if record.state == "stopping":
            raise CrawlRecordError(
                f"crawl {record.id} is stopping: its workers are finishing their batches; "
                "resume it once they have left (`gossamer stop --wait S` waits for them)"
            )
        if machines is not None and given is None and workers != 0:
            try:
                own = machines.for_crawl(record)
            except ValueError as exc:  # a stored list this gossamer cannot read
                return report_failure(exc)
            if own is not None:  # the crawl's machines
                replanned = plan_machines(own, workers)
                if isinstance(replanned, int):
                    return replanned
                plan, n = replanned, sum(c for _, c in replanned[1])
        resumed = resume_crawl(client, record)
        if given is not None:
            store_machines(client, record.id, machine_list(given.machines))
        record = load_crawl(client, record.id)
        if record.state != "running":  # stopped again meanwhile
            raise CrawlRecordError(f"crawl {record.id} is {record.state}: not resumed")
        print(record.id, flush=True)
        frontier = open_frontier(client, record.id, record.worker_settings(Path(".")))
        try:
            st = frontier.statistics()
        finally:
            frontier.close()
        said = f"crawl {record.id} {'resumed' if resumed else 'is running already'}: " + (
            f"{st.queued:,} URLs queued, {st.done:,} pages done"
        )
        if n <= 0:
            said += f"; join it with `gossamer worker --redis {redact(url)} --crawl {record.id}`"
        _log.info(said, extra={"crawl_id": record.id, "queued": st.queued, "done": st.done})
        if n <= 0:
            return Exit.OK
        if plan is not None:
            if detach:
                return start_detached_on(plan, url, record, str(out))
            return _run_attached(client, url, record, out, n, progress, remote=(plan, str(out)))
        return _run_local(client, url, record, out, n, detach, progress)

    return with_client(url, resume)


def shard_weights_of(cluster: ClusterSettings) -> Sequence[tuple[int, float]] | None:
    """The `sized` strategy's shard weights, from the site sizes of `cluster.site_sizes`
    (None for another strategy). ValueError when the two are not given together, or the
    sizes cannot be read (the message names the file and line)."""
    if (cluster.partition == "sized") != (cluster.site_sizes is not None):
        raise ValueError("--partition sized and --site-sizes SOURCE go together")
    if cluster.site_sizes is None:
        return None
    from .sizes import read_site_sizes, shard_weights

    return shard_weights(read_site_sizes(cluster.site_sizes))


def _run_attached(
    client: RedisClient,
    url: str,
    record: CrawlRecord,
    out: Path,
    n: int,
    progress: IO[str] | None,
    *,
    remote: tuple[RemotePlan, str] | None = None,
) -> int:
    """Start n workers as children, show progress, forward SIGINT/SIGTERM, wait; the exit
    status is the crawl's outcome's (`_attached_exit`). `remote`: the workers are started
    over SSH by that plan (their -o there: the machine's `out=`, else the string given),
    each one's output in `DIR/logs/machine-<machine>-<k>.log` (`_remote_launchers`).

    A stop at any moment from the first spawn on reaches every worker once: SIGINT/SIGTERM
    are held (blocked) while the workers are spawned, with the forwarding handler already
    installed, and taken once every worker is in `procs`. Each worker is a fresh interpreter
    that inherits the blocked mask across exec and takes the signals once its own handlers
    are in place (`run_engine`), so a stop forwarded while it starts (connecting, joining
    the member list) ends it cleanly instead of by the default action.

    With a progress display, each worker's output goes to `DIR/logs/worker-<pid>.log` (its
    lines would cut into the display) and the display says one line of each as it ends;
    without one (-q, JSON logs), the workers write on this command's stderr."""
    out.mkdir(parents=True, exist_ok=True)
    logged = progress is not None
    spawned_at = time.time()
    # --live-graph: the crawl's graph consumer beside the workers, started first (in its own
    # session: it stops when told below)
    follower = start_graph_follower(url, record, out) if record.settings.get("live_graph") else None
    try:
        procs: list[subprocess.Popen[bytes]] = []
        stopped: list[int] = []
        asked: set[int] = set()  # the workers sent SIGTERM: each is asked once
        hurried: set[int] = set()  # … and once more: they abandon their requests in flight

        def forward(signum: int, _frame: object) -> None:
            # as a pool's parent (engine.pool._supervise): the same signal again is forwarded
            # again, and a worker that gets its SIGTERM twice abandons its requests in flight
            repeated = signum in stopped
            stopped.append(signum)
            ask_to_stop(procs, hurried if repeated else asked, _attached_alive)

        remote_logs: dict[int, Path] = {}

        def ended(p: subprocess.Popen[bytes]) -> str:
            if isinstance(p, RemoteWorker):
                return _remote_ended_line(p, remote_logs.get(p.pid))
            who = _local_statuses(client, record, [p.pid], since=spawned_at).get(p.pid)
            return _ended_line(p, who, ClusterDir(out).spawn_log(p.pid))

        launchers: list[Callable[[], subprocess.Popen[bytes]]]
        if remote is None:
            launchers = [lambda: _start_worker(url, record.id, out, logged=logged)] * n
        else:
            launchers = _remote_launchers(
                url, record.id, out, remote, logged=logged, logs=remote_logs
            )

        with hold_stop_signals():
            previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
            try:
                try:
                    for launch in launchers:
                        proc = launch()
                        procs.append(proc)  # at once: a failure below stops it too
                        # the mask holds a stop on this thread only: one that another
                        # thread took is forwarded now, to the workers started so far —
                        # and so to this one
                        if stopped:
                            ask_to_stop([proc], asked, _attached_alive)
                except BaseException:
                    ask_to_stop(procs, asked, _attached_alive)  # no worker left crawling unattended
                    raise
                signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a held stop: forward it
                started = (
                    f"{n} local worker{'s' if n > 1 else ''} (pids "
                    f"{', '.join(str(p.pid) for p in procs)}): outputs in {out}/<worker id>/, "
                    f"their diagnostics in {ClusterDir(out).spawn_logs}/worker-<pid>.log"
                ) if remote is None else _remote_started(remote, out)
                # (said on the display only: there is one exactly when the output is logged)
                _watch(client, record, procs, progress, stopped, started=started, ended=ended)
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        codes = [p.wait() for p in procs]
    finally:
        if follower is not None:
            _end_follower(follower, out)
    if stopped:
        return Exit.INTERRUPTED if stopped[0] == signal.SIGINT else Exit.TERMINATED
    return _attached_exit(client, url, record, procs, since=spawned_at, codes=codes)


def _start_worker(
    url: str, crawl_id: str, out: Path, *, logged: bool, new_session: bool = False
) -> subprocess.Popen[bytes]:
    """Start one local worker; `logged`: its output in `out/logs/worker-<pid>.log`, else on
    this command's stdout and stderr. `new_session`: it outlives this command (detached)."""
    command = worker_command(url, crawl_id, out)
    if not logged:
        return start(command, new_session=new_session)
    cluster = ClusterDir(out)
    cluster.spawn_logs.mkdir(parents=True, exist_ok=True)
    tmp = cluster.spawn_logs / f"worker-starting-{os.getpid()}-{next(_STARTED)}.log"
    proc = start(command, log=tmp, new_session=new_session)
    tmp.rename(cluster.spawn_log(proc.pid))
    return proc


_STARTED = itertools.count()  # the workers this process started: their logs' temporary names


def _remote_launchers(
    url: str,
    crawl_id: str,
    out: Path,
    remote: tuple[RemotePlan, str],
    *,
    logged: bool,
    logs: dict[int, Path],
) -> list[Callable[[], subprocess.Popen[bytes]]]:
    """One starter a remote worker of the plan; a started one's log (when `logged`) is
    recorded in `logs` by its ssh's pid."""
    (machines, counts), default_out = remote
    launchers: list[Callable[[], subprocess.Popen[bytes]]] = []
    for machine, count in counts:
        for k in range(1, count + 1):

            def launch(machine: Machine = machine, k: int = k) -> subprocess.Popen[bytes]:
                where = machine.out or default_out
                if not logged:
                    return start_remote_worker(
                        machine, ssh=machines.ssh, remote=machines.remote, url=url,
                        crawl_id=crawl_id, out=where,
                    )  # fmt: skip
                log = _remote_log(out, machine, k)
                log.parent.mkdir(parents=True, exist_ok=True)
                with log.open("ab") as opened:
                    proc = start_remote_worker(
                        machine, ssh=machines.ssh, remote=machines.remote, url=url,
                        crawl_id=crawl_id, out=where, log=opened,
                    )  # fmt: skip
                logs[proc.pid] = log
                return proc

            launchers.append(launch)
    return launchers


def _remote_log(out: Path, machine: Machine, k: int) -> Path:
    """`DIR/logs/machine-<machine>-<k>.log`: the output of the k-th worker on `machine`."""
    return ClusterDir(out).machine_log(machine.name, k)


def _remote_started(remote: tuple[RemotePlan, str], out: Path) -> str:
    """The line saying where the remote workers were started."""
    (_, counts), default_out = remote
    each = ", ".join(f"{c} on {m.name} (outputs in {m.out or default_out}/)" for m, c in counts)
    return (
        f"{sum(c for _, c in counts)} workers over SSH: {each}; their diagnostics in "
        f"{ClusterDir(out).spawn_logs}/machine-<machine>-<k>.log"
    )


def _remote_ended_line(p: RemoteWorker, log: Path | None) -> str:
    """The one line said of a remote worker that ended: its own last line, or how its SSH
    session ended (255: the connection was lost or the worker killed: the machine lost)."""
    code = p.returncode if p.returncode is not None else 0
    last = _last_line(log) if log is not None else ""
    where = f"machine {p.machine.name}"
    if code == 0 and last:
        return f"{where}: {last}"
    return f"{where}: {_remote_name(p, on=False)}{': ' + last if last else ''}" + (
        f" (its log: {log})" if log is not None else ""
    )


def _remote_name(p: RemoteWorker, *, on: bool = True) -> str:
    """`the worker over SSH on MACHINE (ssh pid N) HOW` (`on`: with the machine's name)."""
    code = p.returncode if p.returncode is not None else 0
    how = (
        "was lost (its SSH session ended with 255: the connection dropped, or the worker "
        "was killed)"
        if code == 255
        else _how_ended(code)
    )
    where = f" on {p.machine.name}" if on else ""
    return f"the worker over SSH{where} (ssh pid {p.pid}) {how}"


def _local_statuses(
    client: RedisClient, record: CrawlRecord, pids: Sequence[int], *, since: float
) -> dict[int, WorkerStatus]:
    """The status records of this machine's workers of process ids `pids` started after
    `since` (a pid of an earlier run's worker may be reused): pid -> record; {} when Redis
    cannot tell (the lines that use it are best effort)."""
    machine = socket.gethostname()
    try:
        statuses = Membership(client, record.id, ttl=record.heartbeat_ttl).statuses()
    except Exception:
        return {}
    return {
        w.pid: w for w in statuses
        if w.machine == machine and w.pid in pids and w.started_at >= since - 1.0
    }  # fmt: skip


def _worker_name(pid: int, who: WorkerStatus | None) -> str:
    return f"worker {who.id} (pid {pid})" if who is not None else f"worker pid {pid}"


def _how_ended(code: int) -> str:
    """How a worker process ended, from its exit status (`Popen.returncode`)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited {code}"


def _last_line(log: Path) -> str:
    """The last line a worker wrote to its log, without the `gossamer: ` of human lines."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return last.removeprefix("gossamer: ")


def _ended_line(p: subprocess.Popen[bytes], who: WorkerStatus | None, log: Path) -> str:
    """The one line the progress display says of an attached worker that ended: its own
    last line (`worker w1: N pages; WHY`), or how it ended and where its log is."""
    code = p.returncode if p.returncode is not None else 0
    name = _worker_name(p.pid, who)
    last = _last_line(log)
    if code == 0 and last:
        return f"{last} (pid {p.pid})"
    pages = f" after {who.pages:,} pages" if who is not None and code < 0 else ""
    said = f": {last}" if last and code > 0 else ""
    return f"{name} {_how_ended(code)}{pages}{said} (its log: {log})"


def _attached_exit(
    client: RedisClient,
    url: str,
    record: CrawlRecord,
    procs: Sequence[subprocess.Popen[bytes]],
    *,
    since: float,
    codes: Sequence[int],
) -> int:
    """The exit status of `crawl --redis --workers N` once its workers have ended: the
    crawl's outcome's. Finished, or stopped (by `gossamer stop`): 0, also when a worker died
    or failed on the way (its hosts were taken over by the other workers; a stopped crawl
    queues its URLs again when resumed): one line says which. Still running (every local
    worker gone, the crawl not over): the first non-zero status of the workers (a signal
    N: 128 + N), else 0."""
    first = next((c if c >= 0 else 128 - c for c in codes if c != 0), Exit.OK)
    try:
        state = load_crawl(client, record.id).state
    except Exception:  # Redis gone: the workers' statuses are all there is to tell
        return first
    if state == "running":
        return first
    failed = [p for p, c in zip(procs, codes, strict=True) if c != 0]
    if failed:
        who = _local_statuses(client, record, [p.pid for p in failed], since=since)
        names = [
            _remote_name(p)
            if isinstance(p, RemoteWorker)
            else f"{_worker_name(p.pid, who.get(p.pid))} "
            f"{_how_ended(p.returncode if p.returncode is not None else 0)}"
            for p in failed
        ]
        listed = ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]
        if state == "finished":
            whose = "its hosts were" if len(failed) == 1 else "their hosts were"
            tail = f"{whose} taken over by the other workers"
        else:
            whose = "its" if len(failed) == 1 else "their"
            tail = (f"{whose} unfinished URLs are queued again when the crawl is resumed "
                    f"(`{resume_command(url, record.id)}`)")  # fmt: skip
        _log.warning(
            f"crawl {record.id} {state}; {listed}; {tail}",
            extra={"crawl_id": record.id, "workers": [p.pid for p in failed]},
        )
    return Exit.OK


#: how long the workers' parent waits for the graph consumer's last statistics
FOLLOWER_END_S: Final = 300.0


def start_graph_follower(url: str, record: CrawlRecord, out: Path) -> subprocess.Popen[bytes]:
    """`gossamer graph follow` for this crawl, its state (journal, stats.json) in
    `out/graph/<crawl id>/`, its summary line in `out/graph/follow.log`."""
    cluster = ClusterDir(out)
    state = cluster.graph_state
    state.mkdir(parents=True, exist_ok=True)
    command = gossamer_command(
        "graph", "follow", "--crawl", record.id, "--state", str(state), redis=url
    )
    # in its own session: a terminal's ^C is for the workers; it is told (_end_follower).
    # Started with SIGINT/SIGTERM held (the mask is inherited): a SIGTERM sent while it is
    # still starting (a small crawl that ended at once, a loaded machine) waits for its
    # handler (`follow_main` unblocks them), which writes the final statistics
    with hold_stop_signals():
        return start(command, log=cluster.follow_log, new_session=True)


def _end_follower(follower: subprocess.Popen[bytes], out: Path) -> None:
    """The workers are gone: the consumer reads what the stream holds, writes its final
    statistics and exits (its SIGTERM: `graph follow`). A crawl that finished ends it by
    itself; a stopped one (^C) is resumed later and a consumer started again then replays
    its journal."""
    if follower.poll() is None:
        follower.send_signal(signal.SIGTERM)
    try:
        code = follower.wait(timeout=FOLLOWER_END_S)
    except subprocess.TimeoutExpired:
        follower.kill()
        code = follower.wait()
    if code != 0:
        _log.warning(
            f"the crawl's graph consumer exited with {code} (see {ClusterDir(out).follow_log})"
        )


def _attached_alive(p: subprocess.Popen[bytes]) -> bool:
    return p.poll() is None


def _watch(
    client: RedisClient,
    record: CrawlRecord,
    procs: Sequence[subprocess.Popen[bytes]],
    progress: IO[str] | None,
    stopped: Sequence[int] = (),
    *,
    started: str | None = None,
    ended: Callable[[subprocess.Popen[bytes]], str] | None = None,
) -> None:
    """Wait for the workers, showing the crawl's progress (engine.progress) and saying at
    once (within 0.1 s) what a stop in `stopped` (the signal handler's list) waits for.
    On the display: `started`, once; `ended(p)` of each worker as it is seen to end."""
    display = None
    if progress is not None:
        max_pages = record.settings.get("max_pages")
        display = ProgressDisplay(
            progress,
            max_pages=max_pages if isinstance(max_pages, int) else None,
            fields={"crawl": record.id},
        )
    reporter = WorkersProgress(
        display, stopped, grace_s=STOP_GRACE_S, kept="their URLs stay queued in Redis"
    )
    said: set[int] = set()  # the workers whose end was said

    def say_ends() -> None:
        if display is None and ended is not None:  # no display: a lost machine said at once
            for p in procs:
                if isinstance(p, RemoteWorker) and p.pid not in said and p.poll() not in (None, 0):
                    said.add(p.pid)
                    _log.warning(ended(p), extra={"machine": p.machine.name})
        if display is None or ended is None:
            return
        for p in procs:
            if p.pid not in said and p.poll() is not None:
                said.add(p.pid)
                display.note("worker", ended(p), pid=p.pid, exit=p.returncode)

    frontier = None
    try:
        if display is not None and started is not None:
            display.note("workers", started, pids=[p.pid for p in procs])
        while any(p.poll() is None for p in procs):
            deadline = time.monotonic() + reporter.interval
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
                reporter.say_stops()
            say_ends()
            if display is None or not any(p.poll() is None for p in procs):
                continue
            try:
                if frontier is None:
                    frontier = open_frontier(client, record.id, record.worker_settings(Path(".")))
                st = frontier.statistics()
            except Exception:  # progress is best effort; the workers report their own errors
                continue
            reporter.show(st, workers=sum(1 for p in procs if p.poll() is None))
        say_ends()
    finally:
        reporter.close()
        if frontier is not None:
            frontier.close()


def spawn_detached(
    client: RedisClient, url: str, crawl_id: str, out: Path, n: int, machine: str | None = None
) -> list[int]:
    """Start n `gossamer worker` processes in their own sessions (they outlive this
    command), record their pids in Redis under this machine's name; their pids."""
    machine = machine or socket.gethostname()
    pids = []
    key = Keys(crawl_id).spawned(machine)
    for _ in range(n):
        proc = _start_worker(url, crawl_id, out.absolute(), logged=True, new_session=True)
        # waited for in a thread: no zombie when this process lives on (the dashboard), and
        # none of Popen's "still running" warnings when it drops the object
        threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
        pids.append(proc.pid)
        client.hset(key, str(proc.pid), json.dumps({"started": time.time(), "out": str(out)}))
    return pids


# ---------------------------------------------------------------------------- status


def crawl_status(client: RedisClient, record: CrawlRecord) -> dict[str, Any]:
    """Everything `gossamer status` shows, as JSON-able data."""
    membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
    workers = membership.statuses()
    now = server_time(client)
    stats: FrontierStats | None = None
    try:
        frontier = open_frontier(client, record.id, record.worker_settings(Path(".")))
        try:
            stats = frontier.statistics()
        finally:
            frontier.close()
    except Exception as exc:  # the rest is still worth showing
        frontier_error: str | None = str(exc)
    else:
        frontier_error = None
    live = [w for w in workers if w.state not in ("dead", "stopped")]
    end = record.ended if record.ended is not None else now
    elapsed = max(end - record.created, 1e-9)
    fr: dict[str, Any] | None = None
    if stats is not None:
        fr = {
            "queued": stats.queued,
            "leased": stats.leased,
            "done": stats.done,
            "failed": stats.failed,
            "retries": stats.retries,
            "hosts": stats.hosts,
            "ready_hosts": stats.ready_hosts,
            "leased_hosts": stats.leased_hosts,
            "dead_hosts": stats.dead_hosts,
            "published": stats.published,
            "duplicates_seen": stats.duplicates_seen,
            "seen_false_positives": stats.seen_false_positives,
        }
    return {
        "crawl": {
            "id": record.id,
            "state": record.state,
            "partition": record.partition,
            "seeds": list(record.seeds),
            "created": record.created,
            "ended": record.ended,
            "max_pages": record.settings.get("max_pages"),
            "heartbeat_ttl": record.heartbeat_ttl,
        },
        "frontier": fr,
        "frontier_error": frontier_error,
        "totals": {
            "workers": len(live),
            "pages": sum(w.pages for w in workers),
            "pages_per_s": round(sum(w.pages_per_s for w in live), 1),
            "pages_per_s_since_start": round((stats.done if stats else 0) / elapsed, 1),
            "elapsed_s": round(elapsed, 1),
        },
        "workers": [
            {
                **{k: getattr(w, k) for k in w.__dataclass_fields__},
                "hosts": list(w.hosts),
                "beat_age_s": round(max(0.0, now - w.last_beat), 1) if w.last_beat else None,
            }
            for w in workers
        ],
        "machines": machine_totals(live),
        "server_time": now,
        "graph": _graph_stats(client, record.id),
    }


def machine_totals(live: list[WorkerStatus]) -> list[dict[str, Any]]:
    """The live workers' resources summed per machine (free disk: the least any of its
    workers sees — they may write to different disks), machines by name."""
    out: dict[str, dict[str, Any]] = {}
    for w in live:
        m = out.setdefault(
            w.machine,
            {"machine": w.machine, "workers": 0, "cpu_percent": 0.0, "rss_bytes": 0,
             "disk_free_bytes": None, "bytes_in_per_s": 0.0, "bytes_out_per_s": 0.0,
             "disk_low": 0},
        )  # fmt: skip
        m["workers"] += 1
        m["cpu_percent"] = round(m["cpu_percent"] + w.cpu_percent, 1)
        m["rss_bytes"] += w.rss_bytes
        if w.disk_free_bytes is not None:
            free = m["disk_free_bytes"]
            least = w.disk_free_bytes if free is None else min(free, w.disk_free_bytes)
            m["disk_free_bytes"] = least
        m["bytes_in_per_s"] = round(m["bytes_in_per_s"] + w.bytes_in_per_s, 1)
        m["bytes_out_per_s"] = round(m["bytes_out_per_s"] + w.bytes_out_per_s, 1)
        m["disk_low"] += int(w.disk_low)
    return [out[k] for k in sorted(out)]


def human_bytes(n: float | None) -> str:
    """1.5 kB, 12.3 MB, 4.0 GB (powers of 1000: what df -H says); '-' for None."""
    if n is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


def _graph_stats(client: RedisClient, crawl_id: str) -> dict[str, Any] | None:
    """The live graph's statistics as `gossamer graph follow` last published them (None:
    no consumer has)."""
    raw = client.get(Keys(crawl_id).graph_stats)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def status_main(url: str, crawl_id: str | None, *, as_json: bool = False) -> int:
    def status(client: RedisClient) -> int:
        record = load_crawl(client, crawl_id)
        if record.state == "stopping" and settle_stopped(client, record):  # its workers died
            record = load_crawl(client, record.id)
        data = crawl_status(client, record)
        print(json.dumps(data, indent=2) if as_json else format_status(data))
        return Exit.OK

    return with_client(url, status, answer_within=CONTROL_READ_TIMEOUT)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def format_status(data: dict[str, Any]) -> str:
    """The human form of `crawl_status`."""
    c, fr, tot = data["crawl"], data["frontier"], data["totals"]
    now = data["server_time"]
    part = dict(c["partition"])
    name = part.pop("name", CLUSTER_DEFAULTS.partition)
    if "weights" in part:  # sized: (shard, size) pairs, too many to show
        part["weights"] = f"<{len(part['weights'])} shards>"
    opts = " ".join(f"{k}={v}" for k, v in part.items())
    lines = [
        f"crawl {c['id']}  {c['state']}  partition {name}{' ' + opts if opts else ''}  "
        f"created {_ago(now - c['created'])} ago  heartbeat TTL {c['heartbeat_ttl']:g}s",
    ]
    if fr is not None:
        limit = c["max_pages"]
        used = f"{fr['published']:,} done or being fetched"  # what max_pages counts
        budget = f"  max pages {limit:,} ({used})" if limit else ""
        lines.append(
            f"frontier  queued {fr['queued']:,}  leased {fr['leased']:,} "
            f"({fr['leased_hosts']:,} hosts)  done {fr['done']:,}  failed {fr['failed']:,}  "
            f"hosts {fr['hosts']:,} (ready {fr['ready_hosts']:,}, dead {fr['dead_hosts']:,})"
            f"{budget}"
        )
        if fr["seen_false_positives"]:
            lines.append(
                f"seen-set  Bloom: ~{fr['seen_false_positives']:,.1f} new URLs taken as seen "
                "so far (expected; never fetched)"
            )
    else:
        lines.append(f"frontier  unavailable: {data['frontier_error']}")
    if data.get("graph"):
        from ..report.crawl import graph_stats_line

        lines.append(f"graph     {graph_stats_line(data['graph'])}")
    lines.append(
        f"rate      {tot['pages_per_s']:,.1f} pages/s now, "
        f"{tot['pages_per_s_since_start']:,.1f} pages/s since start "
        f"({tot['workers']} live workers)"
    )
    workers = data["workers"]
    if not workers:
        lines.append("no workers yet")
        return "\n".join(lines)
    head = (
        "WORKER", "MACHINE", "PID", "STATE", "PAGES", "ERRORS", "PAGES/S", "CPU", "RSS",
        "DISK FREE", "IN/S", "OUT/S", "BEAT", "HOSTS",
    )  # fmt: skip
    rows = [head]
    for w in workers:
        hosts = w["hosts"]
        shown = ", ".join(hosts[:3]) + (f" (+{len(hosts) - 3})" if len(hosts) > 3 else "")
        age = w["beat_age_s"]
        live = w["state"] not in ("dead", "stopped")
        free = human_bytes(w.get("disk_free_bytes"))
        rows.append(
            (
                w["id"],
                w["machine"],
                str(w["pid"]),
                w["state"],
                f"{w['pages']:,}",
                f"{w['errors']:,}",
                f"{w['pages_per_s']:,.1f}" if live else "-",
                f"{w.get('cpu_percent', 0.0):.0f}%" if live else "-",
                human_bytes(w.get("rss_bytes", 0)) if live else "-",
                free + (" LOW" if w.get("disk_low") else ""),
                human_bytes(w.get("bytes_in_per_s", 0.0)) if live else "-",
                human_bytes(w.get("bytes_out_per_s", 0.0)) if live else "-",
                _ago(age) if age is not None else "-",
                shown,
            )
        )
    lines.extend(_table(rows))
    machines = data.get("machines") or []
    if machines:
        mrows = [("MACHINE", "WORKERS", "CPU", "RSS", "DISK FREE", "IN/S", "OUT/S")]
        mrows += [
            (
                m["machine"],
                str(m["workers"]),
                f"{m['cpu_percent']:.0f}%",
                human_bytes(m["rss_bytes"]),
                human_bytes(m["disk_free_bytes"])
                + (f" LOW ({m['disk_low']} stopped)" if m["disk_low"] else ""),
                human_bytes(m["bytes_in_per_s"]),
                human_bytes(m["bytes_out_per_s"]),
            )
            for m in machines
        ]
        lines.extend(_table(mrows, last_free=False))
    return "\n".join(line.rstrip() for line in lines)


def _table(rows: Sequence[tuple[str, ...]], *, last_free: bool = True) -> list[str]:
    """Rows as aligned columns (the last one left as long as it is when `last_free`)."""
    n = len(rows[0]) - (1 if last_free else 0)
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    return [
        "  ".join(v.ljust(widths[i]) for i, v in enumerate(r[:n]))
        + ("  " + r[-1] if last_free else "")
        for r in rows
    ]


# ---------------------------------------------------------------------------- stop


def stop_main(url: str, crawl_id: str | None, *, wait: float | None = None) -> int:
    """Set the crawl stopping (workers finish their batches and exit); with `wait`, wait
    that many seconds at most for every worker to be gone (else Exit.TEMPFAIL)."""

    def stop(client: RedisClient) -> int:
        record = load_crawl(client, crawl_id)
        if record.state in ("stopped", "finished"):
            _log.info(f"crawl {record.id} is {record.state} already", extra={"crawl_id": record.id})
            return Exit.OK
        state = request_stop(client, record) if record.state == "running" else record.state
        _log.info(f"crawl {record.id}: {state}", extra={"crawl_id": record.id})
        if wait is None or state != "stopping":
            return Exit.OK
        deadline = time.monotonic() + wait
        membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
        while time.monotonic() < deadline:
            if not membership.members():
                settle_stopped(client, record)
                _log.info(f"crawl {record.id}: stopped", extra={"crawl_id": record.id})
                return Exit.OK
            time.sleep(0.2)
        _log.warning(
            f"crawl {record.id}: workers still running after {wait:g}s",
            extra={"crawl_id": record.id},
        )
        return Exit.TEMPFAIL

    return with_client(url, stop, answer_within=CONTROL_READ_TIMEOUT)


# ---------------------------------------------------------------------------- scale


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as gone
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def scale_workers(
    client: RedisClient,
    url: str,
    record: CrawlRecord,
    target: int,
    out: Path,
    *,
    machine: str | None = None,
) -> dict[str, Any]:
    """Start or stop local workers so that `target` run on this machine: the live workers
    of this machine not already asked to stop, plus detached ones started but not yet
    registered. Stopping asks the newest workers to leave (they finish their batches);
    workers still starting are sent SIGTERM. What it did."""
    machine = machine or socket.gethostname()
    membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
    asked = membership.stop_requested()
    here = [
        w
        for w in membership.statuses()
        if w.machine == machine and w.state not in ("dead", "stopped", "stopping")
        and w.id not in asked
    ]  # fmt: skip
    key = Keys(record.id).spawned(machine)
    spawned = {int(text(p)) for p in cast(dict[Any, Any], client.hgetall(key))}
    registered_pids = {w.pid for w in membership.statuses() if w.machine == machine}
    gone = [p for p in spawned if not _alive(p)]
    if gone:
        client.hdel(key, *map(str, gone))
    pending = sorted(p for p in spawned if p not in registered_pids and p not in gone)
    current = len(here) + len(pending)
    result: dict[str, Any] = {"machine": machine, "before": current, "target": target,
                              "started": [], "stopping": [], "terminated": []}  # fmt: skip
    if target > current:
        result["started"] = spawn_detached(client, url, record.id, out, target - current, machine)
    elif target < current:
        excess = current - target
        for pid in pending[-excess:]:  # not registered yet: nothing to finish
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            result["terminated"].append(pid)
        excess -= len(result["terminated"])
        if excess > 0:
            newest = sorted(here, key=_worker_number, reverse=True)[:excess]
            membership.ask_to_stop([w.id for w in newest])
            result["stopping"] = [w.id for w in newest]
    return result


def _on_line(w: WorkerStatus, probe: Probe, shared_name: bool, default_out: str) -> bool:
    """Whether worker `w` runs on the machine of `probe`: its machine name is the one the
    machine answers with; when several lines answer with one name (one host, several
    output directories), its output directory is the line's too."""
    if w.machine != probe.hostname:
        return False
    if not shared_name:
        return True
    out = (probe.machine.out or default_out).rstrip("/")
    parent = os.path.dirname(w.out.rstrip("/"))
    return parent == out or parent.endswith("/" + out.lstrip("./"))


def scale_machines(
    client: RedisClient, url: str, record: CrawlRecord, target: int, machines: Machines,
    default_out: str,
) -> tuple[list[str], list[str]]:  # fmt: skip
    """`workers --scale N --machines FILE` (or a crawl's own machine list: the dashboard's
    slider too): `target` workers across the machines (spread as `crawl --machines` does):
    on each machine, detached workers started over SSH (`start_detached_remote`) or its
    newest workers asked to leave. A machine that cannot be reached (or runs another
    version) keeps its workers. (What was done, one line a machine; the problems, one line
    a machine that could not take part.) ValueError: `target` cannot be spread (fewer than
    the list's workers=N)."""
    probes = probe_all(machines.machines, machines.ssh, machines.remote)
    usable = [p for p in probes if p.problem is None]
    problems = [p.problem for p in probes if p.problem is not None]
    if not usable:
        return [], problems
    counts = spread(target, usable)
    membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
    asked = membership.stop_requested()
    live = [
        w for w in membership.statuses()
        if w.state not in ("dead", "stopped", "stopping") and w.id not in asked
    ]  # fmt: skip
    names = [p.hostname for p in usable]
    said = []
    for p, want in zip(usable, counts, strict=True):
        shared = names.count(p.hostname) > 1
        here = [w for w in live if _on_line(w, p, shared, default_out)]
        line = f"machine {p.machine.name}: {len(here)} -> {want} workers"
        if want > len(here):
            failed = start_detached_workers(
                machines, p.machine, want - len(here), url, record.id, default_out
            )
            line += f"; {failed}" if failed else f"; started {want - len(here)}"
        elif want < len(here):
            newest = sorted(here, key=_worker_number, reverse=True)[: len(here) - want]
            membership.ask_to_stop([w.id for w in newest])
            line += f"; asked {', '.join(w.id for w in newest)} to stop"
        else:
            line += "; nothing to do"
        said.append(line)
    return said, problems


def _worker_number(w: WorkerStatus) -> int:
    try:
        return int(w.id.lstrip("w"))
    except ValueError:
        return -1


def workers_main(
    url: str,
    crawl_id: str | None,
    target: int,
    *,
    out: Path = Path("gossamer-worker"),
    machines: Machines | None = None,
) -> int:
    """`gossamer workers --scale N --redis URL`: `target` workers on this machine
    (`scale_workers`), or with `machines` across them (`scale_machines`; no machines in it:
    the crawl's own machine list, when it has one)."""
    if target < 0:
        return report_failure(ValueError(f"--scale must be >= 0, not {target}"))

    def scale(client: RedisClient) -> int:
        record = load_crawl(client, crawl_id)
        if record.state != "running":
            return report_failure(CrawlRecordError(f"crawl {record.id} is {record.state}"))
        try:
            own = machines.for_crawl(record) if machines is not None else None
        except ValueError as exc:  # a stored list this gossamer cannot read
            return report_failure(exc)
        if own is None:  # local workers
            _report_scale(record, target, scale_workers(client, url, record, target, out))
            return Exit.OK
        try:
            lines, problems = scale_machines(client, url, record, target, own, str(out))
        except ValueError as exc:
            return report_failure(exc)
        for problem in problems:
            _log.error(problem, extra={"crawl_id": record.id})
        if not lines:
            _log.error(f"crawl {record.id}: no machine of the list can take workers: "
                       "nothing scaled", extra={"crawl_id": record.id})  # fmt: skip
            return Exit.UNAVAILABLE
        if own is machines:  # a list given: the crawl's machine list from now on
            store_machines(client, record.id, machine_list(own.machines))
        for line in lines:
            _log.info(f"crawl {record.id} on {line}", extra={"crawl_id": record.id})
        return Exit.OK

    return with_client(url, scale, answer_within=CONTROL_READ_TIMEOUT)


def _report_scale(record: CrawlRecord, target: int, r: dict[str, Any]) -> None:
    _log.info(
        scale_message(record, target, r),
        extra={"crawl_id": record.id, "machine": r["machine"], "workers": target},
    )


def scale_message(record: CrawlRecord, target: int, r: dict[str, Any]) -> str:
    """What `scale_workers` did (its result `r`), in words (`gossamer workers`, the
    dashboard)."""
    parts = []
    if r["started"]:
        parts.append(f"started {len(r['started'])} (pids {', '.join(map(str, r['started']))})")
    if r["stopping"]:
        parts.append(f"asked {', '.join(r['stopping'])} to stop")
    if r["terminated"]:
        parts.append(f"terminated starting pids {', '.join(map(str, r['terminated']))}")
    return f"crawl {record.id} on {r['machine']}: {r['before']} -> {target} workers" + (
        f"; {'; '.join(parts)}" if parts else "; nothing to do"
    )

"""The pool parent's wait for its workers: it returns when they exit and never spins."""

from __future__ import annotations

import io
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from pathlib import Path

from gossamer.crawldir import HEARTBEATS as HEARTBEAT_DIR
from gossamer.engine.heartbeat import (
    BeatPages,
    beat_path,
    forget_beat,
    write_beat,
)
from gossamer.frontier import SqliteFrontier
from gossamer.report.progress import ProgressDisplay, WorkersProgress
from gossamer.runner.pool import _watch


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _watch_cpu(tmp_path: Path, progress: io.StringIO | None) -> tuple[float, float]:
    """(wall, CPU of this process) while `_watch` waits for a worker that lives 1 s."""
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_sleep, args=(1.0,))
    with SqliteFrontier(tmp_path / "frontier.sqlite") as frontier:
        proc.start()
        wall, cpu = time.monotonic(), time.process_time()
        display = None if progress is None else ProgressDisplay(progress, terminal=False)
        _watch([proc], frontier, WorkersProgress(display, [], grace_s=3.0, interval=0.05))
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    assert proc.exitcode == 0
    return wall, cpu


def test_quiet_wait_blocks_instead_of_spinning(tmp_path: Path) -> None:
    # without progress to show, an earlier version polled with a zero time-out once the
    # first interval had passed: a core spent for the rest of the crawl
    wall, cpu = _watch_cpu(tmp_path, None)
    assert 0.8 < wall < 3.0
    assert cpu < 0.2, f"the parent used {cpu:.2f} s of CPU waiting {wall:.2f} s"


def test_progress_lines_while_waiting(tmp_path: Path) -> None:
    out = io.StringIO()
    wall, cpu = _watch_cpu(tmp_path, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) >= 5 and all(r["event"] == "progress" for r in lines)
    # each line has its time (ISO 8601 UTC) and the time since the start
    assert all(r["ts"].endswith("Z") and "T" in r["ts"] for r in lines)
    assert [r["elapsed_s"] for r in lines] == sorted(r["elapsed_s"] for r in lines)
    assert {"crawl_pages", "pages_per_s", "queued", "active_hosts", "failed", "workers"} <= set(
        lines[0]
    )
    assert cpu < 0.5, f"the parent used {cpu:.2f} s of CPU waiting {wall:.2f} s"


def _fail_soon() -> None:
    time.sleep(0.2)
    raise SystemExit(74)  # outputs cannot be written


def test_a_failed_worker_stops_the_others(tmp_path: Path) -> None:
    # a worker that failed (a full disk) left leases the others would wait out (the lease
    # TTL, 120 s): the parent asks them to stop instead
    ctx = multiprocessing.get_context("fork")
    long = ctx.Process(target=_sleep, args=(30.0,))
    failing = ctx.Process(target=_fail_soon)
    with SqliteFrontier(tmp_path / "frontier.sqlite") as frontier:
        long.start()
        failing.start()
        wall = time.monotonic()
        _watch([long, failing], frontier, WorkersProgress(None, [], grace_s=3.0))
        wall = time.monotonic() - wall
    assert failing.exitcode == 74
    assert long.exitcode == -15  # SIGTERM (a real worker completes its batches and exits)
    assert wall < 5.0


def _stopped_soon() -> None:
    time.sleep(0.2)
    raise SystemExit(143)  # stopped by the SIGTERM the parent forwarded


def test_a_worker_already_asked_to_stop_is_not_signalled_again(tmp_path: Path) -> None:
    # both workers were sent the user's SIGTERM; the first to exit (143) made the parent send
    # the other a second one, which could land while it wrote its outputs
    ctx = multiprocessing.get_context("fork")
    slow = ctx.Process(target=_sleep, args=(1.0,))
    quick = ctx.Process(target=_stopped_soon)
    with SqliteFrontier(tmp_path / "frontier.sqlite") as frontier:
        slow.start()
        quick.start()
        assert slow.pid is not None and quick.pid is not None
        quiet = WorkersProgress(None, [], grace_s=3.0)
        _watch([slow, quick], frontier, quiet, asked={slow.pid, quick.pid})
    assert quick.exitcode == 143
    assert slow.exitcode == 0  # not signalled again (the default action would end it: -15)


def test_the_reporter_says_a_stop_once_and_the_same_signal_again() -> None:
    """What the parent of worker processes (a pool's, `crawl --redis`'s) says of the stops
    its handler received: the first, and the same signal again; another signal after the
    first says nothing new."""
    for signals, said in (
        ([signal.SIGINT], ["SIGINT"]),
        ([signal.SIGINT, signal.SIGINT, signal.SIGINT], ["SIGINT", "SIGINT"]),
        ([signal.SIGTERM, signal.SIGINT], ["SIGTERM"]),
    ):
        out = io.StringIO()
        stopped: list[int] = []
        reporter = WorkersProgress(
            ProgressDisplay(out, terminal=False), stopped, grace_s=3.0, kept="in Redis"
        )
        for signum in signals:
            stopped.append(signum)
            reporter.say_stops()
        reporter.say_stops()
        notes = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [n["signal"] for n in notes] == said
        assert all(n["event"] == "stopping" for n in notes)
        assert "in Redis" in notes[-1]["message"] and "workers" in notes[0]["message"]


def test_a_retired_workers_exit_is_no_failure_and_a_wake_byte_rescales(tmp_path: Path) -> None:
    # a worker a scale-down asked to stop exits 143 like a stopped one: the parent must not
    # take it for a failure (which stopped every other worker: the crawl would end)
    ctx = multiprocessing.get_context("fork")
    slow = ctx.Process(target=_sleep, args=(1.0,))
    retired = ctx.Process(target=_stopped_soon)
    read_w, write_w = os.pipe()
    calls: list[int] = []
    exits: list[str | None] = []
    procs = [slow, retired]

    def on_control() -> None:  # the pool grows: a new worker joins the wait
        calls.append(len(procs))
        grown = ctx.Process(target=_sleep, args=(0.3,), name="w2")
        grown.start()
        procs.append(grown)

    with SqliteFrontier(tmp_path / "frontier.sqlite") as frontier:
        slow.start()
        retired.start()
        assert retired.pid is not None
        os.write(write_w, b"s")  # SIGUSR1's handler's byte
        try:
            _watch(procs, frontier, WorkersProgress(None, [], grace_s=3.0), asked={retired.pid},
                   wakeup=read_w, retired={retired.pid}, on_control=on_control,
                   on_exit=lambda p: exits.append(p.name))  # fmt: skip
        finally:
            os.close(read_w)
            os.close(write_w)
    assert retired.exitcode == 143
    assert slow.exitcode == 0  # not asked to stop: the retired worker's exit was no failure
    assert calls == [2] and procs[2].exitcode == 0  # the grown worker was waited for too
    assert sorted(n or "" for n in exits) == sorted([slow.name, retired.name, "w2"])


def test_a_worker_that_is_not_retired_and_exits_143_still_stops_the_others(
    tmp_path: Path,
) -> None:
    ctx = multiprocessing.get_context("fork")
    long = ctx.Process(target=_sleep, args=(30.0,))
    stopped = ctx.Process(target=_stopped_soon)
    with SqliteFrontier(tmp_path / "frontier.sqlite") as frontier:
        long.start()
        stopped.start()
        wall = time.monotonic()
        _watch([long, stopped], frontier, WorkersProgress(None, [], grace_s=3.0), retired=set())
        wall = time.monotonic() - wall
    assert long.exitcode == -15 and wall < 5.0


def test_the_pages_of_the_workers_beats_are_summed_retired_ones_kept(tmp_path: Path) -> None:
    """A pool's parent shows the pages its workers say they fetched (each counted as it is
    fetched); a worker retired by a scale-down keeps its pages once its beat is removed."""
    beats = tmp_path / HEARTBEAT_DIR
    beats.mkdir()
    pages = BeatPages(tmp_path)
    assert pages() == 0
    write_beat(beat_path(tmp_path, "w0"), {"id": "w0", "pages": 5})
    write_beat(beat_path(tmp_path, "w1"), {"id": "w1", "pages": 2})
    (beats / ".w2.json.tmp").write_text('{"id": "w2", "pages": 99}')  # being written
    assert pages() == 7
    forget_beat(tmp_path, "w1")
    write_beat(beat_path(tmp_path, "w0"), {"id": "w0", "pages": 6})
    assert pages() == 8


def _exit_now() -> None:
    pass


def test_a_worker_that_exited_before_the_wait_is_noticed_at_once(tmp_path: Path) -> None:
    # a worker reaped by any read of its `exitcode` (the loop's own count of the live ones,
    # the progress line's) is left out of the wait: its exit used to be noticed at the next
    # wake-up only, and without progress to show that was the last worker's exit. A retired
    # worker's row then stayed in the dashboard until the crawl ended.
    ctx = multiprocessing.get_context("fork")
    slow = ctx.Process(target=_sleep, args=(5.0,), name="slow")
    quick = ctx.Process(target=_exit_now, name="quick")
    noticed: dict[str, bool] = {}

    def on_exit(p: multiprocessing.process.BaseProcess) -> None:
        noticed[p.name] = slow.exitcode is None  # was the slow one still running?

    with SqliteFrontier(tmp_path / "frontier.sqlite") as frontier:
        slow.start()
        quick.start()
        multiprocessing.connection.wait([quick.sentinel])  # exited, not reaped yet
        _watch([slow, quick], frontier, WorkersProgress(None, [], grace_s=3.0),
               on_exit=on_exit)  # fmt: skip
    assert noticed == {"quick": True, "slow": False}

"""`gossamer crawl --redis URL --workers N` (attached workers): a SIGINT/SIGTERM that arrives
while the workers are being spawned is held, then forwarded to every worker once; each worker
starts with the stop signals blocked (its `run_engine` takes them once its handlers are in
place). Fake workers (`python -c`) stand in for `gossamer worker`: no Redis needed."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gossamer.cluster import control
from gossamer.runner.spawn import Command

# Reports whether it started with SIGTERM blocked, then counts the SIGTERMs it gets until
# half a second after the first (a second one would arrive meanwhile).
FAKE_WORKER = """
import json, signal, sys, time
held = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
got = []
signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, signal.SIGTERM])
deadline = time.monotonic() + 10
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.5)
with open(sys.argv[1], "w") as f:
    json.dump({"held": held, "sigterms": len(got)}, f)
sys.exit(143 if got else 0)
"""


def test_a_stop_during_the_spawn_reaches_every_worker_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned: list[Path] = []

    def fake_command(url: str, crawl_id: str, out: Path, **_: Any) -> Command:
        if len(spawned) == 1:  # the first worker runs, the second is not spawned yet
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, then a SIGTERM: both held
            os.kill(os.getpid(), signal.SIGTERM)  # (before: KeyboardInterrupt here)
        report = out / f"worker-{len(spawned)}.json"
        spawned.append(report)
        return Command((sys.executable, "-c", FAKE_WORKER, str(report)))

    monkeypatch.setattr(control, "worker_command", fake_command)
    before = [signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)]
    record: Any = SimpleNamespace(id="c1", settings={})  # only these are read without progress
    code = control._run_attached(None, "redis://unused", record, tmp_path, 3, None)  # type: ignore[arg-type]
    assert code == 130  # the first signal was SIGINT
    reports = [json.loads(p.read_text()) for p in spawned]
    assert reports == [{"held": True, "sigterms": 1}] * 3
    # the handlers and the mask are as before
    assert [signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)] == before
    assert not {signal.SIGINT, signal.SIGTERM} & signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_a_stop_another_thread_takes_during_the_spawn_reaches_the_later_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the mask holds a stop on the spawning thread only: with another thread alive (a
    # library's, or pytest-xdist's), the kernel hands the process's signal to it and the
    # handler runs at once, while the spawn goes on; the workers started after it used to
    # be left crawling, never asked to stop
    spawned: list[Path] = []
    quiet = threading.Event()
    other = threading.Thread(target=quiet.wait, daemon=True)  # does not block the signals
    other.start()

    def fake_command(url: str, crawl_id: str, out: Path, **_: Any) -> Command:
        if len(spawned) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        report = out / f"worker-{len(spawned)}.json"
        spawned.append(report)
        return Command((sys.executable, "-c", FAKE_WORKER, str(report)))

    monkeypatch.setattr(control, "worker_command", fake_command)
    record: Any = SimpleNamespace(id="c1", settings={})
    try:
        code = control._run_attached(None, "redis://unused", record, tmp_path, 3, None)  # type: ignore[arg-type]
    finally:
        quiet.set()
        other.join()
    assert code == 143
    assert [json.loads(p.read_text())["sigterms"] for p in spawned] == [1, 1, 1]

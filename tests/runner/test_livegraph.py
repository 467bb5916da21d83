"""When the live graph's child refreshes (runner/livegraph.py): every interval while a core
is spare, within its CPU budget when none is; the final statistics always."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gossamer.graph import _follow
from gossamer.runner import livegraph


def _crawl_files(crawl: Path) -> None:
    (crawl / "graph").mkdir(parents=True)
    (crawl / "crawl.log.jsonl").write_text(
        "".join(
            json.dumps({"url": f"http://a.test/{i}", "status": 200, "depth": 1}) + "\n"
            for i in range(5)
        )
    )


class _Loop:
    """livegraph.run on a thread, its control a pipe; the refreshes it wrote counted."""

    def __init__(self, crawl: Path, monkeypatch: pytest.MonkeyPatch, *, idle: float) -> None:
        self.writes: list[bool] = []  # `final` of each write
        self.checks = 0  # budget checks (CPU time reads)
        real_write, real_cpu = _follow.write_once, livegraph._cpu_used

        def write(
            follower: Any, path: Path, *, final: bool, full: bool = True
        ) -> tuple[float, float]:
            took = real_write(follower, path, final=final, full=full)
            self.writes.append(final)  # (once written)
            return took

        def cpu() -> float:
            self.checks += 1
            return real_cpu()

        monkeypatch.setattr(_follow, "write_once", write)
        monkeypatch.setattr(livegraph, "_cpu_used", cpu)
        monkeypatch.setattr(livegraph._Machine, "idle_cores", lambda _self: idle)
        monkeypatch.setattr(livegraph, "_RECHECK_S", 0.01)
        r, w = os.pipe()
        self._control, self._w = os.fdopen(r, "rb"), w
        self.code: int | None = None
        self._thread = threading.Thread(
            target=self._run, args=(crawl,), daemon=True, name="livegraph-loop"
        )

    def _run(self, crawl: Path) -> None:
        self.code = livegraph.run(crawl, self._control, interval=0.01, cpu_share=1e-6)

    def __enter__(self) -> _Loop:
        self._thread.start()
        return self

    def end(self) -> int | None:
        os.write(self._w, livegraph.END)
        self._thread.join(timeout=60)
        assert not self._thread.is_alive()
        return self.code

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            os.close(self._w)  # end of file: the loop returns
            self._thread.join(timeout=60)
        else:
            os.close(self._w)
        self._control.close()


def _until(what: str, check: Any) -> None:
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


@pytest.fixture
def crawl(tmp_path: Path) -> Iterator[Path]:
    _crawl_files(tmp_path / "crawl")
    yield tmp_path / "crawl"


def test_no_core_spare_and_over_budget_no_refresh_but_the_final_one(
    crawl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _Loop(crawl, monkeypatch, idle=0.0) as loop:
        _until("20 budget checks", lambda: loop.checks >= 20)
        assert loop.writes == []  # every check found the budget spent
        assert loop.end() == 0
    assert loop.writes == [True]
    assert json.loads((crawl / "graph" / "stats.json").read_text())["nodes"] == 5


def test_a_spare_core_refreshes_every_interval(
    crawl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _Loop(crawl, monkeypatch, idle=1.0) as loop:
        _until("a refresh", lambda: loop.writes)
        assert loop.writes[0] is False
        stats = json.loads((crawl / "graph" / "stats.json").read_text())
        assert stats["final"] is False and stats["nodes"] == 5
        assert loop.end() == 0
    assert loop.writes[-1] is True


def test_the_crawls_end_of_file_ends_the_loop_without_a_final_write(
    crawl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _Loop(crawl, monkeypatch, idle=0.0) as loop:
        _until("a budget check", lambda: loop.checks >= 1)
    assert loop.code == 1 and loop.writes == []


def test_the_cpu_share_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(livegraph.CPU_ENV, raising=False)
    assert livegraph.cpu_share_from_env() == livegraph.CPU_SHARE
    monkeypatch.setenv(livegraph.CPU_ENV, "0.5")
    assert livegraph.cpu_share_from_env() == 0.5
    for bad in ("0", "-1", "lots"):
        monkeypatch.setenv(livegraph.CPU_ENV, bad)
        assert livegraph.cpu_share_from_env() == livegraph.CPU_SHARE


def test_the_child_entry_imports_no_numpy_until_a_refresh() -> None:
    import subprocess
    import sys

    code = "import sys, gossamer.runner.livegraph; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.split() == ["False"]


def test_the_budget_counts_the_cpu_of_the_crawls_processes() -> None:
    """The budget is a share of the crawl's CPU: its process's and its children's (a pool's
    workers), live or reaped, read from /proc."""
    me = os.getpid()
    before = livegraph._tree_cpu(me)
    assert before is not None
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    subprocess.run([sys.executable, "-c", burn], check=True, timeout=120)  # reaped: cutime
    after = livegraph._tree_cpu(me)
    assert after is not None and after - before >= 0.3
    assert livegraph._tree_cpu(2**22 + 1) is None  # no such process

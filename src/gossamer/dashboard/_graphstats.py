"""The web graph statistics of a crawl that does not run and kept no final live-graph figures
(docs/dashboard.md, "The web graph of an ended crawl"): computed on demand by `gossamer graph
stats DIR --json` — the same function, in a child process at low priority, so the dashboard's
event loop and memory are untouched — watched by one thread this object owns, and cached in
DIR/graph/stats-on-demand.json (`CrawlDir.graph_on_demand`) under the sizes and modification
times of their inputs (the crawl log and the graph's edge parts): a resumed crawl's are
computed again, an unchanged crawl's read back by the next dashboard.

`read()` never waits: it answers what is known now and starts the computation when needed."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

from ..crawldir import CrawlDir

__all__ = ["GraphOnDemand"]

#: the child's niceness: a crawl running beside the dashboard comes first
_NICE: Final = 10


def graph_inputs(directory: Path) -> list[list[Any]]:
    """What `graph stats DIR` reads, as [name, size, mtime_ns] rows: the crawl logs and the
    graph's edge parts (docs/graph.md, "Sources")."""
    crawl = CrawlDir(directory)
    paths = crawl.crawl_logs() + crawl.graph_edge_files()
    rows = []
    for p in paths:
        with contextlib.suppress(OSError):
            st = p.stat()
            rows.append([str(p.relative_to(directory)), st.st_size, st.st_mtime_ns])
    return rows


class GraphOnDemand:
    """The on-demand statistics of one crawl directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        # the last answer: (inputs, statistics or None, error or None)
        self._known: tuple[list[list[Any]], dict[str, Any] | None, str | None] | None = None

    @property
    def cache(self) -> Path:
        return CrawlDir(self.directory).graph_on_demand

    def read(self) -> tuple[str, dict[str, Any] | None, str | None]:
        """(state, statistics, error): `computed` with the statistics of the crawl's files as
        they are now, `computing` (started now, or still running), or `failed` with the
        command's error line."""
        inputs = graph_inputs(self.directory)
        with self._lock:
            known = self._known
            if known is None or known[0] != inputs:
                known = self._known = self._read_cache(inputs)
            if known is not None and known[0] == inputs:
                return ("computed", known[1], None) if known[2] is None else (
                    "failed", None, known[2])  # fmt: skip
            if self._closed:
                return "failed", None, "the dashboard is closing"
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._compute, args=(inputs,), name="graph-on-demand", daemon=True
                )
                self._thread.start()
            return "computing", None, None

    def _read_cache(
        self, inputs: list[list[Any]]
    ) -> tuple[list[list[Any]], dict[str, Any] | None, str | None] | None:
        try:
            cached = json.loads(self.cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(cached, dict) or cached.get("inputs") != inputs:
            return None
        stats = cached.get("statistics")
        return (inputs, stats, None) if isinstance(stats, dict) else None

    def _compute(self, inputs: list[list[Any]]) -> None:
        """The child `gossamer graph stats DIR --json`; its answer kept, and cached on disk
        (when the directory can be written: else in memory only)."""
        argv = [sys.executable, "-m", "gossamer", "graph", "stats",
                str(self.directory.absolute()), "--json"]  # fmt: skip
        started = time.monotonic()
        with self._lock:
            if self._closed:
                return
            try:
                proc = self._proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )  # fmt: skip
            except OSError as exc:
                self._known = (inputs, None, f"cannot run `gossamer graph stats`: {exc}")
                return
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, proc.pid, _NICE)
        out, err = proc.communicate()
        with self._lock:
            self._proc = None
            if self._closed:
                return
            stats: dict[str, Any] | None = None
            try:
                parsed = json.loads(out) if proc.returncode == 0 else None
                stats = parsed if isinstance(parsed, dict) else None
            except ValueError:
                pass
            if stats is None:
                lines = err.decode("utf-8", "replace").strip().splitlines()
                why = lines[-1].removeprefix("gossamer: error: ") if lines else ""
                self._known = (inputs, None, why or f"exit {proc.returncode}")
                return
            stats.update(
                final=True,
                computed=True,
                updated_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                compute_s=round(time.monotonic() - started, 2),
            )
            self._known = (inputs, stats, None)
            self._write_cache(inputs, stats)

    def _write_cache(self, inputs: list[list[Any]], stats: dict[str, Any]) -> None:
        tmp = self.cache.with_name(f".{self.cache.name}.{os.getpid()}.tmp")
        try:
            self.cache.parent.mkdir(exist_ok=True)
            tmp.write_text(json.dumps({"inputs": inputs, "statistics": stats}), "utf-8")
            tmp.replace(self.cache)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()

    def close(self) -> None:
        """Stop a computation under way (its child killed) and wait for the thread."""
        with self._lock:
            self._closed = True
            proc, thread = self._proc, self._thread
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()
        if thread is not None:
            thread.join(timeout=10)

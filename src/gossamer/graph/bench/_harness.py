"""GraphBench's harness: run one registered algorithm on one edge insertion sequence, `trials`
times, each trial in a forked child process so that a run past its timeout is stopped cleanly.

It measures the time from `make(n)` to the last `flush()` and the child's peak memory beyond
what it inherited, after a warm-up on a 2-vertex graph; a trial past `timeout` is SIGTERMed,
then SIGKILLed and joined, so no process is left behind, and no further trial runs. With
`validate`, the last trial's answer is compared with the scipy reference and a difference makes
the result `failed`. Algorithms are looked up at call time, so whatever is registered runs
(docs/graphbench.md, "How a run is measured")."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import math
import multiprocessing as mp
import resource
import statistics
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ._api import (
    Family,
    apsd_named,
    canonical,
    names,
    reference_components,
    reference_distances,
    scc_named,
)
from ._graphs import EdgeSequence

__all__ = ["SHOW_MAX_N", "RunResult", "Trial", "feed", "format_answer", "run", "run_all"]

Status = Literal["ok", "timeout", "failed", "error", "too big"]
SHOW_MAX_N = 30  # `--show` prints an n × n matrix: wider than a terminal beyond this
_KILL_GRACE = 1.0  # seconds between SIGTERM and SIGKILL


@dataclass(frozen=True, slots=True)
class Trial:
    """One trial: `seconds` to insert every edge (None if it did not finish), `memory` the
    peak resident bytes it added (None if unknown)."""

    seconds: float | None
    memory: int | None
    status: Literal["ok", "timeout", "error"]
    error: str = ""


@dataclass(slots=True)
class RunResult:
    """One algorithm on one graph: its trials and what they say."""

    family: Family
    algorithm: str
    graph: str
    n: int
    m: int
    status: Status = "ok"
    trials: list[Trial] = field(default_factory=list)
    validated: bool | None = None  # None: not asked for
    difference: str = ""  # what differs from the reference, when validation failed
    error: str = ""
    answer: npt.NDArray[Any] | None = None

    def _times(self) -> list[float]:
        return [t.seconds for t in self.trials if t.seconds is not None]

    @property
    def min(self) -> float | None:
        times = self._times()
        return min(times) if times else None

    @property
    def mean(self) -> float | None:
        times = self._times()
        return statistics.fmean(times) if times else None

    @property
    def stdev(self) -> float | None:
        times = self._times()
        return statistics.stdev(times) if len(times) > 1 else (0.0 if times else None)

    @property
    def memory(self) -> int | None:
        """The largest peak of the finished trials, bytes."""
        peaks = [t.memory for t in self.trials if t.memory is not None and t.status == "ok"]
        return max(peaks) if peaks else None

    def as_json(self) -> dict[str, Any]:
        return {
            "family": self.family, "algorithm": self.algorithm, "graph": self.graph,
            "n": self.n, "m": self.m, "status": self.status,
            "trials": [{"seconds": t.seconds, "memory": t.memory, "status": t.status}
                       for t in self.trials],
            "min": self.min, "mean": self.mean, "stdev": self.stdev, "memory": self.memory,
            "validated": self.validated, "difference": self.difference or None,
            "error": self.error or None,
        }  # fmt: skip


def _factory(family: Family, algorithm: str) -> tuple[Callable[[int], Any], bool, int | None]:
    info, make = (apsd_named if family == "apsd" else scc_named)(algorithm)
    return make, info.batch, info.max_n


def _status_kib(key: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def _trim_heap() -> None:
    """Give the heap's free pages back to the kernel (glibc's malloc_trim). Without it the
    child reuses the free, still resident heap it inherited from the parent, and allocations
    do not show in its resident set: algorithm1 on ausiello:1024 measured 2.5 MiB in a child
    of a fresh parent, 0.1 MiB after the parent had allocated and freed 18 MB arrays (glibc
    also raises its mmap threshold after such frees, so large arrays come from that heap)."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim this way
        pass


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_rss() -> int:
    """The resident-set high-water mark, bytes."""
    hwm = _status_kib("VmHWM")
    if hwm is not None:
        return hwm * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def feed(alg: Any, edges: list[tuple[int, int]], threshold: int) -> None:
    """Insert `edges` in order, `flush()` after every `threshold` of them (0: never) and at
    the end unless the last edge was just flushed, as SPAWC's gbench does with a batch
    threshold ("executed one last time" when the count is not a multiple of it)."""
    add, flush = alg.add_edge, alg.flush
    if threshold > 0:
        for i, (src, tgt) in enumerate(edges, 1):
            add(src, tgt)
            if i % threshold == 0:
                flush()
        if edges and len(edges) % threshold == 0:
            return
    else:
        for src, tgt in edges:
            add(src, tgt)
    flush()


def _warm_up(make: Callable[[int], Any], family: Family) -> None:
    """Run the algorithm once on a 2-vertex graph, so that its lazy imports and first-call
    allocations (5–7 MiB for a numpy algorithm at n = 8, measured) are not
    counted in the trial's time and memory."""
    alg = make(2)
    feed(alg, [(0, 1), (1, 0)], 0)
    alg.distances() if family == "apsd" else alg.components()
    del alg
    gc.collect()


def _child(
    conn: Connection, family: Family, algorithm: str, seq: EdgeSequence, threshold: int,
    send_answer: bool,
) -> None:  # fmt: skip
    """A trial, in the child: build, insert, flush, and send (seconds, memory, answer)."""
    try:
        make, batch, _ = _factory(family, algorithm)  # batch: only they get flush() midway
        _warm_up(make, family)
        _trim_heap()
        _reset_peak()
        baseline = _status_kib("VmRSS")
        base = baseline * 1024 if baseline is not None else _peak_rss()
        start = time.perf_counter()
        alg = make(seq.n)
        feed(alg, seq.edges, threshold if batch else 0)
        seconds = time.perf_counter() - start
        memory = max(0, _peak_rss() - base)
        answer = None
        if send_answer:
            answer = alg.distances() if family == "apsd" else alg.components()
            answer = np.asarray(answer)
        conn.send(("ok", seconds, memory, answer))
    except BaseException as exc:  # everything goes back to the parent, as one line
        where = traceback.extract_tb(exc.__traceback__)[-1:]
        at = f" (at {where[0].filename}:{where[0].lineno})" if where else ""
        conn.send(("error", None, None, f"{type(exc).__name__}: {exc}{at}"))
    finally:
        conn.close()


def _one_trial(
    family: Family, algorithm: str, seq: EdgeSequence, threshold: int, timeout: float,
    send_answer: bool,
) -> tuple[Trial, npt.NDArray[Any] | None]:  # fmt: skip
    ctx = mp.get_context("fork")
    parent_end, child_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child,
        args=(child_end, family, algorithm, seq, threshold, send_answer),
        name=f"graphbench-{algorithm}",
        daemon=True,
    )
    with warnings.catch_warnings():
        # Python ≥ 3.12 warns when a process with threads forks (a lock held by another
        # thread stays locked in the child); the child runs only the algorithm, numpy and
        # the pipe, none of which another thread of ours holds
        warnings.filterwarnings("ignore", r".*multi-threaded.*fork", DeprecationWarning)
        # the parent's objects go to the collector's permanent generation across the fork:
        # the child's gc.collect() (the warm-up's) then scans only its own objects, not every
        # object of the parent (numpy, scipy, matplotlib: 60-130 ms a trial, most of a small
        # trial's wall time, touching every inherited page)
        gc.freeze()
        try:
            proc.start()
        finally:
            gc.unfreeze()
    child_end.close()
    deadline = time.monotonic() + timeout
    try:
        message: tuple[str, float | None, int | None, Any] | None = None
        while message is None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if parent_end.poll(min(left, 0.5)):
                try:
                    message = parent_end.recv()
                except EOFError:  # the child died without a word (killed, out of memory)
                    proc.join(_KILL_GRACE)
                    return _died(proc), None
            elif not proc.is_alive() and not parent_end.poll(0):
                return _died(proc), None
        if message is None:
            return Trial(None, None, "timeout", f"stopped after {timeout:g} s"), None
        kind, seconds, memory, payload = message
        if kind == "error":
            return Trial(None, None, "error", str(payload)), None
        return Trial(seconds, memory, "ok"), payload
    finally:
        parent_end.close()
        _stop(proc)


def _died(proc: Any) -> Trial:
    return Trial(None, None, "error", f"the child died (exit {proc.exitcode})")


def _stop(proc: Any) -> None:
    """SIGTERM, a grace period, SIGKILL; always joined (no zombie, no orphan)."""
    if proc.is_alive():
        proc.terminate()
        proc.join(_KILL_GRACE)
    if proc.is_alive():
        proc.kill()
    proc.join()
    proc.close()


def difference(family: Family, seq: EdgeSequence, answer: npt.NDArray[Any]) -> str:
    """'' when `answer` equals the reference; else what differs (the first cells/vertices)."""
    if family == "apsd":
        want = reference_distances(seq.n, seq.edges)
        got = np.asarray(answer, dtype=np.float64)
        if got.shape != want.shape:
            return f"distances() is {got.shape}, expected {want.shape}"
        bad = np.argwhere(got != want)
        if not len(bad):
            return ""
        cells = ", ".join(
            f"d[{u},{v}] = {_num(got[u, v])} (reference {_num(want[u, v])})"
            for u, v in bad[:5].tolist()
        )
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        return f"{len(bad)} of {got.size} distances differ: {cells}{more}"
    want_labels = reference_components(seq.n, seq.edges)
    got_labels = np.asarray(answer)
    if got_labels.shape != want_labels.shape:
        return f"components() has shape {got_labels.shape}, expected {want_labels.shape}"
    got_labels = canonical(got_labels)
    if np.array_equal(got_labels, want_labels):
        return ""
    # a vertex is wrong when its component, as a set, is not the reference's
    wrong = []
    for v in range(seq.n):
        mine = set(np.flatnonzero(got_labels == got_labels[v]).tolist())
        theirs = set(np.flatnonzero(want_labels == want_labels[v]).tolist())
        if mine != theirs:
            wrong.append((v, mine, theirs))
    shown = "; ".join(
        f"vertex {v}: {_set(mine)} (reference {_set(theirs)})" for v, mine, theirs in wrong[:5]
    )
    more = f" and {len(wrong) - 5} more" if len(wrong) > 5 else ""
    return f"{len(wrong)} of {seq.n} vertices in a wrong component: {shown}{more}"


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:g}"


def _set(vertices: set[int]) -> str:
    shown = sorted(vertices)
    return "{" + ", ".join(map(str, shown[:8])) + (", …}" if len(shown) > 8 else "}")


def run(
    family: Family, algorithm: str, seq: EdgeSequence, *, trials: int = 3,
    timeout: float = 60.0, threshold: int = 1, validate: bool = False, keep_answer: bool = False,
) -> RunResult:  # fmt: skip
    """Run `algorithm` of `family` on `seq` (module docstring). KeyError for an unknown name;
    never raises for what the algorithm does (an exception in it is status `error`)."""
    if trials < 1 or timeout <= 0 or threshold < 1:
        raise ValueError("trials and threshold must be at least 1, timeout positive")
    _, _, max_n = _factory(family, algorithm)
    result = RunResult(family, algorithm, seq.name, seq.n, seq.m)
    if max_n is not None and seq.n > max_n:
        result.status = "too big"
        result.error = f"{algorithm} is meant for at most {max_n} vertices"
        return result
    answer = None
    for number in range(trials):
        last = number == trials - 1
        send = last and (validate or keep_answer)
        trial, got = _one_trial(family, algorithm, seq, threshold, timeout, send_answer=send)
        result.trials.append(trial)
        if trial.status != "ok":
            result.status = trial.status
            result.error = trial.error
            return result
        answer = got
    if validate and answer is not None:
        result.difference = difference(family, seq, answer)
        result.validated = not result.difference
        if result.difference:
            result.status = "failed"
    if keep_answer:
        result.answer = answer
    return result


def run_all(
    family: Family, algorithms: list[str], seq: EdgeSequence, **options: Any
) -> list[RunResult]:
    """`run` for each name (`all`: every registered algorithm of `family`, in order)."""
    chosen = names(family) if algorithms == ["all"] else algorithms
    for name in chosen:
        _factory(family, name)  # an unknown name fails before anything runs
    return [run(family, name, seq, **options) for name in chosen]


def format_answer(family: Family, answer: npt.NDArray[Any]) -> str:
    """The final distance matrix (`-` for unreachable) or the components, as SPAWC's Figure 6
    prints them."""
    if family == "apsd":
        n = answer.shape[0]
        cells = [[("-" if math.isinf(x) else _num(x)) for x in row] for row in answer.tolist()]
        width = max(2, len(str(n - 1)), *(len(c) for row in cells for c in row)) if n else 2
        header = " " * width + " " + " ".join(f"{v:>{width}}" for v in range(n))
        lines = [header] + [
            f"{u:>{width}} " + " ".join(f"{c:>{width}}" for c in row) for u, row in enumerate(cells)
        ]
        return "\n".join(lines)
    labels = canonical(answer)
    groups: dict[int, list[int]] = {}
    for v, label in enumerate(labels.tolist()):
        groups.setdefault(label, []).append(v)
    lines = [f"{len(groups)} strongly connected components:"]
    lines += [f"  {label}: {{{', '.join(map(str, vs))}}}" for label, vs in groups.items()]
    return "\n".join(lines)

"""GraphBench's harness with test-only algorithms (tests/graphbench_algorithms.py): trials,
timeouts that leave no process behind, validation catching a wrong answer, memory, batches."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

import graphbench_algorithms as algs
from gossamer.graph.bench import Family, names, register_apsd
from gossamer.graph.bench._graphs import EdgeSequence, graph_source
from gossamer.graph.bench._harness import difference, feed, format_answer, run, run_all

# graphs of every kind, small (n <= 60), with self-loops, repeats and isolated vertices
GRAPHS = [
    *(f"sparse:{n}:{2 * n}:seed={s}" for n, s in ((20, 1), (40, 2), (60, 3))),
    "dense:30:0.2:seed=4", "complete:12", "road:49", "web:60", "sanity:1", "sanity:2",
    "sanity:3",
]  # fmt: skip


def children() -> set[int]:
    """The pids of this process's children (/proc: every thread's children file)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return pids


@pytest.mark.parametrize("family", ["apsd", "scc"])
def test_a_correct_algorithm_passes_validation_on_every_kind(family: Family) -> None:
    for spec in GRAPHS:
        result = run(family, "test-reference", graph_source(spec), trials=1, validate=True)
        assert (result.status, result.validated, result.difference) == ("ok", True, ""), spec


def test_trials_give_min_mean_stdev_of_the_finished_ones() -> None:
    result = run("scc", "test-reference", graph_source("sanity:2"), trials=3)
    assert result.status == "ok" and len(result.trials) == 3
    times = [t.seconds or 0.0 for t in result.trials]
    assert all(t > 0 for t in times)
    assert result.min == min(times)
    assert result.mean is not None and min(times) <= result.mean <= max(times)
    assert result.stdev is not None and result.stdev >= 0
    assert result.validated is None  # not asked for


def test_a_broken_apsd_algorithm_is_caught_naming_the_cells() -> None:
    result = run("apsd", "test-broken", graph_source("sanity:2"), trials=1, validate=True)
    assert result.status == "failed" and result.validated is False
    # the last edge 7→3 merges the two cycles: from 4…7 the vertices 0…3 become reachable
    assert result.difference.startswith("16 of 64 distances differ: d[4,0] = inf (reference 4)")


def test_a_broken_scc_algorithm_is_caught_naming_the_vertices() -> None:
    result = run("scc", "test-broken", graph_source("sanity:2"), trials=1, validate=True)
    assert result.status == "failed"
    assert result.difference.startswith(
        "8 of 8 vertices in a wrong component: vertex 0: {0, 1, 2, 3} "
        "(reference {0, 1, 2, 3, 4, 5, 6, 7})"
    )


def test_component_labels_are_compared_as_partitions() -> None:
    seq = graph_source("sanity:1")
    # test-reference's labels are renumbered in reverse from 100: still the same partition
    assert run("scc", "test-reference", seq, trials=1, validate=True).validated is True
    assert difference("scc", seq, np.array([5, 5, 5, 9, 1, 1, 2, 3])) == ""
    wrong = difference("scc", seq, np.array([5, 5, 5, 5, 1, 1, 2, 3]))
    assert wrong.startswith("4 of 8 vertices in a wrong component: vertex 0: {0, 1, 2, 3}")
    assert "vertex 3: {0, 1, 2, 3} (reference {3})" in wrong
    assert difference("apsd", seq, np.zeros((3, 3))) == "distances() is (3, 3), expected (8, 8)"


def test_a_run_past_its_timeout_is_stopped_and_leaves_no_process() -> None:
    before = children()
    seq = graph_source("sparse:10:50")  # 50 edges × 0.2 s: 10 s, far past the timeout
    start = time.monotonic()
    result = run("apsd", "test-slow", seq, trials=3, timeout=0.5)
    took = time.monotonic() - start
    assert result.status == "timeout" and result.error == "stopped after 0.5 s"
    assert len(result.trials) == 1  # no second trial after a timeout
    assert result.min is None and result.mean is None
    assert took < 5  # SIGTERM obeyed: not the 10 s of the run
    assert children() <= before


def test_an_exception_in_the_algorithm_is_an_error_result() -> None:
    result = run("scc", "test-raises", graph_source("sanity:3"), trials=2, validate=True)
    assert result.status == "error" and len(result.trials) == 1
    assert result.error.startswith("RuntimeError: deliberately broken add_edge (at ")


def test_memory_is_the_peak_above_the_childs_start() -> None:
    seq = graph_source("sanity:3")
    hog = run("apsd", "test-hog", seq, trials=1).memory
    light = run("apsd", "test-reference", seq, trials=1).memory
    assert hog is not None and light is not None
    assert algs.HOG_BYTES * 0.9 < hog < algs.HOG_BYTES * 1.5, hog
    assert light < 16 * 2**20  # what the parent had before the fork does not count


def test_memory_counts_allocations_that_reuse_the_parents_freed_heap() -> None:
    # the parent allocates and frees large arrays: glibc raises its mmap threshold and keeps
    # the freed memory in its heap, which the forked child inherits (resident) and would reuse
    for _ in range(3):
        churn = np.ones((1500, 1500))
        del churn
    memory = run("apsd", "test-hog-pieces", graph_source("sanity:3"), trials=1).memory
    assert memory is not None and memory > 14 * 2**20, memory


def test_a_graph_above_max_n_is_not_run() -> None:
    result = run("scc", "test-small", graph_source("sanity:1"), trials=1)
    assert result.status == "too big" and not result.trials
    assert result.error == "test-small is meant for at most 4 vertices"
    assert run("scc", "test-small", graph_source("sanity:3"), trials=1).status == "ok"


class Recorder:
    def __init__(self) -> None:
        self.log: list[str] = []

    def add_edge(self, src: int, tgt: int) -> None:
        self.log.append("e")

    def flush(self) -> None:
        self.log.append("F")


@pytest.mark.parametrize(
    ("m", "threshold", "expected"),
    [
        (10, 4, "eeeeFeeeeFeeF"),  # every 4, and once more for the last 2
        (8, 4, "eeeeFeeeeF"),  # a multiple: no extra flush
        (3, 0, "eeeF"),  # a singular algorithm: once, at the end
        (0, 4, "F"),
    ],
)
def test_a_batch_algorithm_is_flushed_every_threshold_edges(
    m: int, threshold: int, expected: str
) -> None:
    recorder = Recorder()
    feed(recorder, [(0, 1)] * m, threshold)
    assert "".join(recorder.log) == expected


def test_a_batch_algorithm_validates_with_any_threshold() -> None:
    seq = graph_source("sparse:30:90:seed=7")
    for threshold in (1, 7, 90, 1000):
        result = run("apsd", "test-batch", seq, trials=1, threshold=threshold, validate=True)
        assert result.validated is True, threshold


def test_run_all_runs_every_registered_algorithm_and_refuses_unknown_names() -> None:
    with pytest.raises(KeyError, match="no apsd algorithm 'nope'"):
        run_all("apsd", ["test-reference", "nope"], graph_source("sanity:3"))
    results = run_all("apsd", ["all"], graph_source("sanity:3"), trials=1, timeout=0.5)
    ran = [r.algorithm for r in results]
    assert ran == names("apsd")  # every registered one, in order: the real ones and the tests'
    tests_own = [a for a in ran if a.startswith("test-")]
    assert tests_own[:3] == ["test-reference", "test-broken", "test-slow"]


def test_algorithms_registered_after_import_are_found_at_call_time() -> None:
    @register_apsd("test-late", "test only: registered inside a test")
    class Late(algs.Reference):
        pass

    assert run("apsd", "test-late", graph_source("sanity:3"), trials=1).status == "ok"


def test_format_answer_prints_the_matrix_and_the_components() -> None:
    seq = EdgeSequence(3, [(0, 1), (1, 0)], "two")
    apsd = run("apsd", "test-reference", seq, trials=1, keep_answer=True)
    assert apsd.answer is not None
    assert format_answer("apsd", apsd.answer).splitlines() == [
        "    0  1  2",
        " 0  0  1  -",
        " 1  1  0  -",
        " 2  -  -  0",
    ]
    scc = run("scc", "test-reference", seq, trials=1, keep_answer=True)
    assert scc.answer is not None
    assert format_answer("scc", scc.answer).splitlines() == [
        "2 strongly connected components:",
        "  0: {0, 1}",
        "  1: {2}",
    ]

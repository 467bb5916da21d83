"""Test-only GraphBench algorithms, registered when this module is first imported: the harness,
the CLI and `reproduce` are tested with them before (and independently of) the real ones.

- `test-reference`: records the edges and answers with the scipy reference (correct);
- `test-broken`: forgets the last edge inserted (wrong whenever that edge matters);
- `test-slow`: sleeps 0.2 s per edge (any graph of 20+ edges passes a 2 s timeout);
- `test-batch` (batch): works only in flush(), which the harness must call at the end;
- `test-raises`: raises in add_edge;
- `test-hog`: the reference, holding 64 MiB it has written to (the memory measurement's check);
- `test-hog-pieces`: the same with 16 MiB in 1 MiB arrays;
- `test-small`: the reference, registered with max_n = 4.
Names start with `test-` so that they never clash with the real algorithms' names.
"""

from __future__ import annotations

import time

import numpy as np

from gossamer.graph.bench import (
    reference_components,
    reference_distances,
    register_apsd,
    register_scc,
)

SLOW_SECONDS_PER_EDGE = 0.2


class _Recorder:
    def __init__(self, n: int) -> None:
        self.n = n
        self.edges: list[tuple[int, int]] = []
        self.flushes = 0

    def add_edge(self, src: int, tgt: int) -> None:
        self.edges.append((src, tgt))

    def flush(self) -> None:
        self.flushes += 1


class Reference(_Recorder):
    def distances(self):  # type: ignore[no-untyped-def]
        return reference_distances(self.n, self.edges)

    def components(self):  # type: ignore[no-untyped-def]
        # labels renumbered from 100 in reverse: the harness must compare partitions, not labels
        labels = reference_components(self.n, self.edges)
        return 100 + labels.max(initial=0) - labels


class Broken(Reference):
    def add_edge(self, src: int, tgt: int) -> None:
        super().add_edge(src, tgt)
        self.last = (src, tgt)

    def distances(self):  # type: ignore[no-untyped-def]
        return reference_distances(self.n, self.edges[:-1])

    def components(self):  # type: ignore[no-untyped-def]
        return reference_components(self.n, self.edges[:-1])


class Slow(Reference):
    def add_edge(self, src: int, tgt: int) -> None:
        time.sleep(SLOW_SECONDS_PER_EDGE)
        super().add_edge(src, tgt)


class Batch(Reference):
    """Holds edges back until flush(): correct only when the last flush comes after them."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.pending: list[tuple[int, int]] = []
        self.applied: list[tuple[int, int]] = []

    def add_edge(self, src: int, tgt: int) -> None:
        self.pending.append((src, tgt))

    def flush(self) -> None:
        self.flushes += 1
        self.applied += self.pending
        self.pending = []

    def distances(self):  # type: ignore[no-untyped-def]
        return reference_distances(self.n, self.applied)

    def components(self):  # type: ignore[no-untyped-def]
        return reference_components(self.n, self.applied)


class Raises(Reference):
    def add_edge(self, src: int, tgt: int) -> None:
        raise RuntimeError("deliberately broken add_edge")


HOG_BYTES = 64 * 2**20


class Hog(Reference):
    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.ballast = np.ones(HOG_BYTES, dtype=np.uint8)  # written: resident


class HogInPieces(Reference):
    """16 MiB in 1 MiB arrays: small enough to come from the heap once glibc has raised its
    mmap threshold (as it does after a process frees a large array)."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.pieces = [np.ones(2**20, dtype=np.uint8) for _ in range(16)]


for _register in (register_apsd, register_scc):
    _register("test-reference", "test only: the scipy reference")(Reference)
    _register("test-broken", "test only: forgets the last edge")(Broken)
    _register("test-slow", "test only: sleeps per edge")(Slow)
    _register("test-batch", "test only: works in flush()", batch=True)(Batch)
    _register("test-raises", "test only: raises in add_edge")(Raises)
    _register("test-hog", "test only: holds 64 MiB")(Hog)
    _register("test-hog-pieces", "test only: holds 16 MiB in 1 MiB arrays")(HogInPieces)
    _register("test-small", "test only: max_n 4", max_n=4)(Reference)

"""The online graph: SPAWC's UPDATE_GRAPH (section 2.5, Figure 4) with pending edges.

    graph = OnlineGraph()
    graph.update(page_url, link_urls)        # a page was crawled: its URL and the links on it
    graph.update_ids(page_id, link_ids)      # the same with ids (gossamer.sinks.graph.node_id)
    graph.nodes, graph.edges, graph.pending  # counts
    graph.csr()                              # scipy.sparse CSR adjacency of the crawled graph

A node is a crawled page; an edge enters the graph when both its ends are nodes, and waits as
a pending edge until then. `update` is idempotent (a page crawled again or an event replayed
adds only links not seen before) and leaves self-links out, as the graph files do, so a graph
built from events equals the one read from the files. Storage is numpy arrays, not a Python
object per edge (docs/graph.md, "The online graph")."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from ..sinks.graph import node_id
from ._load import adjacency

__all__ = ["OnlineGraph"]

_INT32_MAX = 2**31 - 1
# the pending arrays are rebuilt when more entries are resolved (dead) than waiting, and at
# least this many: rebuilding costs a sort of the live entries (~0.1 s per million)
COMPACT_MIN_DEAD = 1_000_000


class _Grow:
    """A growable 1-D numpy array (doubling capacity)."""

    __slots__ = ("a", "n")

    def __init__(self, dtype: Any, capacity: int = 1024) -> None:
        self.a: npt.NDArray[Any] = np.empty(capacity, dtype=dtype)
        self.n = 0

    def reserve(self, extra: int) -> None:
        need = self.n + extra
        if need > len(self.a):
            bigger = np.empty(max(need, 2 * len(self.a)), dtype=self.a.dtype)
            bigger[: self.n] = self.a[: self.n]
            self.a = bigger

    def push(self, value: int) -> None:
        self.reserve(1)
        self.a[self.n] = value
        self.n += 1

    def extend(self, values: npt.NDArray[Any] | list[int] | int, count: int) -> None:
        self.reserve(count)
        self.a[self.n : self.n + count] = values
        self.n += count

    def view(self) -> npt.NDArray[Any]:
        return self.a[: self.n]

    def replace(self, values: npt.NDArray[Any]) -> None:
        """Hold exactly `values` (capacity: them and 1024 more)."""
        self.a = np.empty(len(values) + 1024, dtype=self.a.dtype)
        self.a[: len(values)] = values
        self.n = len(values)


class OnlineGraph:
    """The crawled graph, built page by page (see the module docstring)."""

    def __init__(self) -> None:
        self._slot: dict[int, int] = {}  # URL id -> slot (every id seen)
        self._slot_node = _Grow(np.int32)  # slot -> node index, -1 while not crawled
        self._slot_head = _Grow(np.int32)  # slot -> first pending entry targeting it, -1
        self._node_ids = _Grow(np.int64)  # node index -> URL id
        self._src = _Grow(np.int32)  # edges: node indices
        self._dst = _Grow(np.int32)
        self._psrc = _Grow(np.int32)  # pending entries: source node index
        self._ptarget = _Grow(np.int32)  # target slot
        self._pnext = _Grow(np.int32)  # next entry with the same target, -1
        self._pending_live = 0  # entries whose target is not crawled yet
        self._dirty = False  # a page was updated twice: duplicates possible until _dedupe

    # ------------------------------------------------------------------ updating
    def update(self, page: str, links: Iterable[str]) -> None:
        """Page `page` (a URL) was crawled and links to `links` (URLs)."""
        self.update_ids(node_id(page), [node_id(u) for u in links])

    def update_ids(self, page_id: int, link_ids: Iterable[int]) -> None:
        """Page `page_id` was crawled and links to `link_ids` (ids as `node_id` gives them,
        any signed 64-bit int; a larger one raises OverflowError)."""
        slot = self._slot_of(page_id)
        node = int(self._slot_node.a[slot])
        if node >= 0:
            self._dirty = True  # crawled before: its links may repeat (deduped lazily)
        else:
            node = self._node_ids.n
            if node >= _INT32_MAX:
                raise OverflowError("OnlineGraph holds at most 2**31 - 1 nodes")
            self._node_ids.push(page_id)
            self._slot_node.a[slot] = node
            self._resolve(slot, node)
        targets = [self._slot_of(t) for t in dict.fromkeys(link_ids) if t != page_id]
        if not targets:
            return
        tslots = np.array(targets, dtype=np.int32)
        tnodes = self._slot_node.a[tslots]
        crawled = tnodes >= 0
        direct = tnodes[crawled]
        if len(direct):
            self._src.extend(node, len(direct))
            self._dst.extend(direct, len(direct))
        waiting = tslots[~crawled]
        if len(waiting):
            self._add_pending(node, waiting)

    def _slot_of(self, uid: int) -> int:
        slot = self._slot.get(uid)
        if slot is None:
            slot = self._slot[uid] = len(self._slot)
            self._slot_node.push(-1)
            self._slot_head.push(-1)
        return slot

    def _add_pending(self, src_node: int, waiting: npt.NDArray[np.int32]) -> None:
        """Put src_node → each of `waiting` (slots) at the head of each slot's list."""
        k = len(waiting)
        first = self._psrc.n
        entries = np.arange(first, first + k, dtype=np.int32)
        self._psrc.extend(src_node, k)
        self._ptarget.extend(waiting, k)
        self._pnext.extend(self._slot_head.a[waiting], k)
        self._slot_head.a[waiting] = entries
        self._pending_live += k

    def _resolve(self, slot: int, node: int) -> None:
        """The page of `slot` is now node `node`: its waiting links become edges."""
        entry = int(self._slot_head.a[slot])
        if entry < 0:
            return
        sources: list[int] = []
        psrc, pnext = self._psrc.a, self._pnext.a
        while entry >= 0:
            sources.append(int(psrc[entry]))
            entry = int(pnext[entry])
        self._slot_head.a[slot] = -1
        self._src.extend(np.array(sources, dtype=np.int32), len(sources))
        self._dst.extend(node, len(sources))
        self._pending_live -= len(sources)
        dead = self._psrc.n - self._pending_live
        if dead > COMPACT_MIN_DEAD and dead > self._pending_live:
            self._compact_pending()

    # ------------------------------------------------------------------ compaction
    def _dedupe(self) -> None:
        """Drop repeated edges and pending entries (after a page was crawled twice)."""
        if not self._dirty:
            return
        src, dst = self._src.view(), self._dst.view()
        keys = np.unique((src.astype(np.int64) << 32) | dst.astype(np.int64))
        self._src.replace((keys >> 32).astype(np.int32))
        self._dst.replace((keys & 0xFFFFFFFF).astype(np.int32))
        self._compact_pending()
        self._dirty = False

    def _compact_pending(self) -> None:
        """Rebuild the pending lists from their live, distinct entries."""
        psrc, ptarget = self._psrc.view(), self._ptarget.view()
        live = self._slot_node.a[ptarget] < 0
        keys = np.unique((ptarget[live].astype(np.int64) << 32) | psrc[live].astype(np.int64))
        targets = (keys >> 32).astype(np.int32)  # sorted by target slot
        sources = (keys & 0xFFFFFFFF).astype(np.int32)
        k = len(keys)
        nxt = np.arange(1, k + 1, dtype=np.int32)
        if k:
            last_of_target = np.append(targets[1:] != targets[:-1], True)
            nxt[last_of_target] = -1
        heads = self._slot_head.view()
        heads[:] = -1
        if k:
            first_of_target = np.insert(targets[1:] != targets[:-1], 0, True)
            heads[targets[first_of_target]] = np.flatnonzero(first_of_target).astype(np.int32)
        self._psrc.replace(sources)
        self._ptarget.replace(targets)
        self._pnext.replace(nxt)
        self._pending_live = k

    # ------------------------------------------------------------------ reading
    @property
    def nodes(self) -> int:
        """Crawled pages."""
        return self._node_ids.n

    @property
    def edges(self) -> int:
        """Distinct edges between crawled pages."""
        self._dedupe()
        return self._src.n

    @property
    def pending(self) -> int:
        """Distinct links from crawled pages to pages not crawled (yet)."""
        self._dedupe()
        return self._pending_live

    def node_ids(self) -> npt.NDArray[np.int64]:
        """The URL id of each node, by node index (a copy)."""
        return self._node_ids.view().copy()

    def edge_arrays(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """(sources, targets) node indices of the distinct edges (copies)."""
        self._dedupe()
        return self._src.view().copy(), self._dst.view().copy()

    def csr(self) -> sp.csr_array:
        """The adjacency of the crawled graph: n × n, a 1 at (u, v) for each edge u → v."""
        self._dedupe()
        n = self.nodes
        src, dst = self._src.view(), self._dst.view()
        return adjacency(n, src, dst)

    def memory_bytes(self) -> int:
        """Bytes held: the arrays' capacity plus the id dict (its table, and an int object
        for each key and value: an estimate, as CPython shares small ints)."""
        arrays = (
            self._slot_node, self._slot_head, self._node_ids, self._src, self._dst,
            self._psrc, self._ptarget, self._pnext,
        )  # fmt: skip
        total = sum(g.a.nbytes for g in arrays)
        int_size = sys.getsizeof(2**62)  # a 64-bit id: 36 bytes on CPython 3.11+
        return total + sys.getsizeof(self._slot) + len(self._slot) * (int_size + 32)

"""Processing turns: which fetched page of which host a worker parses and records next.

A worker keeps many hosts in flight on one event loop, each with one request on its
connection. When the worker is CPU-bound, the order in which fetched pages are processed
decides which hosts move: first come, first served gives every active host the same share,
so the host with the most URLs left (on a web of Pareto-sized sites, one site can hold a sixth
of all pages) moves at 1/64th of the worker's speed while smaller sites finish, and the crawl
ends with one connection crawling alone for a long tail.

`Turns` hands out one processing turn at a time, ordered by arrival time minus a head start
that grows with the host's backlog (`per_url` seconds per queued URL, at most `max_lead`). The
largest sites then go first, their next request is already on the wire (the batch loop looks
one page ahead), and nothing waits more than `max_lead` behind a later arrival. A holder calls
`release()` when done; the next turn is granted on the next loop iteration, so network events
are handled between two turns.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable


class Turns:
    def __init__(
        self,
        *,
        per_url: float = 0.001,
        max_lead: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_url = per_url
        self.max_lead = max_lead
        self.clock = clock
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = 0
        self._busy = False

    @property
    def waiting(self) -> int:
        return len(self._heap)

    async def acquire(self, backlog: int) -> None:
        """Wait for a turn; a host with `backlog` URLs left gets a head start."""
        if not self._busy and not self._heap:
            self._busy = True
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        key = self.clock() - min(backlog * self.per_url, self.max_lead)
        heapq.heappush(self._heap, (key, self._seq, fut))
        self._seq += 1
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted, but the holder was cancelled before it ran
            raise

    def release(self) -> None:
        """End the current turn. The next one is granted on the next loop iteration (after
        the loop has polled for network events), and pages that arrive meanwhile wait their
        turn in order: without this, every page whose response arrived in one poll would be
        processed back to back, first come first served, before the loop looks at the
        network again."""
        asyncio.get_running_loop().call_soon(self._grant)

    def _grant(self) -> None:
        heap = self._heap
        while heap:
            fut = heapq.heappop(heap)[2]
            if not fut.done():  # a cancelled waiter's future is done
                fut.set_result(None)
                return
        self._busy = False

"""Processing turns: which fetched page of which host a worker parses and records next.

When a worker is CPU-bound, first come first served would give every active host the same
share, so the host with the most URLs left would finish last, alone on one connection. `Turns`
hands out turns in rounds of a few pages, ordered by arrival time minus a head start that grows
with the host's backlog (`per_url` seconds per queued URL, at most `max_lead`): the largest
sites go first, and no page waits more than `max_lead` behind a later arrival. A holder calls
`release()` when done; the next round is granted on the next loop iteration, so network events
are handled between two rounds."""

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
        per_round: int = 4,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_round < 1:
            raise ValueError("per_round must be >= 1")
        self.per_url = per_url
        self.max_lead = max_lead
        self.per_round = per_round
        self.clock = clock
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = 0
        self._holders = 0  # turns granted and not yet released
        self._scheduled = False  # a round is due on the next loop iteration

    @property
    def waiting(self) -> int:
        return len(self._heap)

    async def acquire(self, backlog: int) -> None:
        """Wait for a turn; a host with `backlog` URLs left gets a head start."""
        if not self._holders and not self._scheduled and not self._heap:
            self._holders = 1
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
        """End a turn. When the round's last turn ends, the next round (the `per_round` most
        urgent waiters) is granted on the next loop iteration, after the loop has polled for
        network events; pages that arrive meanwhile wait in order. Without this, every page
        whose response arrived in one poll would be processed back to back, first come first
        served, before the loop looked at the network again. A round of a few pages rather
        than one spreads the cost of a poll over several pages."""
        self._holders -= 1
        if not self._holders and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._grant)

    def _grant(self) -> None:
        self._scheduled = False
        heap = self._heap
        granted = 0
        while heap and granted < self.per_round:
            fut = heapq.heappop(heap)[2]
            if not fut.done():  # a cancelled waiter's future is done
                fut.set_result(None)
                granted += 1
        self._holders = granted

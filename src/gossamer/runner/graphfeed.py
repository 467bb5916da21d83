"""One graph consumer for an embedded crawl: its page events (engine/events.py), from the
crawl's one worker or from every worker of a `--workers N` pool, applied to one graph in the
crawl's process (`run_crawl(settings, feed=GraphFeed(graph))`).

`GraphFeed` registers a sink (`graph-feed`) that delivers a worker's events at each flush,
before the frontier counts the batch done: applied at once on the event loop with one worker;
encoded and sent as one SOCK_SEQPACKET message a batch by a pool's worker, read by the parent
while it waits for its workers. A message is sent whole or not at all, so a SIGKILLed worker
loses no batch it flushed. A resumed crawl feeds the pages of its run only
(docs/graph.md, "From Python: `LiveGraph` fed by a `GraphFeed`")."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Final

from ..engine.events import GraphApplier, GraphLike, PageEvent, decode_events, encode_events
from ..engine.sink_registry import PageSink, SinkContext, register_sink, unregister_sink

__all__ = ["FEED_SINK", "GraphFeed"]

FEED_SINK: Final = "graph-feed"
_MESSAGE_MAX: Final = 1 << 20  # bytes of one message (the socket's buffers are set above it)
_BUFFER: Final = 4 << 20


class GraphFeed:
    """Page events of an embedded crawl applied to `graph` (see the module docstring). A
    context manager: the sink is registered while it is entered."""

    def __init__(self, graph: GraphLike) -> None:
        self.applier = GraphApplier(graph)
        self.events = 0  # events received (replays and re-fetches included)
        self._owner = os.getpid()
        self._recv, self._send = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for sock in (self._recv, self._send):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _BUFFER)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _BUFFER)
        self._recv.setblocking(False)
        self._buffer = bytearray(_MESSAGE_MAX)

    def __enter__(self) -> GraphFeed:
        register_sink(FEED_SINK, self._sink)
        return self

    def __exit__(self, *exc: object) -> None:
        unregister_sink(FEED_SINK)
        self.drain()
        self._recv.close()
        self._send.close()

    def _sink(self, _ctx: SinkContext) -> PageSink:
        return _FeedSink(self)

    def fileno(self) -> int:
        """The socket the pool's workers send to: readable when events wait (`drain`)."""
        return self._recv.fileno()

    def deliver(self, events: Sequence[PageEvent]) -> None:
        """A worker's batch: applied here in the feed's process, sent to it from another."""
        if os.getpid() == self._owner:
            self.events += len(events)
            self.applier.apply_all(events)
            return
        self._send_batch(events)

    def _send_batch(self, events: Sequence[PageEvent]) -> None:
        blob = encode_events(events)
        if len(blob) > _MESSAGE_MAX and len(events) > 1:
            half = len(events) // 2
            self._send_batch(events[:half])
            self._send_batch(events[half:])
            return
        # one record, whole or not at all (EMSGSIZE above the buffer); blocking: a parent
        # reading slowly holds the worker
        self._send.send(blob)

    def drain(self) -> int:
        """Apply every batch waiting on the socket (the pool's workers'); how many events."""
        n = 0
        view = memoryview(self._buffer)
        while True:
            try:
                size = self._recv.recv_into(view)
            except BlockingIOError:
                return n
            events = decode_events(bytes(view[:size]))
            n += len(events)
            self.events += len(events)
            self.applier.apply_all(events)


class _FeedSink(PageSink):
    """A worker's end of the feed: its events, delivered at each flush."""

    def __init__(self, feed: GraphFeed) -> None:
        self.feed = feed
        self.events: list[PageEvent] = []

    def page(self, event: PageEvent) -> None:
        self.events.append(event)

    def flush(self) -> None:
        if self.events:
            events, self.events = self.events, []
            self.feed.deliver(events)

    def close(self) -> None:
        self.flush()

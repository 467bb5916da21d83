"""The crawl's page events on a Redis Stream, and the graph consumer that reads them.

`StreamSink` (each cluster worker registers it) sends the events of each frontier flush on the
worker's ordered Redis I/O thread before the batch's completion, so a page the frontier counts
done has its event in the stream. `follow` (`gossamer graph follow`) is one consumer per crawl
in the consumer group `graph`: it journals the events it applied before acknowledging their
entries, trims what it acknowledged, and on a restart replays its journal, then takes over the
entries delivered but never acknowledged. Through `GraphApplier` no edge is lost and none is
counted twice (docs/cluster.md, "The page events stream")."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import redis.exceptions

from ..crawldir import GRAPH_STATS, JOURNAL
from ..engine.events import GraphApplier, GraphLike, PageEvent, decode_events, encode_events
from ..engine.sink_registry import PageSink, SinkContext
from ..exitcodes import Exit
from ..frontier import FrontierUnreachable
from ..runner.livegraph import interval_from_env
from ._redis import Keys, Patience, RedisClient, retrying

__all__ = [
    "ENTRY_EVENTS",
    "GROUP",
    "STREAM_MAXLEN",
    "FollowResult",
    "StreamSink",
    "follow",
    "follow_main",
    "read_journal",
]

_log = logging.getLogger(__name__)

GROUP: Final = "graph"
#: events per stream entry: a host batch's flush is a few pages; ~400 B a page compressed
ENTRY_EVENTS: Final = 256
#: entries the stream keeps at most (MAXLEN ~): ~20 MB of entries of a few pages each when
#: no consumer reads; a consumer lagging further loses the oldest (it says so)
STREAM_MAXLEN: Final = 50_000
_FIELD: Final = b"e"
_LENGTH: Final = struct.Struct(">I")


class StreamSink(PageSink):
    """Sends a cluster worker's page events to the crawl's stream (see the module docstring).
    `submit` runs a call on the worker's Redis I/O thread (in order with the frontier's);
    the error of a send, if any, is raised by the next `flush` or by `close`."""

    def __init__(
        self,
        client: RedisClient,
        keys: Keys,
        worker: str,
        submit: Callable[[Callable[[], None]], Future[None]],
        patience: Patience | None = None,
    ) -> None:
        self.client = client
        self.key = keys.events
        self.worker = worker
        self.submit = submit
        self.patience = patience
        self.events: list[PageEvent] = []
        self._sent: Future[None] | None = None

    @classmethod
    def factory(
        cls,
        client: RedisClient,
        keys: Keys,
        worker: str,
        io: Executor,
        patience: Patience | None = None,
    ) -> Callable[[SinkContext], StreamSink]:
        """The sink factory to register for the crawl of `keys` (`register_sink`)."""
        return lambda _ctx: cls(client, keys, worker, lambda call: io.submit(call), patience)

    def page(self, event: PageEvent) -> None:
        self.events.append(event)

    def flush(self) -> None:
        self._raise_failed()
        if not self.events:
            return
        events, self.events = self.events, []
        self._sent = self.submit(lambda: self._send(events))

    def _send(self, events: list[PageEvent]) -> None:
        # encoded here, on the I/O thread: the event loop (the worker's busiest thread) only
        # hands the list over
        blobs = [
            encode_events(events[i : i + ENTRY_EVENTS], worker=self.worker)
            for i in range(0, len(events), ENTRY_EVENTS)
        ]

        def xadd() -> None:
            pipe = self.client.pipeline(transaction=False)
            for blob in blobs:
                pipe.xadd(self.key, {_FIELD: blob}, maxlen=STREAM_MAXLEN, approximate=True)
            pipe.execute()

        try:  # through outages, as the frontier's calls
            retrying(xadd, what="events", patience=self.patience)
        except FrontierUnreachable:
            raise  # (given up on Redis: its pages are fetched again, and sent again)
        except Exception as exc:  # (the last send's error has no flush left to raise it)
            _log.error(f"cannot send page events to {self.key}: {exc}")
            raise

    def _raise_failed(self) -> None:
        sent = self._sent
        if sent is not None and sent.done():
            self._sent = None
            # raises the send's error; not a send given up with Redis while the worker stops
            # (the outcomes of those pages are not recorded either: they are fetched again)
            with contextlib.suppress(FrontierUnreachable):
                sent.result()

    def close(self) -> None:
        """Send what is gathered. Not waited for here, on the event loop: the I/O thread
        runs it before the frontier's close, which the engine awaits in a thread."""
        self.flush()


# ---------------------------------------------------------------------------- the consumer
@dataclass(frozen=True, slots=True)
class FollowResult:
    """What a `follow` run did: entries read (claimed ones included), events in them, events
    applied (pages new to the graph), events replayed from the journal at start, and the
    crawl's state when it returned."""

    entries: int
    events: int
    applied: int
    replayed: int
    state: str


def _journal_records(path: Path) -> Iterator[bytes]:
    """The whole records of a journal (a torn last one, cut by a kill, is left out)."""
    if not path.exists():
        return
    data = path.read_bytes()
    at = 0
    while at + _LENGTH.size <= len(data):
        (n,) = _LENGTH.unpack_from(data, at)
        if at + _LENGTH.size + n > len(data):
            break
        yield data[at + _LENGTH.size : at + _LENGTH.size + n]
        at += _LENGTH.size + n


def read_journal(state: Path) -> list[PageEvent]:
    """The events a consumer with state directory `state` has applied, in order."""
    return [e for blob in _journal_records(state / JOURNAL) for e in decode_events(blob)]


class _Journal:
    """Append-only: each applied batch as one length-prefixed blob, written and fsynced before
    its entries are acknowledged (a kill leaves at most a torn last record, cut on reopening;
    a power loss loses no acknowledged batch). One fsync a batch of up to `count` entries:
    milliseconds, a few times a second, on the consumer only."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        good = sum(_LENGTH.size + len(r) for r in _journal_records(path))
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if os.fstat(self.fd).st_size != good:
            os.ftruncate(self.fd, good)

    def append(self, events: Sequence[PageEvent]) -> None:
        blob = encode_events(events)
        data = memoryview(_LENGTH.pack(len(blob)) + blob)
        while data:
            data = data[os.write(self.fd, data) :]
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def ensure_group(client: RedisClient, keys: Keys) -> None:
    """Create the consumer group (from the stream's start; the stream too) unless it exists."""
    try:
        client.xgroup_create(keys.events, GROUP, id="0", mkstream=True)
    except redis.exceptions.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def _crawl_state(client: RedisClient, keys: Keys) -> str:
    state = client.hget(keys.meta, "state")
    return state.decode() if isinstance(state, bytes) else str(state or "")


def follow(
    client: RedisClient,
    crawl: str,
    graph: GraphLike,
    state: Path,
    *,
    consumer: str = "graph",
    count: int = 64,
    block_ms: int = 500,
    until_ended: bool = True,
    on_batch: Callable[[GraphApplier], None] | None = None,
    stop: threading.Event | None = None,
) -> FollowResult:
    """Apply the page events of crawl `crawl` to `graph` until the crawl has ended
    (`finished` or `stopped`) and every event is applied (with `until_ended` False: until
    the stream has nothing more now; once `stop` is set: the same, within `block_ms`).
    `state`: the consumer's directory (its journal); `consumer`: its name in the group.
    `on_batch(applier)` runs after each batch (the place for periodic statistics)."""
    keys = Keys(crawl)
    ensure_group(client, keys)
    journal_path = state / JOURNAL
    applier = GraphApplier(graph)
    replayed = applier.apply_all(read_journal(state))
    journal = _Journal(journal_path)
    entries = events = applied = 0

    def take(batch: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        nonlocal entries, events, applied
        if not batch:
            return
        new: list[PageEvent] = []
        for _, fields in batch:
            blob = fields.get(_FIELD)
            if blob is None:  # (an entry trimmed away while pending: XAUTOCLAIM gives none)
                continue
            for event in decode_events(blob):
                events += 1
                if applier.apply(event):
                    new.append(event)
        entries += len(batch)
        applied += len(new)
        if new:
            journal.append(new)  # before the acknowledgement: a kill now replays the entries
        ids = [entry_id for entry_id, _ in batch]
        client.xack(keys.events, GROUP, *ids)
        _trim(client, keys, ids[-1])
        if on_batch is not None:
            on_batch(applier)

    try:
        # entries delivered to a consumer that died before acknowledging them (this one's
        # previous run, or another name's): taken over first
        start = "0-0"
        while True:
            claimed: Any = client.xautoclaim(
                keys.events, GROUP, consumer, 0, start_id=start, count=count
            )
            start = _text(claimed[0])
            take([(i, f) for i, f in claimed[1] if f is not None])
            if start == "0-0":
                break
        ended_seen = False
        while True:
            if stop is not None and stop.is_set():
                until_ended = False  # drain what the stream holds now, then return
            if until_ended and not ended_seen:
                # read before the last poll: once ended, every event is in the stream
                ended_seen = _crawl_state(client, keys) in ("finished", "stopped")
            block = block_ms if until_ended and not ended_seen else None
            reply: Any = client.xreadgroup(
                GROUP, consumer, {keys.events: ">"}, count=count, block=block
            )
            batch = reply[0][1] if reply else []
            take(batch)
            if not batch and (ended_seen or not until_ended):
                break
        return FollowResult(entries, events, applied, replayed, _crawl_state(client, keys))
    finally:
        journal.close()


def _trim(client: RedisClient, keys: Keys, last_acked: bytes) -> None:
    """Drop the acknowledged entries: those before the oldest still pending, or before the
    last one acknowledged when none is (approximate: whole stream nodes, cheap)."""
    pending = client.xpending(keys.events, GROUP)
    floor = pending.get("min") if pending.get("pending") else None
    client.xtrim(keys.events, minid=_text(floor or last_acked), approximate=True)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def follow_main(
    url: str, crawl_id: str | None, state: Path, *, consumer: str, as_json: bool
) -> int:
    """`gossamer graph follow`: consume the crawl's page events until it ends; print what
    was consumed (one JSON object with --json)."""
    from .connect import with_client
    from .crawls import load_crawl

    def run(client: RedisClient) -> int:
        from ..graph import LiveGraph  # (numpy, scipy: for this command only)

        record = load_crawl(client, crawl_id)
        keys = Keys(record.id)

        def publish(stats: dict[str, Any]) -> None:
            client.set(keys.graph_stats, json.dumps(stats, default=str))

        graph = LiveGraph(
            state / record.id / GRAPH_STATS, interval=interval_from_env(), on_write=publish
        )
        stop = threading.Event()

        def finish(signum: int, _frame: object) -> None:
            # the first SIGINT/SIGTERM: read what the stream holds, write the final
            # statistics, exit 0 (the journal keeps the rest for a restart); a second one
            # stops at once
            if stop.is_set():
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, finish)
        # the crawl command starts its consumer with them held (start_graph_follower): one
        # sent meanwhile is taken now, by `finish`
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            (state / record.id).mkdir(parents=True, exist_ok=True)
            with graph:
                result = follow(
                    client, record.id, graph, state / record.id, consumer=consumer, stop=stop
                )
        except OSError as exc:  # the state directory: not writable, full
            _log.error(f"cannot write the consumer's journal in {state}: {exc}")
            return Exit.USAGE if isinstance(exc, PermissionError) else Exit.IOERR
        except ValueError as exc:  # a journal or an entry that is not one
            _log.error(f"{exc}")
            return Exit.FAILURE
        g = graph.graph
        data = {"crawl": record.id, "state": result.state, "pages": g.nodes, "edges": g.edges,
                "pending_edges": g.pending, "entries": result.entries, "events": result.events,
                "applied": result.applied, "replayed": result.replayed}  # fmt: skip
        if as_json:
            print(json.dumps(data))
        else:
            print(" ".join(f"{k} {v}" for k, v in data.items()))
        return Exit.OK

    return with_client(url, run)

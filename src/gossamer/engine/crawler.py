"""The worker loop: lease host batches, fetch them politely, parse, route links, record.

One `Crawler` runs in one process on one event loop and keeps no crawl state that must survive
a crash: the frontier owns queues, dedupe, leases and host politeness state, the sinks own the
outputs, so a worker may be killed at any moment. A batch is one leased host: robots.txt first
(once per host per crawl, through the crawl's robots store), then up to `per_host` URLs over
one kept-alive connection with the host's delay between requests (KSpider's bucket), then
`complete()` rests the host. It is given its parts and imports no runner, report or cluster.

The module stays whole because it is the per-page hot path: the batch loop, the fetch fast
path, recording and routing share the crawler's counters, routing memo, sent-set and stop
state as attributes of one object, and splitting them into modules would put an extra call or
a shared-state object on every page of every crawl (GUIDE.md, "Hot path")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from ..config import CrawlSettings
from ..fetch import (
    ERROR_CONNECTION_LOST,
    ERROR_TOO_SLOW,
    Fetching,
    FetchRequest,
    FetchResult,
    ResolveError,
    StartingFetcher,
)
from ..frontier import (
    Discovered,
    Frontier,
    FrontierStats,
    HostBatch,
    LeasedURL,
    OffLoopFrontier,
    Outcome,
    Outlinks,
    ShareCappedFrontier,
    StaleLeaseError,
    Verdict,
    host_delay,
)
from ..neardup import NearDups
from ..parse import ParsedPage, ParseOptions, is_html, parse_html, parse_sitemap
from ..robots import RobotsPolicy, robots_url
from ..robots_store import RobotsRecord, RobotsStore, SharedRobots
from ..scope import Scope
from ..traps import QueryTraps, calendar_window
from ..urls import LinkResolver, URLError, canonicalize, fingerprint, host_key, split_host_key
from .ipgate import LocalIpGate
from .machine import MB, DiskGuard
from .payloads import IdenticalPayloads
from .recrawl import NOT_MODIFIED_OUTCOME, Recrawl
from .seams import IpGate, Sinks
from .turns import Turns

REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: the crawl log's outcome of a page whose transfer was stopped after its head because it is
#: not HTML (--html-only: `FetchRequest.html_only`, docs/crawler/fetch.md "Non-HTML bodies")
NOT_HTML_OUTCOME = "ok/not-html"
RETRY_STATUSES = frozenset({429, 503})
MAX_ROBOTS_REDIRECTS = 5
LEASE_SAFETY_S = 2.0  # stop fetching a batch this long before its lease ends
EXTEND_BEFORE_S = 10.0  # extend a lease once it ends within this (at most half the TTL)
RENEW_MAX_S = 2.0  # a host keeps its IP slot through lease renewals at most this long
CONTENDED = 1 << 30  # the processing-turn backlog of a host whose IP another host waits for
KEEP_TURN_BACKLOG = 100  # hosts with this many URLs left (or a contended IP) may keep a turn
KEEP_TURN_PAGES = 4  # … for at most this many more pages in a row
# A host whose IP another host waits for gives its IP slot up after the response in hand when
# its next request would wait for the host's delay, or once it has held the slot this long:
# with no delay, a turn of one request each made every batch one page (a lease and a settle a
# page: twice the CPU a page with two workers sharing one IP's 64 slots).
TURN_QUANTUM_S = 0.25

_T = TypeVar("_T")
#: which links of a fetched HTML page (its result, its depth, its parse: title and links) the
#: crawl follows: engine/extract.py's `Extraction.follow` (which keeps the parse for its page)
FollowHook = Callable[[FetchResult, int, ParsedPage], Sequence[tuple[str, str]]]
MAX_SITEMAP_FILES = 50  # sitemap files read per host (an index and its children)
_EDGE_KINDS = frozenset({"redirect", "canonical", "sitemap"})  # the rest are "link"
ROUTE_MEMO_MAX = 200_000  # URLs whose routing facts are memoised (~40 MB at the cap)
SENT_SET_MAX = 2_000_000  # fingerprints sent to the frontier that are remembered (~150 MB)
#: how often the event loop publishes `Crawler.snapshot` while it crawls: a copy of three
#: small dicts (statuses, errors, dropped: tens of keys), ~5 µs, ten times a second (~0.005 %
#: of the loop), nothing on the per-page path; the heartbeat (every TTL/5 s, 0.4 s with a 2 s
#: TTL) and the progress display (0.5 s on a terminal) see figures at most this old (at 0.5 s
#: a quick crawl's heartbeats lagged its pages enough that `experiment parallel --quick`
#: killed its victim after it had finished)
SNAPSHOT_INTERVAL_S = 0.1
#: the longest a recorded page waits for the outputs (crawl log, WARC, graph) to be handed to
#: the OS while its batch goes on: a batch ends with a flush, but a batch of 20 URLs at a 1 s
#: delay lasts 20 s, and its crawl log lines came all at once at its end. A flush between two
#: pages when this much has passed since the last: at most two a second, on a clock read the
#: page loop makes anyway
OUTPUTS_FLUSH_S = 0.5
#: how long a page waits for the Redis digest store's answer (identical payloads) before it
#: is stored whole (the frontier's I/O thread: a round trip, or a frontier call ahead of it);
#: after such a wait the store is not asked for DIGEST_BACKOFF_S (Redis paused, failing over:
#: the pages go on being written, a revisit missed at worst, never a wrong one)
DIGEST_WAIT_S = 1.0
DIGEST_BACKOFF_S = 5.0

_log = logging.getLogger(__name__)


def turn_over(waited_for: bool, delay: float, held_s: float) -> bool:
    """Whether a host gives its IP's slot up after the response in hand: another host
    waits for the IP (`waited_for`) and the host's next request would wait for its delay,
    or it has held the slot `held_s` >= TURN_QUANTUM_S."""
    return waited_for and (delay > 0 or held_s >= TURN_QUANTUM_S)


@dataclass(slots=True)
class CrawlCounters:
    """Live counters of one worker (`Crawler.counters`; `run` returns them at the end)."""

    pages: int = 0  # responses recorded for page URLs (DONE outcomes)
    requests: int = 0  # every HTTP request made, robots.txt included
    bytes: int = 0
    # HTTP bytes on the wire: response heads and bodies received, request heads sent
    wire_in: int = 0
    wire_out: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)  # every response's, robots.txt too
    # robots.txt's and sitemaps' responses apart ("robots/404"): not the pages' HTTP errors
    robots_sitemap_statuses: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    # requests by the crawl log's outcome key (what `gossamer report` counts from the log):
    # a cluster worker's heartbeat carries its most common ones (docs/dashboard.md)
    outcomes: Counter[str] = field(default_factory=Counter)
    # --html-only: responses stopped after their head because they are not HTML, the body
    # bytes their Content-Length announced and were not read, and those without one
    not_html: int = 0
    not_html_saved: int = 0
    not_html_unknown: int = 0
    discovered: int = 0
    active_hosts: int = 0
    # HTML pages fingerprinted, and those found near-duplicates of a page crawled before
    fingerprinted: int = 0
    near_dups: int = 0
    started_at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class CrawlSnapshot:
    """One worker's counters at `taken_at`, frozen: what another thread reads (the cluster
    worker's heartbeat, its status record) instead of `CrawlCounters`, which the event loop
    mutates as it crawls — iterating a dict the loop adds a key to raises "dictionary changed
    size during iteration", and reading several counters one after another mixes moments.
    The loop builds a snapshot and publishes it by one reference assignment
    (`Crawler.snapshot`, atomic in CPython) every SNAPSHOT_INTERVAL_S while it crawls, and
    on demand (`Crawler.publish_snapshot()`, on the loop's thread); readers never copy."""

    taken_at: float  # time.time() when taken
    started_at: float
    pages: int = 0
    requests: int = 0
    bytes: int = 0
    wire_in: int = 0
    wire_out: int = 0
    discovered: int = 0
    active_hosts: int = 0
    in_flight: int = 0
    # read-only views of copies: a reader cannot change them, the loop does not
    statuses: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    errors: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    dropped: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    outcomes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def error_count(self) -> int:
        """Failed requests and pages with an error (the sum of `errors`)."""
        return sum(self.errors.values())

    @classmethod
    def of(cls, counters: CrawlCounters, *, in_flight: int = 0) -> CrawlSnapshot:
        """A snapshot of `counters` now. Call it on the thread that mutates them."""
        c = counters
        return cls(
            taken_at=time.time(),
            started_at=c.started_at,
            pages=c.pages,
            requests=c.requests,
            bytes=c.bytes,
            wire_in=c.wire_in,
            wire_out=c.wire_out,
            discovered=c.discovered,
            active_hosts=c.active_hosts,
            in_flight=in_flight,
            statuses=MappingProxyType(dict(c.statuses)),
            errors=MappingProxyType(dict(c.errors)),
            dropped=MappingProxyType(dict(c.dropped)),
            outcomes=MappingProxyType(dict(c.outcomes)),
        )


class Crawler:
    """Drives one worker. Every collaborator is injected (built in `engine.build.worker`)."""

    # where frontier and robots store calls run, set by `run()`: None (inline, on the loop's
    # thread) or an OffLoopFrontier's I/O thread
    _io: Executor | None = None
    _publisher: asyncio.TimerHandle | None = None  # the next `snapshot`, while run() runs

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        frontier: Frontier,
        fetcher: Fetching,
        ip_of: Callable[[str], str | None],
        sinks: Sinks,
        ip_gate: IpGate | None = None,
        resolve: Callable[[str, int], Awaitable[object]] | None = None,
        clock: Callable[[], float] = time.time,
        revalidate: Recrawl | None = None,
        robots_store: RobotsStore | None = None,
        follow: FollowHook | None = None,
        near_dups: NearDups | None = None,
        payloads: IdenticalPayloads | None = None,
    ) -> None:
        self.settings = settings
        # identical payloads (engine/payloads.py): checked before a page is recorded, claimed
        # after, the claims flushed before its batch completes; None: every response whole
        self.payloads = payloads
        self._digests_quiet_until = 0.0  # (loop time) the digest store is not asked until then
        # free space of the output directory's disk under --disk-margin: no more hosts, stop
        self.disk = DiskGuard(settings.output, settings.sinks.disk_margin * MB)
        # which of an HTML page's links to follow (an extractor's `follow`): None, all
        self.follow = follow
        self.revalidate = revalidate  # --recrawl: conditional GETs, old links on a 304
        # pages are fetched html_only: a body that is not HTML is stopped after its head
        # (robots.txt and sitemaps never: `_fetch_aux` requests are plain)
        self._html_only = settings.links.html_only
        self.frontier = frontier
        self._io = frontier.io_executor if isinstance(frontier, OffLoopFrontier) else None
        self._settle_call: Callable[..., tuple[int, HostBatch | None, bool]] | None = None
        self.fetcher = fetcher
        # the fast path (CurlFetcher), decided once: `start(request) -> Future` begins a
        # request at once (else a task around `fetch()`), `poll()` settles transfers whose
        # responses are in, without a loop iteration
        fast = fetcher if isinstance(fetcher, StartingFetcher) else None
        self._start: Callable[[FetchRequest], asyncio.Future[FetchResult]] | None = (
            fast.start if fast is not None else None
        )
        self._poll: Callable[[], None] | None = fast.poll if fast is not None else None
        self.ip_of = ip_of
        self.resolve = resolve  # DNS lookup that fills the cache ip_of reads
        self.sinks = sinks
        self.clock = clock
        self.scope = Scope(
            settings.seeds,
            scope=settings.scope,
            allow=settings.allow,
            deny=settings.deny,
            max_depth=settings.max_depth,
            html_only=settings.links.html_only,
            max_path_repeat=settings.traps.max_path_repeat,
            max_path_segments=settings.traps.max_path_segments,
            calendar=calendar_window(settings),
        )
        traps = settings.traps
        self.query_traps = QueryTraps(traps.max_queries_per_path, traps.max_query_shapes)
        # robots.txt answers: this worker's cache in front of the crawl's store, shared by
        # every worker (None: this worker's cache only), so a host's robots.txt is fetched
        # once per crawl, not once per worker that leases the host
        self.robots = SharedRobots(
            robots_store if settings.politeness.obey_robots else None,
            user_agent=settings.fetch.user_agent,
            ttl=settings.politeness.robots_ttl,
        )
        # near-duplicates (docs/crawler.md, "Near-duplicates"): each HTML page's text
        # fingerprint against the crawl's (`near_dups`: shared by the workers; without one,
        # this worker's own); a near-duplicate's links are not followed with "skip"
        near_links = settings.traps.near_dup_links
        self.near_dups: NearDups | None = None
        if near_links != "off":
            self.near_dups = near_dups or NearDups(None, settings.traps.near_dup_distance)
        self._expand_near_dups = near_links == "follow"
        # the page `_record` parsed to fingerprint it, for `_links` (the same result object)
        # (and whether it is a near-duplicate)
        self._parsed: tuple[FetchResult, ParsedPage, bool] | None = None
        self.parse_options = ParseOptions(
            follow_nofollow=settings.links.follow_nofollow,
            link_rels=frozenset({"canonical"}) if settings.links.follow_canonical else frozenset(),
            fingerprint=self.near_dups is not None,
        )
        self.counters = CrawlCounters()
        # the counters as last published by the loop: read this from other threads
        self.snapshot = CrawlSnapshot.of(self.counters)
        self.ip_gate: IpGate = ip_gate or LocalIpGate(settings.politeness.per_ip)
        self._memo: dict[str, tuple[str, int, str | None]] = {}
        self.turns = Turns()
        self._sent: set[int] = set()
        # with a frontier that relaxes depths: fp -> the smallest depth this worker has put
        # (a put that returned: see _note_sent), so a repeat no shallower goes as an edge only
        self._sent_depth: dict[int, int] = {}
        # with a max_depth, a frontier that keeps shortest-path depths gets every link
        self._relax_depths = settings.max_depth is not None and _frontier_max_depth(
            frontier
        ) == settings.max_depth
        self._stop = asyncio.Event()
        # abandon_in_flight(): requests in flight are cancelled, their URLs go back unfetched
        self._abandoned = False
        self._keepers: set[_LeaseKeeper] = set()  # the batches fetching (their request)
        self._aux_fetches: set[asyncio.Future[FetchResult]] = set()  # robots.txt, sitemaps
        self._pauses: set[asyncio.Future[None]] = set()  # host delays being waited out
        self._flushed_at = -math.inf  # when a page last flushed the outputs (OUTPUTS_FLUSH_S)
        self._ip_waits: set[asyncio.Timeout] = set()  # batches waiting for their IP's slot
        # stop fetching this long before a lease ends (a quarter of a short TTL)
        self._safety = min(LEASE_SAFETY_S, settings.frontier.lease_ttl / 4)
        # a frontier that caps this worker's hosts at its share (a cluster worker): how many
        # it holds over that share now (a member joined), read as the loop looks for work
        self._over_share = (
            frontier.hosts_over_share if isinstance(frontier, ShareCappedFrontier) else None
        )
        # the tokens of the batches being given back (ending early), until completed
        self._giving_back: set[str] = set()

    # ------------------------------------------------------------------ control
    def request_stop(self) -> None:
        """Send no new request: finish the request in flight of every batch, complete the
        batches, then return. Batches still waiting for their IP's slot give their URLs back
        at once (they could wait for seconds behind other hosts of that IP), and so do
        requests waiting out their host's delay (up to max_crawl_delay, 30 s: the next
        request of a batch was sent once its delay had passed, stop or not). Call it on the
        crawl's event loop."""
        if self._stop.is_set():  # (a wait cut off already may not be rescheduled again)
            return
        self._stop.set()
        if self._ip_waits:  # none begins after the stop: `_ip_turn` checks it first
            now = asyncio.get_running_loop().time()
            for wait in self._ip_waits:
                wait.reschedule(now)
        for pause in self._pauses:  # none begins after the stop: `_pause` checks it first
            if not pause.done():
                pause.set_result(None)

    def abandon_in_flight(self) -> int:
        """Stop now: `request_stop()`, and cancel every request in flight (a dead host keeps
        one for first_byte_timeout, 30 s). Nothing of a cancelled request is recorded and its
        URL gets no outcome, so the frontier keeps it queued for a resume; the batches are
        completed as usual with what was fetched. The number of requests cancelled."""
        self.request_stop()
        self._abandoned = True
        cancelled = 0
        for keeper in self._keepers:
            current = keeper.current
            if current is not None and current.cancel():
                cancelled += 1
        for fut in self._aux_fetches:
            cancelled += fut.cancel()
        return cancelled

    def publish_snapshot(self) -> CrawlSnapshot:
        """Take a snapshot of the counters now and publish it as `snapshot` (on the loop's
        thread, the only one that mutates the counters). `run()` does it every
        SNAPSHOT_INTERVAL_S and as it returns."""
        snap = self.snapshot = CrawlSnapshot.of(self.counters, in_flight=self.in_flight())
        return snap

    def _publish_every(self, loop: asyncio.AbstractEventLoop) -> asyncio.TimerHandle:
        self.publish_snapshot()
        return loop.call_later(SNAPSHOT_INTERVAL_S, self._republish, loop)

    def _republish(self, loop: asyncio.AbstractEventLoop) -> None:
        self._publisher = self._publish_every(loop)

    @property
    def stopping(self) -> bool:
        """A stop was requested."""
        return self._stop.is_set()

    @property
    def abandoned(self) -> bool:
        """`abandon_in_flight()` was called."""
        return self._abandoned

    def hosts_crawling(self) -> list[str]:
        """The hosts whose batches are being fetched now (a worker's heartbeat shows them)."""
        return sorted({k.host for k in self._keepers})

    def in_flight(self) -> int:
        """Requests in flight (or waiting for their host's delay) now."""
        busy = sum(1 for k in self._keepers if k.current is not None and not k.current.done())
        return busy + sum(1 for f in self._aux_fetches if not f.done())

    async def _pause(self, seconds: float, lease: _LeaseKeeper | None = None) -> bool:
        """Wait `seconds` (a host's delay) unless a stop comes first, or the batch of `lease`
        is given back: then False at once."""
        if self._stop.is_set() or (lease is not None and lease.giving_back):
            return False
        loop = asyncio.get_running_loop()
        pause: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _wake, pause)
        self._pauses.add(pause)
        if lease is not None:
            lease.pause = pause
        try:
            await pause
        finally:
            timer.cancel()
            self._pauses.discard(pause)
            if lease is not None:
                lease.pause = None
        return not self._stop.is_set() and not (lease is not None and lease.giving_back)

    async def _fetch_aux(self, request: FetchRequest) -> FetchResult:
        """fetch(request) for robots.txt or a sitemap, cancelled by `abandon_in_flight`
        (then `_Abandoned`: nothing of it is recorded, the batch's URLs go back)."""
        fut: asyncio.Future[FetchResult] = asyncio.ensure_future(self.fetcher.fetch(request))
        self._aux_fetches.add(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if _abandoned_here(self, fut):
                raise _Abandoned from None
            raise
        finally:
            self._aux_fetches.discard(fut)

    @contextlib.asynccontextmanager
    async def _ip_turn(self, ip: str) -> AsyncIterator[bool]:
        """Hold one of `ip`'s slots for the body and yield True; or yield False, holding
        none, when a stop is requested before the slot is had."""
        async with contextlib.AsyncExitStack() as stack:
            if self._stop.is_set():
                yield False
                return
            wait = asyncio.timeout(None)  # request_stop() makes it expire now
            self._ip_waits.add(wait)
            try:
                async with wait:
                    await stack.enter_async_context(self.ip_gate.hold(ip))
            except TimeoutError:
                if not wait.expired():
                    raise
            finally:
                self._ip_waits.discard(wait)
            held = not wait.expired()
            yield held

    def seed(self, urls: list[str]) -> int:
        return seed_frontier(self.frontier, self.settings, urls)

    async def run(self) -> CrawlCounters:
        """Crawl until the frontier is exhausted, the page budget is spent or a stop."""
        self._io = self.frontier.io_executor if isinstance(self.frontier, OffLoopFrontier) else None
        # a frontier that puts a batch's links and completes it in one call (SqliteFrontier:
        # one transaction); others get the two calls
        settle = getattr(self.frontier, "settle", None)
        self._settle_call = settle if self._io is None and callable(settle) else None
        active: set[asyncio.Task[None]] = set()
        wake = asyncio.Event()  # set when a batch ends: a slot is free, lease again
        # the snapshots other threads read: one timer, not a cost a page
        self._publisher = self._publish_every(asyncio.get_running_loop())

        def finished(task: asyncio.Task[None]) -> None:
            active.discard(task)
            wake.set()

        try:
            async with asyncio.TaskGroup() as tg:
                while not self._stop.is_set():
                    if self.disk.low():
                        # before the outputs could be cut short: the requests in flight
                        # end and are recorded (the margin holds them), the batches are
                        # completed, their URLs left go back to the frontier
                        _log.error(self.disk.message(), extra={"path": str(self.disk.path)})
                        self.request_stop()
                        break
                    free = self.settings.fetch.concurrency - len(active)
                    batches: list[HostBatch] = []
                    wake.clear()
                    if free > 0:
                        batches = await self._off_loop(
                            self.frontier.lease, free, self.settings.frontier.per_host
                        )
                    failed = False
                    for b in batches:
                        try:
                            t = tg.create_task(self._run_batch(b))
                        except RuntimeError:
                            # a batch failed (its error, e.g. a full disk, ends the crawl as
                            # the group exits): start nothing more; these leases expire
                            failed = True
                            break
                        active.add(t)
                        t.add_done_callback(finished)
                    if failed:
                        break
                    if self._over_share is not None and self._keepers:
                        self._give_back_over_share()
                    self.counters.active_hosts = len(active)
                    if not batches and not active:
                        idle = await self._idle_wait()
                        if idle is None:
                            break
                        await asyncio.sleep(idle)
                    elif active and not wake.is_set():
                        # a free slot with nothing ready: look again in 50 ms at the latest
                        # (and with a share to keep to, every slot busy or not: hosts over it
                        # go back within 50 ms of the member list that says so)
                        full = len(active) >= self.settings.fetch.concurrency
                        # (every slot busy: the disk guard is read every 0.1 s)
                        timeout = 0.1 if full and self._over_share is None else 0.05
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(wake.wait(), timeout)
        finally:
            if self._publisher is not None:
                self._publisher.cancel()
                self._publisher = None
            self.counters.active_hosts = 0
            self.publish_snapshot()
        return self.counters

    def _give_back_over_share(self) -> None:
        """Give back the hosts held over this worker's share (a member joined since they
        were leased: `ShareCappedFrontier`), those whose batches have the most URLs left
        first (the most to gain from an idle worker): each batch ends after the request in
        flight, or at once if it waits out its host's delay, and is completed with its URLs
        not fetched given back, not renewed. The host's next fetch time is the end of its
        last request + its delay, as at any batch's end: whoever leases it next keeps it.
        Batches being given back are counted until completed (the frontier still holds
        them), so none is given back twice over."""
        assert self._over_share is not None
        over = self._over_share() - len(self._giving_back)
        if over <= 0:
            return
        keepers = [k for k in self._keepers if k.token not in self._giving_back]
        keepers.sort(key=lambda k: (k.left, k.backlog), reverse=True)
        for keeper in keepers[:over]:
            self._giving_back.add(keeper.token)
            keeper.give_back()

    async def _idle_wait(self) -> float | None:
        """Nothing leased and nothing ready: None when the crawl is over, else how long to
        sleep (until the next host is ready, at most 0.5 s: other workers may add work)."""
        stats = await self.frontier_statistics()
        limit = self.settings.max_pages
        if not stats.leased and (stats.queued == 0 or (limit is not None and stats.done >= limit)):
            return None
        if stats.next_ready_at is None:
            return 0.05
        return min(max(stats.next_ready_at - self.clock(), 0.005), 0.5)

    # ------------------------------------------------------------------ one host
    async def _run_batch(self, batch: HostBatch) -> None:
        """Crawl one leased host: robots.txt (when not cached), then its batch; while the host
        has URLs left and may be fetched again at once (no delay, no back-off), the frontier
        renews the lease as it completes the batch and the same connection goes on (see
        `_renew_size` for what bounds that)."""
        host = batch.host
        ip = await self._ip_of(host)
        async with self._ip_turn(ip) as held:  # per-IP politeness covers robots.txt too
            held_since = self.clock()
            if not held or self._stop.is_set() or held_since > batch.expires_at - self._safety:
                # a stop came before any request of the batch, or the lease ended (or is about
                # to) while waiting for the IP: another worker may hold the host now, so not
                # even robots.txt; the URLs go back unfetched. (`held` is False for a stop
                # during the wait; one that came after the slot was granted but before this
                # task resumed leaves `held` True, hence the second test.)
                await self._settle(batch, [], [], None, 0)
                return
            discovered: list[Discovered | Outlinks] = []
            try:
                policy, fetched_robots = await self._robots_policy(host, batch)
                delay = self._delay(policy)
                last_end = 0.0
                if fetched_robots and policy is not None:
                    last_end = self.clock()
                    if policy.sitemaps and self.settings.links.use_sitemaps:
                        last_end = await self._sitemaps(
                            host, policy, batch, delay, last_end, discovered
                        )
            except (_Abandoned, StaleLeaseError):  # robots.txt or a sitemap in flight when
                # the crawl stopped, or the lease found lost before its request (a cluster
                # worker back from a freeze: cluster.worker): nothing is fetched
                await self._settle(batch, [], discovered, None, 0)
                return
            current: HostBatch | None = batch
            while current is not None:
                outcomes: list[Outcome] = []
                last_end = await self._fetch_batch(
                    current, ip, policy, delay, last_end, outcomes, discovered, held_since
                )
                token = current.token
                given_back = token in self._giving_back
                try:
                    current = await self._settle(
                        current,
                        outcomes,
                        discovered,
                        last_end + delay if last_end else None,
                        0 if given_back else self._renew_size(ip, held_since, delay),
                    )
                finally:
                    if given_back:
                        self._giving_back.discard(token)
                discovered = []

    def _renew_size(self, ip: str, held_since: float, delay: float = 0.0) -> int:
        """URLs to ask for when renewing a host's lease: none once a stop is requested, when
        another host (of this worker or another) waits for the same IP and the turn is over
        (the host has a delay, or has held the IP's slot TURN_QUANTUM_S), or after
        RENEW_MAX_S of holding the IP (then the host goes back to the frontier's lease order,
        so hosts of that IP in other workers get their turn too)."""
        held = self.clock() - held_since
        if (
            self._stop.is_set()
            or self.disk.low()  # (--disk-margin: no more URLs; the lease loop then stops)
            or turn_over(self.ip_gate.waiting(ip), delay, held)
            or held > RENEW_MAX_S
        ):
            return 0
        return self.settings.frontier.per_host

    async def frontier_statistics(self) -> FrontierStats:
        """The frontier's statistics, read off the loop's thread: on its I/O thread (in
        order with the crawl's other frontier calls) when it has one, else in the default
        executor (SQLite: the counters' query can wait for a writer's lock)."""
        return await self._in_thread(self.frontier.statistics)

    async def close_frontier(self) -> None:
        """Close the frontier: inline (SQLite: a flush of its pending counters), or in a
        thread, awaited, when it has an I/O thread (Redis: its close waits for the calls
        queued on that thread and sends what it still holds — through an outage, a wait
        the loop and its signal handlers do not sit through)."""
        if self._io is None:
            self.frontier.close()
        else:
            await asyncio.to_thread(self.frontier.close)

    async def _in_thread(self, call: Callable[..., _T], *args: object) -> _T:
        """`call(*args)` on the frontier's I/O thread when it has one, else in the default
        executor (`asyncio.to_thread`): for the calls that never ran inline."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._io, call, *args)

    async def _check_remote(self, payloads: IdenticalPayloads, result: FetchResult) -> None:
        """`payloads.check(result)` on the frontier's I/O thread, waiting DIGEST_WAIT_S at
        most: a store that does not answer (Redis paused, failing over) does not hold the
        pages back: they are stored whole, and for DIGEST_BACKOFF_S the store is not asked."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._digests_quiet_until:
            payloads.unanswered(result)
            return
        try:
            found = await asyncio.wait_for(
                loop.run_in_executor(self._io, payloads.lookup, result), DIGEST_WAIT_S
            )
        except TimeoutError:
            self._digests_quiet_until = loop.time() + DIGEST_BACKOFF_S
            self.counters.errors["dedup/store-timeout"] += 1
            payloads.unanswered(result)
            return
        if found is not None:
            payloads.settle(result, *found)

    async def _off_loop(self, call: Callable[..., _T], *args: object) -> _T:
        """`call(*args)` on the frontier's I/O thread when it has one (Redis: a round trip,
        and through an outage a wait), inline otherwise (SQLite: an await of a call made
        at once costs the loop nothing more than the call)."""
        if self._io is None:
            return call(*args)
        return await asyncio.get_running_loop().run_in_executor(self._io, call, *args)

    async def _settle(
        self,
        batch: HostBatch,
        outcomes: list[Outcome],
        discovered: list[Discovered | Outlinks],
        next_fetch_at: float | None,
        renew: int,
    ) -> HostBatch | None:
        """Hand a finished batch to the frontier: outputs flushed first, then its links, then
        `complete`. Returns the renewed batch, if any. The frontier is called on the loop's
        thread, as `lease` is (docs/architecture.md, "Frontier calls on the loop thread"),
        or awaited on its I/O thread (`OffLoopFrontier`: Redis)."""
        self.sinks.flush()  # outputs on disk before the frontier counts the URLs done
        near = self.near_dups
        if near is not None and near.sync_due():  # this worker's fingerprints out, others' in
            mine, after = near.take()
            rows, read_to = await self._in_thread(near.exchange, mine, after)
            near.absorb(rows, read_to)
        payloads = self.payloads
        if payloads is not None:  # and the payloads they stored whole claimed
            await self._off_loop(payloads.flush)
            if payloads.maintenance_due():  # (an SQLite checkpoint: fsyncs, in a thread)
                await self._in_thread(payloads.maintain)
        one_call = self._settle_call
        if one_call is not None:  # the links and the completion in one transaction (SQLite)
            queued, renewed, stale = one_call(
                batch.token, discovered, outcomes, next_fetch_at, renew
            )
            self.counters.discovered += queued
            if stale:  # (its links went in all the same)
                self.counters.errors["frontier/stale-lease"] += 1
            if discovered and self._relax_depths:
                self._note_sent(discovered)
            return renewed
        # Links go in before the batch completes: a crash (or a full disk) between the two
        # then re-fetches the pages (dedupe absorbs the rediscovered links) instead of
        # counting them done with their links lost.
        if discovered:
            self.counters.discovered += await self._off_loop(
                self.frontier.put_discovered, discovered
            )
            if self._relax_depths:
                self._note_sent(discovered)
        try:
            return await self._off_loop(
                self.frontier.complete, batch.token, outcomes, next_fetch_at, renew
            )
        except StaleLeaseError:
            self.counters.errors["frontier/stale-lease"] += 1
            return None

    async def _fetch_batch(
        self,
        batch: HostBatch,
        ip: str,
        policy: RobotsPolicy | None,
        delay: float,
        last_end: float,
        outcomes: list[Outcome],
        discovered: list[Discovered | Outlinks],
        turn_start: float | None = None,
    ) -> float:
        """Fetch, record and parse the URLs of `batch` over the host's connection, appending
        to `outcomes` and `discovered`. Returns the end time of the last request (or
        `last_end` when none was made). URLs not reached (a stop, the lease's end, a back-off)
        get no outcome: the frontier requeues them. `turn_start`: when the IP's slot was had
        (TURN_QUANTUM_S); now when not given."""
        if turn_start is None:
            turn_start = self.clock()
        todo: list[LeasedURL] = []
        for leased in batch.urls:
            if policy is not None and not policy.allowed(leased.url):
                # (the rules, or robots.txt unreachable: `robots/unreachable/<cause>`)
                why = policy.refusal()
                outcomes.append(Outcome(leased.url, leased.fp, Verdict.FAILED, error=why))
                self.counters.dropped[why] += 1
            else:
                todo.append(leased)
        # One request in flight on the host's connection, and one page of look-ahead: the
        # next request goes out (after the host's delay) before this response is
        # processed, so the connection works while the page is parsed and recorded.
        lease = _LeaseKeeper(self, batch, await self._lease_end(batch, batch.expires_at))
        lease.left = len(todo)
        self._keepers.add(lease)
        nxt: asyncio.Future[FetchResult] | None = None
        kept = 0  # pages processed in a row on one turn (see below)
        resent = -1  # the URL last sent again after a lost connection
        try:
            nxt = self._next_fetch(todo, 0, last_end, delay, lease)
            k = 0
            while nxt is not None:
                try:
                    result = await nxt
                except (_LeaseLost, StaleLeaseError):  # during the host's delay, or found
                    # lost before the request (a cluster worker back from a freeze whose
                    # leases were reclaimed: cluster.worker): the URLs left go back
                    nxt = None
                    break
                except asyncio.CancelledError:
                    if not _abandoned_here(self, nxt):
                        raise
                    nxt = None  # abandon_in_flight(): this URL and the rest go back
                    break
                last_end = self.clock()
                leased = todo[k]
                if result.error == ERROR_CONNECTION_LOST and resent != k:
                    # the kept-alive connection died under the request (fetch.md): sent again
                    # once, after the host's delay like any request, not counted an attempt
                    resent = k
                    self.counters.requests += 1
                    self.counters.errors[ERROR_CONNECTION_LOST] += 1
                    self.sinks.log(
                        result, depth=leased.depth, parent=leased.parent,
                        outcome=ERROR_CONNECTION_LOST,
                    )  # fmt: skip
                    if kept:  # no turn held through the delay
                        kept = 0
                        self.turns.release()
                    nxt = self._next_fetch(todo, k, last_end, delay, lease)
                    continue
                k += 1
                lease.left = len(todo) - k
                retry = result.status in RETRY_STATUSES  # the host asked us to back off
                if not retry and k < len(todo) and self._extend_due(lease.end):
                    # (tested first: no coroutine a page for the rare extension)
                    lease.end = await self._lease_end(batch, lease.end)
                # A host whose IP another host waits for (of this worker or another) ends its
                # batch here when its next request would wait for the host's delay (or it has
                # held the IP's slot TURN_QUANTUM_S): the URLs left go back and the slot goes
                # to the waiter, so the hosts of one IP take turns a request each (docs/
                # cluster.md, "Per-IP politeness across machines"), not a batch of `per_host`
                # requests each.
                waited_for = self.ip_gate.waiting(ip)
                contended = turn_over(waited_for, delay, last_end - turn_start)
                nxt = (
                    None
                    if retry or contended
                    else self._next_fetch(todo, k, last_end, delay, lease)
                )
                # The host with the most URLs left is processed first (engine.turns); a host
                # whose IP another host waits for, first of all (priority inheritance: a small
                # site sharing a big site's IP held it for a second at a few pages a second,
                # its pages processed last, while the big site waited).
                backlog = CONTENDED if waited_for else batch.backlog + len(todo) - k
                if backlog >= KEEP_TURN_BACKLOG and nxt is not None and self._poll is not None:
                    # a big or contended host's next request on the wire now, not on the next
                    # loop iteration (after this page and a round of others): see _next_is_in
                    self._poll()
                payloads = self.payloads
                checked = payloads is not None and payloads.wants(result)
                if checked:
                    assert payloads is not None
                    if self._io is None:
                        payloads.check(result)
                    else:  # (Redis: a round trip)
                        await self._check_remote(payloads, result)
                if not kept:
                    await self.turns.acquire(backlog)
                keep = False
                try:
                    if checked:
                        verdict, error = self._record_checked(result, leased)
                    else:
                        verdict, error = self._record(
                            result, leased.depth, leased.parent, leased.attempts
                        )
                    taken = True
                    if verdict is Verdict.DONE:
                        edges = self._links(result, leased.depth, discovered)
                        # a subscriber may refuse the page (a Python program that stopped
                        # reading pages): no outcome then, and the frontier queues it again
                        taken = self.sinks.page(result, leased.depth, edges)
                    if taken:
                        outcomes.append(
                            Outcome(
                                leased.url,
                                leased.fp,
                                verdict,
                                status=result.status,
                                retry_after=_retry_after(result),
                                elapsed=result.elapsed if result.status is not None else None,
                                error=error,
                            )
                        )
                    if last_end - self._flushed_at >= OUTPUTS_FLUSH_S:
                        # a long batch's pages on disk as they come, not at its end
                        self._flushed_at = last_end
                        self.sinks.flush()
                    keep = kept < KEEP_TURN_PAGES and self._next_is_in(nxt, backlog)
                finally:
                    if keep:
                        kept += 1
                    else:
                        kept = 0
                        self.turns.release()
        finally:
            lease.cancel()
            self._keepers.discard(lease)
            if kept:  # an error between two pages of a kept turn: give the turn back
                self.turns.release()
            if nxt is not None:  # an error while recording: no request left behind
                nxt.cancel()
        return last_end

    async def _lease_end(self, batch: HostBatch, end: float) -> float:
        """When the batch's lease ends: `end`, or later once extended. A lease that ends
        within the safety margin plus EXTEND_BEFORE_S (at most half the TTL) is extended
        first, so a long batch (a delay, slow pages) keeps its host. -inf when the frontier
        refuses (the lease was reclaimed: another worker may hold the host now, so nothing
        more is fetched). The frontier may extend less than asked (Redis: a phase's end)."""
        if not self._extend_due(end):
            return end
        try:
            return await self._off_loop(
                self.frontier.extend, batch.token, self.clock() + self.settings.frontier.lease_ttl
            )
        except StaleLeaseError:
            self.counters.errors["frontier/stale-lease"] += 1
            return -math.inf

    def _extend_due(self, end: float) -> bool:
        """Whether a lease ending at `end` is to be extended now (see `_lease_end`)."""
        if end == -math.inf:
            return False  # (refused once: not asked again)
        ttl = self.settings.frontier.lease_ttl
        return self.clock() > end - self._safety - min(EXTEND_BEFORE_S, ttl / 2)

    def _next_is_in(self, nxt: asyncio.Future[FetchResult] | None, backlog: int) -> bool:
        """Whether a big or contended host may process its next page on the turn it holds:
        its next response has come (the fetcher polled now). The network is polled between
        two loop iterations, and an iteration processes a round of pages, so a host moves
        at most a page an iteration otherwise: the biggest site of a crawl (a sixth of the
        simulated web's pages) then finished alone, at the end, over its one connection."""
        if nxt is None or backlog < KEEP_TURN_BACKLOG or self._poll is None:
            return False
        if not nxt.done():
            self._poll()
        return nxt.done()

    def _next_fetch(
        self, todo: list[LeasedURL], k: int, last_end: float, delay: float, lease: _LeaseKeeper
    ) -> asyncio.Future[FetchResult] | None:
        """Start fetching todo[k] once the host's delay after `last_end` has passed; None when
        the batch is over (all fetched, a stop, given back, or too close to the lease's end).
        The future raises _LeaseLost when the lease was lost (or is about to end), or the
        batch given back, during the delay."""
        if (
            k >= len(todo)
            or self._stop.is_set()
            or lease.giving_back
            or self.disk.low()  # under --disk-margin: the URLs left go back
            or self.clock() > lease.end - self._safety
        ):
            lease.current = None
            return None
        leased = todo[k]
        revalidate = self.revalidate
        request = FetchRequest(
            leased.url, revalidate.headers(leased.fp) if revalidate else (), self._html_only
        )
        wait = last_end + delay - self.clock()
        if wait <= 0 and self._start is not None:
            # the request goes on the wire now and the future is awaited directly: a task
            # around `fetch()` would start it one loop iteration later and wake the batch one
            # iteration after the response, and a busy loop's iterations are milliseconds
            started = lease.current = self._start(request)
            return started
        fut: asyncio.Future[FetchResult] = asyncio.ensure_future(
            self._fetch_at(request, wait, lease) if wait > 0 else self.fetcher.fetch(request)
        )
        lease.current = fut  # (abandon_in_flight cancels it)
        return fut

    async def _fetch_at(
        self, request: FetchRequest, wait: float, lease: _LeaseKeeper
    ) -> FetchResult:
        if not await self._pause(wait, lease):  # a stop during the delay, or the batch given
            raise _LeaseLost  # back: the request is not sent
        if self.clock() > lease.end - self._safety:  # (-inf: the frontier refused to extend)
            raise _LeaseLost
        result: FetchResult = await self.fetcher.fetch(request)
        return result

    async def _sitemaps(
        self,
        host: str,
        policy: RobotsPolicy,
        batch: HostBatch,
        delay: float,
        last_end: float,
        out: list[Discovered | Outlinks],
    ) -> float:
        """Read the sitemaps that the host's robots.txt names (on the host itself; an index's
        child sitemaps too; at most MAX_SITEMAP_FILES) over the host's connection with its
        delay, and route their URLs one level deeper than the host's first batch. Returns the
        end time of the last request."""
        depth = min((u.depth for u in batch.urls), default=0)
        queue = list(policy.sitemaps)
        seen: set[str] = set()
        fetched = 0
        while queue and fetched < MAX_SITEMAP_FILES:
            url = queue.pop(0)
            if url in seen:
                continue
            seen.add(url)
            try:
                same_host = host_key(url) == host
            except URLError:
                same_host = False
            if not same_host:  # fetching it now would talk to another host without its lease
                self.counters.dropped["sitemap/other-host"] += 1
                continue
            wait = last_end + delay - self.clock()
            if wait > 0 and not await self._pause(wait):
                break
            if self._stop.is_set() or self.clock() > batch.expires_at - self._safety:
                break
            result = await self._fetch_aux(FetchRequest(url))
            last_end = self.clock()
            fetched += 1
            self._record_aux(result, "sitemap")
            if result.status != 200:
                continue
            found = parse_sitemap(result.body, url)
            queue.extend(found.sitemaps)
            self._route(url, [(u, "sitemap") for u in found.urls], depth, out)
        return last_end

    async def _ip_of(self, host: str) -> str:
        """The address whose per-IP gate covers `host`: resolved (and cached by the resolver)
        before the gate, so two names of one server share it; the host key itself when the
        name does not resolve (its fetches then fail with the DNS error)."""
        name, port = split_host_key(host)  # not partition(":"): `[::1]:8080` has three
        ip = self.ip_of(name)
        if ip is None and self.resolve is not None:
            try:
                await self.resolve(name, port or 80)
            except ResolveError:
                return host
            ip = self.ip_of(name)
        return ip or host

    def _delay(self, policy: RobotsPolicy | None) -> float:
        """The gap between two requests of a host (the frontier's `host_delay`)."""
        crawl_delay = None if policy is None else policy.crawl_delay
        pol = self.settings.politeness
        return host_delay(pol.delay, crawl_delay, pol.max_crawl_delay)

    async def _robots_policy(
        self, host: str, batch: HostBatch
    ) -> tuple[RobotsPolicy | None, bool]:
        """The host's policy (None when robots are ignored), and whether robots.txt was
        fetched for it now (one lookup of the cache and store, not one here and one before)."""
        if not self.settings.politeness.obey_robots:
            return None, False
        now = self.clock()
        policy = await self._off_loop(self.robots.get, host, now)
        if policy is not None:
            return policy, False
        url = robots_url(batch.urls[0].url) if batch.urls else f"http://{host}/robots.txt"
        status: int | None = None
        body: bytes | None = None
        error: str | None = None
        final = url
        delay = self.settings.politeness.delay
        for hop in range(MAX_ROBOTS_REDIRECTS + 1):
            # a redirect hop is a request like any other: the crawl's delay before it (the
            # host's Crawl-delay is in the file at the end of the chain, not known yet); a
            # stop meanwhile stores no answer and the batch's URLs go back
            if hop and delay > 0 and not await self._pause(delay):
                raise _Abandoned
            result = await self._fetch_aux(FetchRequest(final))
            self._record_aux(result, "robots")
            status, body, error = result.status, result.body, result.error
            if status in REDIRECTS and result.header("location"):
                nxt = LinkResolver(final).resolve(result.header("location") or "")
                if nxt is None:
                    status = None
                    break
                final = nxt
                continue
            break
        # more than 5 redirects leaves the last 3xx status: "unavailable", allow all (RFC 9309)
        # (stored before the batch completes: the host's next lease, by any worker, reads it)
        record = RobotsRecord.of(status, body, final, self.clock(), error)
        policy = await self._off_loop(self.robots.put, host, record)
        if policy.crawl_delay:
            await self._in_thread(self.frontier.set_host_delay, host, policy.crawl_delay)
        return policy, True

    # ------------------------------------------------------------------ recording
    def _record_checked(self, result: FetchResult, leased: LeasedURL) -> tuple[Verdict, str | None]:
        """`_record` of a page whose payload was checked: its claim made once it is written
        (`IdenticalPayloads.recorded`), dropped when a sink fails."""
        payloads = self.payloads
        assert payloads is not None
        try:
            outcome = self._record(result, leased.depth, leased.parent, leased.attempts)
        except BaseException:
            payloads.forget(result)
            raise
        payloads.recorded(result)
        return outcome

    def _record(
        self, result: FetchResult, depth: int, parent: str | None, attempts: int
    ) -> tuple[Verdict, str | None]:
        """Write the exchange to the sinks and classify it."""
        c = self.counters
        c.requests += 1
        if result.status is None:
            key = result.error or "fetch/error/unknown"
            c.errors[key] += 1
            retry = attempts + 1 < self.settings.frontier.max_attempts
            verdict = Verdict.RETRY if retry else Verdict.FAILED
            if key == ERROR_TOO_SLOW:  # a server that trickles once trickles again: each try
                verdict = Verdict.FAILED  # would hold the host and its IP low_speed_time more
            c.outcomes[key] += 1
            self.sinks.log(result, depth=depth, parent=parent, outcome=key)
            return verdict, key
        c.statuses[result.status] += 1
        c.bytes += result.raw_body_len
        c.wire_in += len(result.response_head) + result.raw_body_len
        c.wire_out += len(result.request_head)
        if result.not_html:
            self._count_not_html(result)
        self.sinks.exchange(result)
        if result.status in RETRY_STATUSES:
            key = f"fetch/status/{result.status}"
            c.outcomes[key] += 1
            self.sinks.log(result, depth=depth, parent=parent, outcome=key)
            return Verdict.RETRY, key
        c.pages += 1
        outcome = "ok" if result.status < 400 else f"fetch/status/{result.status}"
        if result.status == 304:  # a conditional GET (--recrawl) found the page unchanged
            outcome = NOT_MODIFIED_OUTCOME
        if result.truncated and outcome == "ok":
            outcome = NOT_HTML_OUTCOME if result.not_html else "ok/truncated"
        if result.error:  # e.g. a body that failed to decode
            c.errors[result.error] += 1
            outcome = result.error
        c.outcomes[outcome] += 1
        dup = None
        if self.near_dups is not None and outcome == "ok" and result.status == 200:
            dup = self._near_dup(result)
        self.sinks.log(result, depth=depth, parent=parent, outcome=outcome, dup=dup)
        return Verdict.DONE, None if outcome.startswith("ok") else outcome

    def _near_dup(self, result: FetchResult) -> tuple[str, str] | None:
        """("near", URL of the page crawled before) when the HTML page `result` is a
        near-duplicate of it, else None; the parse is kept for `_links`."""
        if not is_html(result.header("content-type"), result.body):
            return None
        page = parse_html(result.body, result.url, _headers(result), self.parse_options)
        self._parsed = (result, page, False)
        if page.simhash is None:
            return None
        assert self.near_dups is not None
        self.counters.fingerprinted += 1
        like = self.near_dups.match(page.simhash, result.url)
        if like is None:
            return None
        self.counters.near_dups += 1
        self._parsed = (result, page, True)
        return ("near", like)

    def _count_not_html(self, result: FetchResult) -> None:
        """A body stopped after its head (not HTML): the bytes not read, when its
        Content-Length says how many."""
        c = self.counters
        c.not_html += 1
        length = result.header("content-length")
        if length is not None and length.isdigit():
            c.not_html_saved += max(0, int(length) - result.raw_body_len)
        else:
            c.not_html_unknown += 1

    def _record_aux(self, result: FetchResult, what: str) -> None:
        c = self.counters
        c.requests += 1
        if result.status is None:
            c.errors[f"{what}/{result.error or 'fetch/error/unknown'}"] += 1
        else:
            c.statuses[result.status] += 1
            c.robots_sitemap_statuses[f"{what}/{result.status}"] += 1
            self.sinks.exchange(result)
        c.outcomes[what] += 1
        self.sinks.log(result, depth=-1, parent=None, outcome=f"{what}")

    def _links(
        self, result: FetchResult, depth: int, out: list[Discovered | Outlinks]
    ) -> list[tuple[str, str]]:
        """Append the discovered URLs (scope-checked, not yet sent by this worker) of a
        response to `out`, and record its graph edges; returns them."""
        url = result.url
        if result.status in REDIRECTS:
            loc = result.header("location")
            strip = self.settings.links.strip_session_ids
            target = LinkResolver(url, strip_session_ids=strip).resolve(loc) if loc else None
            if target and target != url:
                return self._route(url, [(target, "redirect")], depth, out)
            return []
        if result.status == 304:  # not modified, no body: the old crawl's out-links
            if self.revalidate is not None:
                return self._route(url, self.revalidate.links(url), depth, out)
            return []
        # the fetcher's rule for html_only: the Content-Type, else the first bytes sniffed
        if result.status != 200 or not is_html(result.header("content-type"), result.body):
            return []
        parsed, self._parsed = self._parsed, None
        expand = True
        if parsed is not None and parsed[0] is result:
            page = parsed[1]
            # a near-duplicate of a page crawled before: its links are that page's, or a
            # trap's next step (docs/crawler.md, "Traps"); edges kept, URLs not sent
            expand = self._expand_near_dups or not parsed[2]
        else:
            page = parse_html(result.body, url, _headers(result), self.parse_options)
        links: Sequence[tuple[str, str]] = page.links  # (ExtractedLinks: (url, kind) pairs)
        if self.follow is not None:
            links = self.follow(result, depth, page)
        return self._route(url, links, depth, out, expand=expand)

    def _route(
        self,
        src: str,
        links: Sequence[tuple[str, str]],
        depth: int,
        out: list[Discovered | Outlinks],
        *,
        expand: bool = True,
    ) -> list[tuple[str, str]]:
        """Scope-check the links of `src` (found at `depth`), write their graph edges and
        append the URLs this worker has not sent to the frontier yet to `out` (not with
        `expand` False: the edges only). Returns the edges written.

        Most links of a crawl point to URLs met before (95 % on the simulated web), so what
        depends on the URL alone (host key, fingerprint, scope verdict) is memoised, and a set
        of fingerprints already handed to the frontier keeps repeats off its path: the
        frontier dedupes them anyway (without a max_depth the first depth seen wins there
        too), so this changes no result. Both are cleared when full, which only costs
        recomputation.

        With a max_depth and a frontier that relaxes depths for it (its options say so;
        `runner.worker` and the cluster worker configure it from the same settings) the
        frontier keeps depths the shortest path (docs/crawler/frontier.md): links beyond
        max_depth go to it too (parked there, not dropped here), and every link's edge must
        reach it, since the page may be lowered later. A link goes as a `Discovered` (with
        the page's fingerprint and the edge's delta) when it is new to this worker or
        shallower than it put before; the repeats, which the frontier already has at a
        depth no greater, go as the page's one `Outlinks` record, edges only (but for a URL
        put at a depth <= the edge's delta, which no depth of this page can lower). Sending every
        link as a `Discovered` cost ~30 % more CPU a page on the benchmark web
        (bench/README.md)."""
        max_depth = self.settings.max_depth
        relax = self._relax_depths
        dropped = self.counters.dropped
        query_traps = self.query_traps if self.query_traps.enabled else None
        memo = self._memo
        sent = self._sent
        sent_depth = self._sent_depth
        if len(memo) > ROUTE_MEMO_MAX:
            memo.clear()
        if len(sent) > SENT_SET_MAX:
            sent.clear()
        edges: list[tuple[str, str]] = []
        seen = {src}
        src_fp: int | None = None
        kid_fps: list[int] = []  # the repeats' edges (relax only)
        kid_hosts: list[str] = []
        kid_deltas: list[int] = []
        for dst, kind in links:
            if dst in seen:
                continue
            seen.add(dst)
            info = memo.get(dst)
            if info is None:
                host = host_key(dst)
                info = memo[dst] = (host, fingerprint(dst), self.scope.reject_url(dst, host))
            host, fp, reason = info
            if (
                reason is None
                and query_traps is not None
                and fp not in (sent_depth if relax else sent)
            ):
                reason = query_traps.admit(dst)  # stateful: counts the path's queries
            if reason is not None:
                dropped[reason] += 1
                continue
            # the edge is part of the web graph even when the crawl goes no deeper: the page
            # may be reached by a shorter path, or stay a dangling node
            edges.append((dst, kind if kind in _EDGE_KINDS else "link"))
            if not expand:
                continue
            d = depth if kind == "canonical" or kind == "redirect" else depth + 1
            if relax and max_depth is not None:
                if d > max_depth:
                    dropped["scope/depth"] += 1
                before = sent_depth.get(fp)
                if before is not None and before <= d:  # the frontier has it, no deeper
                    if before > d - depth:  # (else no depth of this page can lower it)
                        kid_fps.append(fp)
                        kid_hosts.append(host)
                        kid_deltas.append(d - depth)
                    continue
                if src_fp is None:
                    src_fp = fingerprint(src)
                out.append(Discovered(dst, host, d, fp, d, src, src_fp, d - depth))
                continue
            if max_depth is not None and d > max_depth:
                dropped["scope/depth"] += 1
                continue
            if fp in sent:
                continue
            sent.add(fp)
            out.append(Discovered(dst, host, d, fp, d, src))
        if kid_fps:
            out.append(
                Outlinks(
                    src, fingerprint(src) if src_fp is None else src_fp, depth,
                    kid_fps, kid_hosts, kid_deltas,
                )
            )
        if edges:
            self.sinks.edges(src, edges)
        return edges

    def _note_sent(self, items: list[Discovered | Outlinks]) -> None:
        """Remember the depths of URLs put (only once the put returned: a batch still being
        fetched may have offered a URL that another batch, settled first, would otherwise
        send as an edge only, to a frontier that does not know it yet)."""
        sent = self._sent_depth
        if len(sent) > SENT_SET_MAX:
            sent.clear()
        for it in items:
            if type(it) is Discovered:
                before = sent.get(it.fp)
                if before is None or it.depth < before:
                    sent[it.fp] = it.depth


class _LeaseLost(Exception):
    """A batch's lease ended (or was refused an extension), or a stop came, while a request
    waited for the host's delay: the request is not sent."""


class _Abandoned(Exception):
    """A stop came while robots.txt or a sitemap was being fetched (or waited for): nothing
    of it is stored, and the batch's URLs go back unfetched."""


def _wake(pause: asyncio.Future[None]) -> None:
    if not pause.done():
        pause.set_result(None)


def _abandoned_here(crawler: Crawler, fut: asyncio.Future[FetchResult]) -> bool:
    """Whether a CancelledError met awaiting `fut` is `abandon_in_flight()` cancelling the
    request (to be handled), not the awaiting task being cancelled (to be propagated)."""
    task = asyncio.current_task()
    return crawler._abandoned and fut.cancelled() and (task is None or not task.cancelling())


class _LeaseKeeper:
    """The end of a batch's lease (`end`), extended by a timer as well as between requests:
    a response may take up to total_timeout (120 s by default, as long as the default lease),
    and a lease that ended under it had its completion refused and its URLs leased again —
    a trickling page was fetched 120 s at a time, again and again, without end. The timer
    fires when `Crawler._lease_end` would extend (one timer per batch, not per request)."""

    __slots__ = (
        "_batch", "_cancelled", "_crawler", "_extending", "_timer", "current", "end",
        "giving_back", "left", "pause",
    )  # fmt: skip

    @property
    def host(self) -> str:
        return self._batch.host

    @property
    def token(self) -> str:
        return self._batch.token

    @property
    def backlog(self) -> int:
        """The host's URLs queued beyond this batch when it was leased."""
        return self._batch.backlog

    def __init__(self, crawler: Crawler, batch: HostBatch, end: float) -> None:
        self._crawler = crawler
        self._batch = batch
        self.end = end
        # the batch's request in flight (or waiting for its delay): abandon_in_flight cancels it
        self.current: asyncio.Future[FetchResult] | None = None
        self._timer: asyncio.TimerHandle | None = None
        # the extension under way (a frontier call, awaited on its I/O thread for Redis)
        # (held here: the loop keeps only a weak reference to a task)
        self._extending: asyncio.Task[None] | None = None
        self._cancelled = False
        #: URLs of the batch not requested yet (set by the batch as it goes)
        self.left = len(batch.urls)
        #: the host's delay being waited out before the next request, if it is
        self.pause: asyncio.Future[None] | None = None
        #: the batch is given back (its worker is over its share): no request more
        self.giving_back = False
        self._arm()

    def give_back(self) -> None:
        """End the batch early: no request after the one in flight; a wait for the host's
        delay ends now (that request is not sent)."""
        self.giving_back = True
        if self.pause is not None and not self.pause.done():
            self.pause.set_result(None)

    def _arm(self) -> None:
        c = self._crawler
        if self.end == -math.inf:  # refused: nothing more is fetched
            self._timer = None
            return
        at = self.end - c._safety - min(EXTEND_BEFORE_S, c.settings.frontier.lease_ttl / 2)
        wait = max(at - c.clock(), 0.0) + 0.001  # just past the point _lease_end extends at
        self._timer = asyncio.get_running_loop().call_later(wait, self._extend)

    def _extend(self) -> None:
        self._timer = None
        self._extending = asyncio.ensure_future(self._extend_now())

    async def _extend_now(self) -> None:
        c = self._crawler
        before = self.end
        lease_ttl = c.settings.frontier.lease_ttl
        due = c.clock() > before - c._safety - min(EXTEND_BEFORE_S, lease_ttl / 2)
        try:
            end = await c._lease_end(self._batch, before)
        except Exception:  # a storage error: the batch's own next call meets it and ends the
            return  # worker as usual (a task's exception would only be logged)
        if self._cancelled:  # the batch is over
            return
        # the batch may have extended the lease itself meanwhile; a refusal (-inf) stands
        self.end = end if end == -math.inf or self.end == -math.inf else max(self.end, end)
        if self.end > before or not due:  # (the frontier may not extend: then not again)
            self._arm()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # an extension under way finishes (its frontier call is made) but arms no timer
        self._cancelled = True


def _frontier_max_depth(frontier: object) -> int | None:
    """The max_depth a frontier relaxes depths for (its `options`, looking through wrappers'
    `inner`, as the cluster worker's); None when it does not (then the engine drops links
    beyond max_depth itself: a frontier without it would queue them)."""
    for _ in range(4):
        options = getattr(frontier, "options", None)
        if options is not None:
            depth = getattr(options, "max_depth", None)
            return depth if isinstance(depth, int) else None
        frontier = getattr(frontier, "inner", None)
        if frontier is None:
            break
    return None


def seed_frontier(
    frontier: Frontier, settings: CrawlSettings, urls: list[str] | None = None
) -> int:
    """Put the seeds (canonicalised; invalid ones skipped) in the frontier at depth 0."""
    items = []
    for u in settings.seeds if urls is None else urls:
        try:
            c = canonicalize(u, strip_session_ids=settings.links.strip_session_ids)
        except URLError:
            continue
        items.append(Discovered(url=c, host=host_key(c), depth=0, fp=fingerprint(c)))
    return frontier.put_discovered(items)


def _headers(result: FetchResult) -> dict[str, str]:
    """The response headers parse_html reads (Content-Type, X-Robots-Tag)."""
    out = {}
    ctype = result.header("content-type")
    if ctype is not None:
        out["content-type"] = ctype
    robots = result.header_all("x-robots-tag")
    if robots:  # several X-Robots-Tag headers combine, as for any list-valued header
        out["x-robots-tag"] = ", ".join(robots)
    return out


def _retry_after(result: FetchResult) -> float | None:
    value = result.header("retry-after") if result.status is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None

"""`RedisFrontier`: the `Frontier` contract (and `HostsView`) on Redis, one server or Redis
Cluster, over the key layout of `_keys` and the Lua scripts of `_scripts`.

The module stays whole, over a thousand lines: it is one class whose calls share its lock,
the index updates not yet sent and the leases it holds.
"""

from __future__ import annotations

import heapq
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, NamedTuple, TypeVar, Unpack, cast

import redis
import redis.cluster
import redis.exceptions

from ...partition import SHARDS, shard_of
from ...urls import URLError, host_key
from .._edges import relax_order
from .._hosts import top
from .._options import FrontierKnobs, FrontierOptions
from .._politeness import HostTiming, after_batch
from .._protocol import (
    Discovered,
    FrontierError,
    FrontierStats,
    FrontierStorageError,
    FrontierUnreachable,
    HostBatch,
    HostView,
    LeasedURL,
    Outcome,
    Outlinks,
    StaleLeaseError,
)
from .._settle import settle
from .._share import Share, lease_room
from .._share import hosts_over_share as over_share
from ._connect import _AUTH_ERRORS, RedisClient, _scan
from ._keys import (
    _EDGE,
    _LAYOUT,
    _LAYOUT_CHECK,
    _OWNER,
    _bitmap,
    _from_redis,
    _num,
    _s,
    _seen_member,
    _timing,
    _to_redis,
    crawl_prefix,
    index_prefix,
    shard_prefix,
)
from ._reads import host_names, read_hosts
from ._scripts import script_sources

__all__ = ["DeadOwners", "Partition", "RedisFrontier", "Share"]

#: partition(now) -> (shards this worker may lease now, or None for any; until when that holds)
Partition = Callable[[float], tuple[frozenset[int] | None, float]]
#: dead_owners() -> {worker id: the last incarnation known dead}: their leases are reclaimed
DeadOwners = Callable[[], Mapping[str, int]]
_RETRY_FOR: Final = 60.0  # seconds a call retries Redis connection errors before giving up
_SWEEP_EVERY: Final = 5.0  # seconds (frontier clock) between index rebuilds from the shards
_FLUSH_EVERY: Final = 0.05  # seconds (monotonic) index updates may wait for the next call
_PUT_PART: Final = 250  # URLs at most in one put call on one Redis (see _put_streamed)
_CLEARS_HELD: Final = 512  # lua/depth.lua's marks held before they are cleared
_T = TypeVar("_T")
_log = logging.getLogger(__name__)


class _Ask(NamedTuple):
    """What one `lease` asks of the shards (slots: URLs the page budget allows, or inf)."""

    now: float
    max_hosts: int
    per_host: int
    slots: float
    expires: float
    valid_until: float


@dataclass(slots=True)
class _Held:
    """What this client knows about a lease it handed out (saves a round trip on complete)."""

    shard: int
    host: str
    attempts: dict[int, int]
    timing: HostTiming
    valid_until: float


@dataclass(slots=True)
class _Pending:
    """Index updates not yet sent (sent with the next call to the crawl-wide index)."""

    hints: dict[int, tuple[int, str, str]]  # shard -> (version, score, host)
    exp_add: dict[str, float]
    exp_del: set[str]
    activate: list[int]  # shards used for the first time (the sweep's list)
    pub: int = 0


class RedisFrontier:
    """`Frontier` on Redis; same knobs as `SqliteFrontier` plus the cluster's.

    `crawl` names the crawl (its keys start `gs:<crawl>:`). `clock` defaults to the Redis
    server's clock (every worker of a crawl shares it). `partition(now)` restricts leases to
    the shards a partition strategy gives this worker and caps their expiry (phase ends).
    `seen` is the crawl's seen-set (fixed by its first frontier): "exact" keeps each shard's
    fingerprints in compact integer sets of 200-400 (linear hashing splits one as the shard
    grows; lua/put.lua), ~9 bytes a URL, no sizing needed; "bloom" a scalable Bloom filter
    per shard (~1.5-2.5 bytes a URL), whose false positives are new URLs never fetched:
    `statistics().seen_false_positives` is their expected number. `reclaim_grace`: a lease
    is reclaimed only once it has been expired that long, so its holder's late `complete`
    (the last response processed after the lease's end: its requests all began before it)
    still counts instead of the next worker fetching those pages again; 0 (the contract's
    default) reclaims at expiry.

    Cluster workers also give `owner` (their worker id) and `dead_owners`: lease tokens then
    name their owner and its `incarnation` (`<shard>-<owner>_<incarnation>.<random>`), and
    the leases of owners that `dead_owners()` reports (a worker whose heartbeat stopped:
    cluster.members) are reclaimed as soon as they appear there, on the next `lease`, not
    when they expire; the periodic sweep reclaims them too. A worker that was only frozen
    comes back under a new incarnation: the leases of its old one were reclaimed (their
    completion is refused as stale), those of the new one are not. `share()` is the
    fraction of the hosts in play (leased or ready) this worker may hold at once (None: no
    limit): with few hosts and several idle workers one worker does not take them all.
    `give_up()` True (a worker stopping whose Redis is down: cluster/_redis.py `Patience`)
    ends the wait for an unreachable Redis at its next error: FrontierUnreachable.
    """

    def __init__(
        self,
        client: RedisClient,
        crawl: str = "default",
        *,
        clock: Callable[[], float] | None = None,
        partition: Partition | None = None,
        seen: str = "exact",
        retry_for: float = _RETRY_FOR,
        reclaim_grace: float = 0.0,
        owner: str = "",
        dead_owners: DeadOwners | None = None,
        share: Share | None = None,
        give_up: Callable[[], bool] | None = None,
        replica_acks: int = 0,
        replica_ack_timeout: float = 1.0,
        **knobs: Unpack[FrontierKnobs],
    ) -> None:
        if not crawl or any(c in crawl for c in "{}: \t\r\n"):
            raise ValueError(f"a crawl name needs no braces, colons or spaces: {crawl!r}")
        self.options = FrontierOptions.of(**knobs)
        self.client = client
        self.crawl = crawl
        self.cluster = isinstance(client, redis.cluster.RedisCluster)
        self._prefix = crawl_prefix(crawl)
        self._g = index_prefix(crawl)
        self._partition = partition
        self._retry_for = retry_for
        if not reclaim_grace >= 0:
            raise ValueError(f"reclaim_grace must be >= 0, not {reclaim_grace!r}")
        self._grace = reclaim_grace
        if owner and not _OWNER.fullmatch(owner):
            raise ValueError(f"an owner is letters and digits, not {owner!r}")
        self.owner = owner
        #: the owner's incarnation, in its tokens (a worker back after a freeze takes a new
        #: one: the heartbeat's, cluster.members)
        self.incarnation = 0
        self._dead_owners = dead_owners
        self._reclaimed_owners: dict[str, int] = {}  # dead owners whose leases were reclaimed
        self._share = share
        self._give_up = give_up
        if replica_acks < 0 or not replica_ack_timeout > 0:
            raise ValueError("replica_acks must be >= 0 and replica_ack_timeout > 0")
        #: replicas that must acknowledge a completion (WAIT) before `complete` returns;
        #: 0: none (one Redis, or Redis Cluster, where WAIT is not sent)
        self.replica_acks = 0 if isinstance(client, redis.cluster.RedisCluster) else replica_acks
        self._ack_ms = max(1, round(replica_ack_timeout * 1000))
        #: completions WAITed for, and those fewer replicas acknowledged within the time-out
        self.replica_waits = 0
        self.replica_shortfalls = 0
        self._short_of_replicas = False
        # (leases out, shards with a ready host, shards with a host with URLs queued) at the
        # last index call: the hosts in play
        self._in_play: tuple[int, int, int] | None = None
        self._sharing = False  # the last lease was capped by a share below 1
        self._lock = threading.RLock()
        self._closed = False
        self._held: dict[str, _Held] = {}
        self._pending = _Pending({}, {}, set(), [])
        self._next_sweep = -math.inf
        self._known_active: set[int] = set()
        self._pending_since: float | None = None
        # lua/depth.lua's marks to clear (shard -> 'q'|'w', fp, depth), sent in batches: a
        # mark left longer (or by a crash) only makes a later offer redo a step
        self._clears: dict[int, list[Any]] = {}
        self._n_clears = 0
        self._sources = script_sources()
        self._sha: dict[str, str] = {}
        self._call(self._load_scripts)
        if seen not in ("exact", "bloom"):
            raise ValueError(f"seen must be 'exact' or 'bloom', not {seen!r}")
        # the layout the crawl's keys were written in: a crawl of another layout (an older
        # gossamer: no `layout` key, but a seen-set kind) is refused, not misread
        layout = _s(self._call(lambda: self.client.eval(_LAYOUT_CHECK, 1, self._g + "x", _LAYOUT)))
        if layout != _LAYOUT:
            raise FrontierError(
                f"crawl {crawl!r} was stored by another version of gossamer (frontier layout"
                f" {layout}; this one reads {_LAYOUT}): finish it with that version, or start"
                " a new crawl"
            )
        # the seen-set's kind is the crawl's (its first frontier chose it): every worker
        # must dedupe alike
        key = self._g + "seen"
        self._call(lambda: self.client.set(key, seen, nx=True))
        stored = _s(self._call(lambda: self.client.get(key)) or seen.encode())
        if stored != seen:
            raise FrontierError(f"crawl {crawl!r} has a {stored} seen-set, not {seen}")
        self.seen = seen
        self._offset = 0.0
        if clock is None:
            self._offset = self.server_time() - time.time()
            self._clock: Callable[[], float] = lambda: time.time() + self._offset
        else:
            self._clock = clock

    # ------------------------------------------------------------------ plumbing
    def clock(self) -> float:
        """The frontier's clock (the Redis server's unless one was injected)."""
        return self._clock()

    def server_time(self) -> float:
        """The Redis server's clock (TIME), in seconds."""

        def ask() -> float:
            sec, usec = self.client.time()
            return sec + usec / 1e6

        return self._call(ask)

    def _load_scripts(self) -> None:
        for name, src in self._sources.items():
            self._sha[name] = self.client.script_load(src)

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run `fn`, retrying Redis connection errors (with back-off, for `retry_for`
        seconds: a restarting Redis is waited for) and reloading scripts a restarted
        server forgot. Other Redis errors become FrontierStorageError."""
        deadline = time.monotonic() + self._retry_for
        pause = 0.05
        while True:
            try:
                return fn()
            except redis.exceptions.NoScriptError:
                self._load_scripts()
            except _AUTH_ERRORS as exc:  # ConnectionErrors to redis-py, but waiting cannot help
                raise FrontierStorageError(0, f"Redis refused the credentials: {exc}") from exc
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                if self._give_up is not None and self._give_up():
                    raise FrontierUnreachable(0, f"Redis unreachable: {exc}") from exc
                if time.monotonic() >= deadline:
                    raise FrontierStorageError(
                        0, f"Redis unreachable for {self._retry_for:.0f} s: {exc}"
                    ) from exc
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
                try:
                    self._load_scripts()
                except redis.exceptions.RedisError:
                    pass
            except redis.exceptions.ResponseError as exc:
                if "NOSCRIPT" in str(exc):
                    self._load_scripts()
                    continue
                raise FrontierStorageError(0, f"Redis refused a frontier call: {exc}") from exc
            except redis.exceptions.RedisError as exc:
                raise FrontierStorageError(0, f"Redis failed a frontier call: {exc}") from exc

    def _shard_prefix(self, shard: int) -> str:
        return shard_prefix(self.crawl, shard)

    def _eval(self, name: str, shard: int, args: Sequence[Any], pipe: Any = None) -> Any:
        prefix = self._shard_prefix(shard)
        target = self.client if pipe is None else pipe
        if name == "put":  # put takes its shards' prefixes in its arguments (`shard`: the first)
            return target.evalsha(self._sha[name], 1, prefix + "n", *args)
        return target.evalsha(self._sha[name], 1, prefix + "n", prefix, *args)

    def _acknowledged(self, name: str, shard: int, args: Sequence[Any]) -> Any:
        """One shard call followed by `WAIT replica_acks timeout` on the same connection
        (one round trip): the call, and every write the master ran before it, is on that
        many replicas when this returns — or the time-out passed (counted; the write
        stands on the master)."""

        # short of replicas (a failover left none): wait 1 ms, not the time-out, until
        # they are back, or every completion would stall the worker for the time-out
        wait_ms = 1 if self._short_of_replicas else self._ack_ms

        def run() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            self._eval(name, shard, args, pipe)
            pipe.execute_command("WAIT", self.replica_acks, wait_ms)
            return cast(list[Any], pipe.execute())

        reply, acks = self._call(run)
        self.replica_waits += 1
        short = int(acks) < self.replica_acks
        if short:
            self.replica_shortfalls += 1
        if short and not self._short_of_replicas:
            _log.warning(
                f"only {int(acks)} of {self.replica_acks} Redis replicas acknowledged a "
                f"completion within {self._ack_ms} ms: a failover now may lose it; "
                "completions wait for them again once they are back"
            )
        elif not short and self._short_of_replicas:
            _log.info(f"{self.replica_acks} Redis replicas acknowledge completions again")
        self._short_of_replicas = short
        return reply

    def _shard_many(self, calls: Sequence[tuple[str, int, Sequence[Any]]]) -> list[Any]:
        """Several shard calls in one round trip (a non-transactional pipeline)."""
        if not calls:
            return []
        if len(calls) == 1:
            name, shard, args = calls[0]
            return [self._call(lambda: self._eval(name, shard, args))]

        def run() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for name, shard, args in calls:
                self._eval(name, shard, args, pipe)
            return cast(list[Any], pipe.execute())

        def run_cluster() -> list[Any]:
            # redis-py's cluster pipeline refuses EVALSHA: one plain pipeline per node
            # (the shard's slot tells which); a slot that moved answers MOVED, and the
            # calls then go one by one through the cluster client, which follows it.
            client = cast(redis.cluster.RedisCluster, self.client)
            by_node: dict[str, tuple[Any, list[int]]] = {}
            for i, (_, shard, _) in enumerate(calls):
                node = client.get_node_from_key(self._shard_prefix(shard) + "n")  # type: ignore[no-untyped-call]
                entry = by_node.setdefault(node.name, (node, []))
                entry[1].append(i)
            out: list[Any] = [None] * len(calls)
            for node, idx in by_node.values():
                conn = node.redis_connection or client.get_redis_connection(node)
                pipe = conn.pipeline(transaction=False)
                for i in idx:
                    name, shard, args = calls[i]
                    self._eval(name, shard, args, pipe)
                try:
                    replies = pipe.execute()
                except redis.exceptions.ResponseError as exc:
                    if "MOVED" not in str(exc) and "ASK" not in str(exc):
                        raise
                    replies = [self._eval(*calls[i]) for i in idx]
                for i, r in zip(idx, replies, strict=True):
                    out[i] = r
            return out

        return self._call(run_cluster if self.cluster else run)

    def _global(
        self,
        now: float,
        *,
        reserve: int = -1,
        allowed: frozenset[int] | None = None,
        candidates: int = 0,
        expired: int = 0,
    ) -> tuple[int, list[tuple[str, int, float]], list[str]]:
        """One call to the crawl-wide index: send the pending updates, reserve max-pages
        slots, return the best `candidates` shards (host, shard, score) and expired leases."""
        p = self._pending
        args: list[Any] = [
            self._g,
            _num(now - self._grace),  # leases expired before this may be reclaimed
            p.pub,
            reserve,
            self.options.max_pages if self.options.max_pages is not None else 0,
            "" if allowed is None else _bitmap(allowed),
            candidates,
            expired,
            len(p.hints),
            len(p.exp_add),
            len(p.exp_del),
            len(p.activate),
            _num(now),
        ]
        for shard, (ver, score, host) in p.hints.items():
            args += [shard, ver, score, host]
        for key, exp in p.exp_add.items():
            args += [key, _num(exp)]
        args += p.exp_del
        args += p.activate

        def run() -> list[Any]:
            sha = self._sha["global"]
            return cast(list[Any], self.client.evalsha(sha, 1, self._g + "hint", *args))

        reply = self._call(run)
        self._known_active.update(p.activate)
        self._pending = _Pending({}, {}, set(), [])
        granted = int(reply[0])
        self._in_play = (int(reply[1]), int(reply[2]), int(reply[3]))
        sep = reply.index(b"|")
        cands = [(_s(reply[i]), int(reply[i + 1]), float(reply[i + 2])) for i in range(4, sep, 3)]
        return granted, cands, [_s(x) for x in reply[sep + 1 :]]

    def _maybe_flush(self, now: float) -> None:
        """Send pending index updates at most `_FLUSH_EVERY` s after the first was queued
        (other workers see new work soon; a busy worker pays one round trip per interval)."""
        p = self._pending
        if not (p.hints or p.exp_add or p.exp_del or p.pub or p.activate):
            self._pending_since = None
            return
        t = time.monotonic()
        if self._pending_since is None:
            self._pending_since = t
        elif t - self._pending_since >= _FLUSH_EVERY:
            self._global(now)
            self._pending_since = None

    def _hint(self, shard: int, reply: Any) -> None:
        if not reply:  # the shard's best host cannot have changed
            return
        ver, score, host = int(reply[0]), _s(reply[1]), _s(reply[2])
        old = self._pending.hints.get(shard)
        if old is None or old[0] < ver:
            self._pending.hints[shard] = (ver, score, host)

    def _check_open(self) -> None:
        if self._closed:
            raise FrontierError("frontier is closed")

    # ------------------------------------------------------------------ the contract
    def put_discovered(self, items: Sequence[Discovered | Outlinks]) -> int:
        """See `Frontier.put_discovered`."""
        with self._lock:
            self._check_open()
            if not items:
                return 0
            if self.options.max_depth is not None:
                return self._put_relaxing(items, self.options.max_depth)
            return self._put(cast(Sequence[Discovered], items))  # (Outlinks: max_depth only)

    def _put_relaxing(self, items: Sequence[Discovered | Outlinks], max_depth: int) -> int:
        """put_discovered with a max_depth: the shortest-path relaxation (lua/depth.lua).

        A child may live in another shard than its parent, and a Redis Cluster call works on
        one shard, so the client runs the worklist: (1) each parent's shard records the edges
        and answers the parent's depth, which caps its children's; (2) rounds of `relax`
        calls, one per shard of the round's URLs, answer the URLs to queue (new within
        max_depth, or unparked) and the known URLs whose depth fell, with their recorded
        children, which make the next round. Each step is atomic in its shard and depths only
        fall, so concurrent workers' relaxations interleave safely: an edge recorded after
        its parent was lowered is capped by the depth step (1) reads."""
        now = self._clock()
        offers = [it for it in items if not isinstance(it, Outlinks)]
        pages = [it for it in items if isinstance(it, Outlinks)]
        self._activate({shard_of(it.host) for it in offers}, now)
        # (1) the edges, in their parents' shards; each parent's depth caps its children's
        shards: dict[str, int] = {}  # host -> shard, for this call

        def shard_of_host(host: str) -> int:
            shard = shards.get(host)
            if shard is None:
                shard = shards[host] = shard_of(host)
            return shard

        # fp -> (url, packed edges), in the order of the items (the order children with
        # one delta are relaxed in: relax_order)
        by_parent: dict[int, tuple[str, list[bytes]]] = {}
        # (parent, child) -> the smallest delta this call recorded: a repeat is not recorded
        # again, a smaller delta is (a link and a redirect to one URL: relaxed by the latter)
        kids_seen: dict[tuple[int, int], int] = {}
        pack = _EDGE.pack
        for it in items:
            if isinstance(it, Outlinks):
                recs = [
                    pack(fp, shard_of_host(host), delta)
                    for fp, host, delta in zip(it.fps, it.hosts, it.deltas, strict=True)
                ]
                entry = by_parent.get(it.fp)
                if entry is None:
                    by_parent[it.fp] = (it.url, recs)
                else:
                    entry[1].extend(recs)
            elif it.parent_fp is not None and it.parent is not None:
                if kids_seen.get((it.parent_fp, it.fp), it.delta + 1) <= it.delta:
                    continue
                kids_seen[(it.parent_fp, it.fp)] = it.delta
                rec = pack(it.fp, shard_of_host(it.host), it.delta)
                entry = by_parent.get(it.parent_fp)
                if entry is None:
                    by_parent[it.parent_fp] = (it.parent, [rec])
                else:
                    entry[1].append(rec)
        cap: dict[int, int] = {}
        if by_parent:
            by_shard: dict[int, list[int]] = {}
            for pfp, (url, _) in by_parent.items():
                try:
                    shard = shard_of_host(host_key(url))
                except URLError:
                    continue
                by_shard.setdefault(shard, []).append(pfp)
            calls = []
            for shard, pfps in by_shard.items():
                args: list[Any] = ["edges", len(pfps)]
                for pfp in pfps:
                    args += [_to_redis(pfp), b"".join(by_parent[pfp][1])]
                calls.append(("depth", shard, args))
            for (_, _, args), reply in zip(calls, self._shard_many(calls), strict=True):
                for k, d in enumerate(reply):
                    if d != b"":
                        cap[_from_redis(args[2 + 2 * k])] = int(d)
        # (2) the relaxation rounds: the offers first, then the children of the pages
        # lowered while they were fetched (an offer in this call may be what makes them known)
        work: list[tuple[int, int, Discovered | None, int]] = []  # fp, depth, offer, shard
        for offer in offers:
            d = offer.depth
            if offer.parent_fp is not None and offer.parent_fp in cap:
                d = min(d, cap[offer.parent_fp] + offer.delta)
            work.append((offer.fp, d, offer, shard_of_host(offer.host)))
        later: list[tuple[int, int, Discovered | None, int]] = []
        for page in pages:
            now_at = cap.get(page.fp)
            if now_at is not None and now_at < page.depth:
                later += [
                    (fp, now_at + delta, None, shard_of_host(host))
                    for fp, host, delta in zip(page.fps, page.hosts, page.deltas, strict=True)
                ]
        if not work:
            work, later = later, []
        added = 0
        # the marks this call set (lua/depth.lua's uq and lw: shard, kind, fp, depth), cleared
        # once all is done: a replay of the same offers walks from them to what is left
        marks: list[tuple[int, str, bytes, int]] = []
        # (fp, depth) whose children this call relaxed: a URL answered as lowered again at
        # the same depth (an lw mark's replay) is expanded once per call — else a cycle of
        # edges adding no depth (a self-canonical page, a redirect loop) would replay forever
        expanded: set[tuple[bytes, int]] = set()
        while work:
            by_shard_work: dict[int, list[tuple[int, int, Discovered | None, int]]] = {}
            for w in work:
                by_shard_work.setdefault(w[3], []).append(w)
            self._activate(set(by_shard_work), now)
            calls = []
            for shard, ws in by_shard_work.items():
                for lo in range(0, len(ws), _PUT_PART):
                    args = ["relax", max_depth, 0]
                    for fp, d, offered, _ in ws[lo : lo + _PUT_PART]:
                        if offered is None:  # a recorded child: the shard knows it, or not
                            args += [_to_redis(fp), d, 0, 0, "", "", ""]
                        else:
                            up = "-" if offered.parent is None else "+" + offered.parent
                            args += [
                                _to_redis(fp), d, 1, offered.priority, offered.host, up, offered.url
                            ]
                    args[2] = (len(args) - 3) // 7
                    calls.append(("depth", shard, args))
            work = []
            accepted: list[Discovered] = []
            replies = self._shard_many(calls)
            for (_, shard, _), (acc, lowered) in zip(calls, replies, strict=True):
                for fp_raw, d, pr, host, parent, url in acc:
                    marks.append((shard, "q", fp_raw, int(d)))
                    accepted.append(
                        Discovered(
                            _s(url),
                            _s(host),
                            int(d),
                            _from_redis(fp_raw),
                            int(pr),
                            None if parent == b"-" else _s(parent[1:]),
                        )
                    )
                for fp_raw, d, children in lowered:
                    if (fp_raw, int(d)) in expanded:
                        continue
                    expanded.add((fp_raw, int(d)))
                    marks.append((shard, "w", fp_raw, int(d)))
                    # `ch` keeps every edge offered: one a child, smallest delta first
                    edges = list(_EDGE.iter_unpack(children))
                    child_shard = {cfp: cshard for cfp, cshard, _ in edges}
                    for cfp, delta in relax_order((cfp, delta) for cfp, _, delta in edges):
                        work.append((cfp, int(d) + delta, None, child_shard[cfp]))
            if accepted:
                added += self._put(accepted)
            work += later
            later = []
        for shard, kind, fp_raw, d in marks:
            self._clears.setdefault(shard, []).extend((kind, fp_raw, d))
        self._n_clears += len(marks)
        if self._n_clears >= _CLEARS_HELD:
            self._send_clears()
        return added

    def _send_clears(self) -> None:
        """Clear the marks held (lua/depth.lua's 'clear'), a call per shard in one round
        trip. Held for `_CLEARS_HELD` marks, not sent with each put: a second call would
        turn every relaxation round into a pipeline (+0.05 ms of client CPU a page, measured
        on bench_crawl.py --cluster 1), while a mark held a little longer only makes another
        worker's offer of that URL redo a step."""
        calls = [
            ("depth", shard, ["clear", len(marks) // 3, *marks])
            for shard, marks in self._clears.items()
        ]
        self._clears = {}
        self._n_clears = 0
        self._shard_many(calls)

    def _activate(self, shards: set[int], now: float) -> None:
        """Shards go into the index before their keys are written: a sweep finds them."""
        new = shards - self._known_active
        if new:
            self._pending.activate += new
            self._global(now)

    def _put(self, items: Sequence[Discovered]) -> int:
        """put_discovered's plain path: put.lua (dedupe, budget, queue)."""
        now = self._clock()
        budget = -1 if self.options.host_budget is None else self.options.host_budget
        head: list[Any] = [_num(now), budget, self.seen]
        shards = [shard_of(it.host) for it in items]
        self._activate(set(shards), now)
        if self.cluster:
            # a call per shard (a call's keys share a slot) and per _PUT_PART of its URLs
            # (Lua's unpack takes under 8000 values: a host's URLs go to RPUSH at once)
            by_shard: dict[int, list[int]] = {}
            for k, shard in enumerate(shards):
                by_shard.setdefault(shard, []).append(k)
            calls = []
            for shard, ks in by_shard.items():
                for lo in range(0, len(ks), _PUT_PART):
                    part = ks[lo : lo + _PUT_PART]
                    args = self._put_args([items[k] for k in part], [shard] * len(part))
                    calls.append(("put", shard, head + args[shard]))
            replies = self._shard_many(calls)
            groups = [([c[1]], r) for c, r in zip(calls, replies, strict=True)]
        else:
            groups = self._call(lambda: self._put_streamed(items, shards, head))
        added = 0
        for group, reply in groups:
            for shard, (n, hint) in zip(group, reply, strict=True):
                added += int(n)
                self._hint(shard, hint)
        self._maybe_flush(now)
        return added

    def _put_args(self, items: Sequence[Discovered], shards: Sequence[int]) -> dict[int, list[Any]]:
        """put.lua's arguments for `items` (in `shards`), by shard: prefix, number of hosts,
        then per host: host, n, and n URLs of 4 fields (6 with a Bloom seen-set)."""
        by_shard: dict[int, dict[str, list[Any]]] = {}
        bloom = self.seen == "bloom"
        for it, shard in zip(items, shards, strict=True):
            hosts = by_shard.get(shard)
            if hosts is None:
                hosts = by_shard[shard] = {}
            urls = hosts.get(it.host)
            if urls is None:
                urls = hosts[it.host] = []
            fp = _to_redis(it.fp)
            parent = "-" if it.parent is None else "+" + it.parent
            # the seen-set integer, fp's low 15 bits (the seen-set bucket), priority, the
            # queue member (fp \0 attempts \0 depth \0 parent \0 url)
            member = f"{fp}\x000\x00{it.depth}\x00{parent}\x00{it.url}"
            urls += (_seen_member(it.fp), it.fp & 0x7FFF, it.priority, member)
            if bloom:  # the Bloom positions' two hashes: the fingerprint's halves
                urls += (it.fp & 0xFFFFFFFF, (it.fp >> 32) | 1)
        out: dict[int, list[Any]] = {}
        per = 6 if bloom else 4
        for shard, hosts in by_shard.items():
            args = out[shard] = [self._shard_prefix(shard), len(hosts)]
            for host, urls in hosts.items():
                args += (host, len(urls) // per, *urls)
        return out

    def _put_streamed(
        self, items: Sequence[Discovered], shards: Sequence[int], head: list[Any]
    ) -> list[tuple[list[int], Any]]:
        """One Redis: put in parts of `_PUT_PART` URLs, each part one script call over its
        shards, sent as soon as it is built: the server runs a part while the next one is
        built and encoded (a shard's first commands in a call cost most, so a part is not
        smaller). Returns (the part's shards, its reply) per part."""
        client = cast(redis.Redis, self.client)
        pool = client.connection_pool
        conn = pool.get_connection()
        sha = self._sha["put"]
        sent: list[list[int]] = []
        try:
            for lo in range(0, len(items), _PUT_PART):
                part = self._put_args(items[lo : lo + _PUT_PART], shards[lo : lo + _PUT_PART])
                args = list(head)
                for a in part.values():
                    args += a
                first = next(iter(part))
                key = self._shard_prefix(first) + "n"
                conn.send_command("EVALSHA", sha, 1, key, *args)  # type: ignore[no-untyped-call]
                sent.append(list(part))
            parse = client.parse_response
            replies = [parse(conn, "EVALSHA") for _ in sent]  # type: ignore[no-untyped-call]
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]  # replies may be left unread
            raise
        finally:
            pool.release(conn)
        return list(zip(sent, replies, strict=True))

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        """See `Frontier.lease`. Hosts come from the shards the partition allows, best lease
        order first across shards; expiry is capped by the partition's `valid_until`."""
        if max_hosts < 0 or per_host < 0:
            raise ValueError("max_hosts and per_host must be >= 0")
        with self._lock:
            self._check_open()
            now = self._clock() if now is None else now
            if max_hosts == 0 or per_host == 0:
                return []
            allowed, valid_until = (None, math.inf)
            if self._partition is not None:
                allowed, valid_until = self._partition(now)
            expires = min(now + self.options.lease_ttl, valid_until)
            if expires <= now or (allowed is not None and not allowed):
                return []
            if now >= self._next_sweep:
                self._sweep(now)
            else:
                self._reclaim_dead(now)
            max_hosts = self._fair(max_hosts, now)
            if max_hosts <= 0:
                self._maybe_flush(now)
                return []
            limit = self.options.max_pages
            want = -1 if limit is None else max_hosts * per_host
            k = max_hosts + 1  # the best host of k shards holds the best max_hosts hosts
            granted, cands, expired = self._global(
                now, reserve=want, allowed=allowed, candidates=k, expired=64
            )
            if expired:
                self._reclaim_shards({int(e.split("|", 1)[0]) for e in expired}, now)
                self._pending.exp_del.update(expired)
                _, cands, _ = self._global(now, allowed=allowed, candidates=k)
            slots = math.inf if limit is None else granted
            lease_from = self._lease_shards if self.cluster else self._lease_many
            out = lease_from(cands, _Ask(now, max_hosts, per_host, slots, expires, valid_until))
            used = sum(len(b.urls) for b in out)
            if limit is not None and granted > used:
                self._pending.pub -= granted - used
                self._global(now)
            elif out and self._sharing:
                # the leases in the index at once: another worker's share counts them now,
                # not 50 ms later (when it could have taken a host of this one's share)
                self._global(now)
            else:
                self._maybe_flush(now)
            if self.options.max_depth is not None and out:
                out = self._current_depths(out)
            return out

    def _token_base(self, nbytes: int) -> str:
        """The random part of a lease token, after the owner and its incarnation if any."""
        if not self.owner:
            return secrets.token_hex(nbytes)
        return f"{self.owner}_{self.incarnation}.{secrets.token_hex(nbytes)}"

    def _dead(self) -> dict[str, int]:
        """The dead owners (`dead_owners()`), this one aside."""
        if self._dead_owners is None:
            return {}
        return {w: i for w, i in self._dead_owners().items() if w != self.owner}

    def _reclaim_dead(self, now: float) -> int:
        """Reclaim the leases of owners newly reported dead (each death once: an owner
        that comes back and dies again, under a later incarnation, is new again)."""
        dead = self._dead()
        new = {w: i for w, i in dead.items() if self._reclaimed_owners.get(w, -1) < i}
        self._reclaimed_owners = dead
        if not new:
            return 0
        n = self._reclaim_shards(self._active(), now, owners=new)
        self._global(now)  # the hosts are ready now: every worker sees them at once
        return n

    def _fair(self, max_hosts: int, now: float) -> int:
        """`max_hosts` capped by this worker's share of the hosts in play (`share()`): its
        leased hosts stay within ceil(share x (leases out + shards with a ready host)), at
        least one. The leased hosts of all workers plus the ready ones are shared out, so the
        caps of all workers add up to at least that: a ready host always fits under some
        worker's cap. With many hosts the cap is far above any worker's concurrency."""
        if self._share is None:
            return max_hosts
        share = self._share()
        self._sharing = share is not None and share < 1
        if share is None or share >= 1:
            return max_hosts
        if self._in_play is None:
            self._global(now)
        leases, ready, _ = self._in_play or (0, 0, 0)
        return lease_room(max_hosts, len(self._held), leases, ready, share)

    def hosts_over_share(self) -> int:
        """How many of the hosts this worker holds are over its share (`share()`) now: what
        it should give back (a member joined since it leased them, or its share shrank). Its
        hosts held beyond ceil(share x (leases out + shards with a host with URLs queued)), at
        least one kept. Counts from the last index call (no round trip: the engine asks
        between two looks for work, ~every 50 ms); 0 without a share below 1.

        Resting hosts count here, not in `_fair`'s lease cap: a host given back (or between
        two batches) rests for its delay, and counted out of play it would lower the cap at
        once and make the worker give back another, and then another (4 hosts, 2 workers,
        0.1 s delay: a worker holding 2 and 2 resting would count 2 in play, a cap of 1).
        This cap is never below the lease cap, so a worker never leases what it would then
        give back. Safe from another thread (reads two values another thread replaces)."""
        if self._share is None:
            return 0
        share = self._share()
        in_play = self._in_play
        if share is None or share >= 1 or in_play is None:
            return 0
        leases, _, waiting = in_play
        return over_share(len(self._held), leases, waiting, share)

    def _current_depths(self, batches: list[HostBatch]) -> list[HostBatch]:
        """The batches with each URL's depth now (`dp`, lua/depth.lua): a queued entry keeps
        the depth it was queued at, and a depth only falls, so a read after the lease is
        never too deep."""
        calls = [
            ("depth", self._held[b.token].shard, ["depths", *(_to_redis(u.fp) for u in b.urls)])
            for b in batches
        ]
        out = []
        for b, depths in zip(batches, self._shard_many(calls), strict=True):
            urls = tuple(
                u if d == b"" or int(d) >= u.depth else replace(u, depth=int(d))
                for u, d in zip(b.urls, depths, strict=True)
            )
            out.append(replace(b, urls=urls))
        return out

    def _lease_many(self, cands: list[tuple[str, int, float]], ask: _Ask) -> list[HostBatch]:
        """One Redis: one call leases the best hosts of all candidate shards (leasemany.lua)."""
        now, max_hosts, per_host, slots, expires, valid_until = ask
        shards = [shard for _, shard, score in cands if score <= now]
        if not shards or slots <= 0:
            return []
        args: list[Any] = [
            self._prefix,
            _num(now),
            max_hosts,
            per_host,
            -1 if slots == math.inf else int(slots),
            _num(expires),
            self._token_base(10),
            *shards,
        ]

        def run() -> list[Any]:
            key = self._shard_prefix(shards[0]) + "n"
            return cast(list[Any], self.client.evalsha(self._sha["leasemany"], 1, key, *args))

        batches, hints = self._call(run)
        for j, hint in enumerate(hints):
            self._hint(shards[j], hint)
        return [
            self._batch(shards[int(raw[5]) - 1], raw[:5], expires, valid_until) for raw in batches
        ]

    def _lease_shards(self, cands: list[tuple[str, int, float]], ask: _Ask) -> list[HostBatch]:
        """Redis Cluster: a call per shard (its keys share a slot), merged by the client."""
        now, max_hosts, per_host, slots, expires, valid_until = ask
        limit = self.options.max_pages
        out: list[HostBatch] = []
        used = 0
        # the best ready host of every candidate shard, merged: a shard leases the hosts
        # that come before the next candidate's best, then competes again with its new
        # best (exact lease order across shards without a round trip to the index)
        heap = [(score, host, shard) for host, shard, score in cands if score <= now]
        heapq.heapify(heap)
        for _ in range(max_hosts + 16):  # a stale hint costs one more round
            if len(out) >= max_hosts or used >= slots or not heap:
                break
            _, _, shard = heapq.heappop(heap)
            lim_score, lim_host = ("", "")
            if heap:
                lim_score, lim_host = _num(heap[0][0]), heap[0][1]
            n = max_hosts - len(out)
            args = [
                _num(now),
                n,
                per_host,
                -1 if limit is None else int(slots) - used,
                _num(expires),
                lim_score,
                lim_host,
                shard,
                self._token_base(10),
            ]
            reply = self._shard_many([("lease", shard, args)])[0]
            self._hint(shard, reply[1])
            for raw in reply[0]:
                b = self._batch(shard, raw, expires, valid_until)
                out.append(b)
                used += len(b.urls)
            _, score, host = reply[1]
            if host and float(score) <= now:
                heapq.heappush(heap, (float(score), _s(host), shard))
        return out

    def _batch(self, shard: int, raw: Any, expires: float, valid_until: float) -> HostBatch:
        host, token, backlog, members, timing = raw
        host, token = _s(host), _s(token)
        urls = []
        attempts: dict[int, int] = {}
        for member in members:
            fp_raw, att, depth, parent, url = member.split(b"\0", 4)
            fp = _from_redis(fp_raw)
            a = int(att)
            attempts[fp] = a
            urls.append(
                LeasedURL(_s(url), fp, int(depth), None if parent == b"-" else _s(parent[1:]), a)
            )
        self._held[token] = _Held(shard, host, attempts, _timing(timing), valid_until)
        self._pending.exp_add[f"{shard}|{token}"] = expires
        return HostBatch(host, token, expires, tuple(urls), int(backlog))

    def complete(
        self,
        token: str,
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> HostBatch | None:
        """See `Frontier.complete`."""
        if renew < 0:
            raise ValueError("renew must be >= 0")
        with self._lock:
            self._check_open()
            held = self._held.get(token) or self._lookup(token)
            s = settle(held.attempts, outcomes, self.options.max_attempts)
            now = self._clock()
            # the Crawl-delay is applied by the script, from the store: another client may
            # have set it while this one held the host (the rest of the timing is ours)
            no_cd = replace(held.timing, crawl_delay=None)
            t = after_batch(no_cd, outcomes, now, self.options.politeness, next_fetch_at)
            if renew and self._partition is not None:
                # a shard the partition no longer gives this worker (a member joined or
                # left) is not renewed: the host goes back to the frontier for its owner
                shards, _ = self._partition(now)
                if shards is not None and held.shard not in shards:
                    renew = 0
            granted = -1
            if renew and self.options.max_pages is not None:
                granted, _, _ = self._global(now, reserve=renew)
            expires = now + self.options.lease_ttl
            new_token = f"{held.shard}-{self._token_base(12)}"
            args: list[Any] = [
                _num(now),
                token,
                _num(t.next_fetch_at),
                _num(t.adaptive_delay),
                _num(t.backoff),
                t.errors,
                1 if t.dead else 0,
                _num(self.options.backlog_lead),
                _num(self.options.max_backlog_lead),
                _num(self.options.politeness.max_crawl_delay),
                renew,
                granted,
                new_token,
                _num(min(expires, held.valid_until)),
                len(s.done),
                len(s.failed),
                len(s.requeued),
                len(s.unfinished),
            ]
            for fp, attempts in s.requeued:
                args += [_to_redis(fp), attempts]
            args += [_to_redis(fp) for fp in s.unfinished]
            if self.replica_acks:
                reply = self._acknowledged("complete", held.shard, args)
            else:
                reply = self._shard_many([("complete", held.shard, args)])[0]
            self._held.pop(token, None)
            if _s(reply[0]) == "stale":
                if granted > 0:
                    self._pending.pub -= granted
                raise StaleLeaseError(f"lease {token!r} is not held (completed or reclaimed)")
            self._pending.exp_del.add(f"{held.shard}|{token}")
            self._hint(held.shard, reply[2])
            batch = None
            renewed = 0
            if reply[1]:
                batch = self._batch(
                    held.shard, reply[1], min(expires, held.valid_until), held.valid_until
                )
                renewed = len(batch.urls)
                if self.options.max_depth is not None:
                    batch = self._current_depths([batch])[0]
            if self.options.max_pages is not None:
                freed = len(s.failed) + len(s.requeued) + len(s.unfinished)
                self._pending.pub -= freed + max(granted, 0) - renewed
            self._maybe_flush(now)
            return batch

    def _lookup(self, token: str) -> _Held:
        """A lease handed out by another client (or forgotten): read it from Redis."""
        try:
            shard = int(token.split("-", 1)[0])
        except ValueError:
            raise StaleLeaseError(f"lease {token!r} is not held (not a token)") from None
        if not 0 <= shard < SHARDS:
            raise StaleLeaseError(f"lease {token!r} is not held (not a token)")
        reply = self._shard_many([("misc", shard, ["held", token])])[0]
        if _s(reply[0]) != "ok":
            raise StaleLeaseError(f"lease {token!r} is not held (completed or reclaimed)")
        _, host, members, timing = reply
        attempts = {}
        for member in members:
            fp_raw, att, _ = member.split(b"\0", 2)
            attempts[_from_redis(fp_raw)] = int(att)
        return _Held(shard, _s(host), attempts, _timing(timing), math.inf)

    def extend(self, token: str, until: float) -> float:
        """See `Frontier.extend`; never past the partition's `valid_until` of the lease."""
        with self._lock:
            self._check_open()
            held = self._held.get(token)
            try:
                shard = held.shard if held else int(token.split("-", 1)[0])
            except ValueError:
                raise StaleLeaseError(f"lease {token!r} is not held (not a token)") from None
            if held is not None:
                until = min(until, held.valid_until)
            reply = self._shard_many([("misc", shard, ["extend", token, _num(until)])])[0]
            if _s(reply[0]) != "ok":
                self._held.pop(token, None)
                raise StaleLeaseError(f"lease {token!r} is not held (completed or reclaimed)")
            expires = float(reply[1])
            self._pending.exp_add[f"{shard}|{token}"] = expires
            return expires

    def reclaim_expired(self, now: float | None = None) -> int:
        """See `Frontier.reclaim_expired` (looks at every shard the crawl used)."""
        with self._lock:
            self._check_open()
            now = self._clock() if now is None else now
            return self._sweep(now)

    def _active(self) -> list[int]:
        self._global(self._clock())
        members = self._call(lambda: self.client.smembers(self._g + "act"))
        return sorted(int(m) for m in cast(set[bytes], members))

    def _reclaim_shards(
        self,
        shards: set[int] | list[int],
        now: float,
        sweep: bool = False,
        owners: Mapping[str, int] | None = None,
    ) -> int:
        rest_from = min(now, self._clock())
        pol = self.options.politeness
        args: list[Any] = [
            _num(now),
            _num(rest_from),
            _num(pol.default_delay),
            _num(pol.max_crawl_delay),
            _num(now - self._grace),  # leases expired before this are reclaimed
            1 if sweep else 0,  # every shard's hint answered (a dead worker's unsent ones)
        ]
        for who, inc in sorted((owners or {}).items()):
            args += [who, inc]
        calls = [("reclaim", s, args) for s in sorted(shards)]
        n = 0
        for (_, shard, _), reply in zip(calls, self._shard_many(calls), strict=True):
            n += int(reply[0])
            self._hint(shard, reply[1])
        if self.options.max_pages is not None:
            self._pending.pub -= n  # reclaimed URLs are queued again: their slots are free
        return n

    def _sweep(self, now: float) -> int:
        """Reclaim expired leases in every shard the crawl used and refresh the index from
        the shards (repairs what a worker dying between two calls left stale)."""
        self._next_sweep = now + _SWEEP_EVERY
        dead = self._dead()
        self._reclaimed_owners = dead
        n = self._reclaim_shards(self._active(), now, sweep=True, owners=dead)
        self._global(now)
        return n

    def set_host_delay(self, host: str, crawl_delay: float | None) -> None:
        """See `Frontier.set_host_delay`."""
        if crawl_delay is not None and not crawl_delay >= 0:
            raise ValueError(f"crawl_delay must be >= 0 or None, not {crawl_delay!r}")
        with self._lock:
            self._check_open()
            shard = shard_of(host)
            value = "" if crawl_delay is None else _num(crawl_delay)
            if shard not in self._known_active:
                self._pending.activate.append(shard)
                self._global(self._clock())
            self._shard_many([("misc", shard, ["delay", host, value, _num(self._clock())])])

    def top_hosts(self, limit: int, among: Iterable[str] | None = None) -> list[HostView]:
        """See `HostsView.top_hosts` (`read_hosts`; without `among`, the hosts a SCAN of the
        server's keys finds)."""
        with self._lock:
            self._check_open()
            wanted = None if among is None else list(among)

            def run() -> list[HostView]:
                names = host_names(self.client, self.crawl) if wanted is None else wanted
                return read_hosts(self.client, self.crawl, names, self.options)

            return top(self._call(run), limit)

    def statistics(self) -> FrontierStats:
        """See `Frontier.statistics` (sums every shard the crawl used: one round trip)."""
        with self._lock:
            self._check_open()
            now = self._clock()
            shards = self._active()
            calls = [("misc", s, ["stats", _num(now)]) for s in shards]
            sums = [0] * 11
            best_ready: float | None = None
            best_wait: float | None = None
            false_positives = 0.0
            for (_, shard, _), reply in zip(calls, self._shard_many(calls), strict=True):
                for k in range(11):
                    sums[k] += int(reply[k])
                if reply[11]:
                    v = float(reply[11])
                    best_ready = v if best_ready is None else min(best_ready, v)
                if reply[12]:
                    v = float(reply[12])
                    best_wait = v if best_wait is None else min(best_wait, v)
                false_positives += float(reply[13])
                self._hint(shard, reply[14])
            parked = lowered = 0
            if self.options.max_depth is not None:
                counts = self._call(lambda: self._depth_counters(shards))
                parked, lowered = (sum(c) for c in zip((0, 0), *counts, strict=True))
            self._global(now)
            q, leased, done, failed, retries, hosts, dead, dropped, dups, ready, lh = sums
            nxt = best_ready if best_ready is not None else best_wait
            return FrontierStats(
                queued=q,
                leased=leased,
                done=done,
                failed=failed,
                retries=retries,
                hosts=hosts,
                ready_hosts=ready,
                leased_hosts=lh,
                dead_hosts=dead,
                dropped_by_budget=dropped,
                duplicates_seen=dups,
                next_ready_at=nxt,
                seen_false_positives=false_positives,
                parked=parked,
                depth_lowered=lowered,
            )

    def _depth_counters(self, shards: list[int]) -> list[tuple[int, int]]:
        """Each shard's parked and lowered counts (lua/depth.lua's `dc`)."""
        pipe = self.client.pipeline(transaction=False)
        for shard in shards:
            pipe.hmget(self._shard_prefix(shard) + "dc", ["parked", "lowered"])
        return [(int(p or 0), int(w or 0)) for p, w in pipe.execute()]

    def close(self) -> None:
        """Send what is pending and stop (idempotent); leases stay valid in Redis. The
        client is not closed (the caller owns it)."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._clears:
                    self._send_clears()
                p = self._pending
                if p.hints or p.exp_add or p.exp_del or p.activate or p.pub:
                    self._global(self._clock())
            except FrontierError:
                pass
            finally:
                self._closed = True

    def __enter__(self) -> RedisFrontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ maintenance
    def delete(self) -> int:
        """Remove every key of this crawl (all shards); returns how many. For tests and
        `gossamer` housekeeping — a running crawl loses everything."""

        def run() -> int:
            n = 0
            for key in _scan(self.client, f"{self._prefix}*"):
                n += int(self.client.delete(key))
            return n

        return self._call(run)

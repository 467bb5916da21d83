"""Membership: worker ids, heartbeats, the live member list and the partition it implies.

A worker registers (`w<N>`, from INCR) and beats every `ttl / 5` seconds, one Lua call in the
crawl's slot: its status record with a TTL, the live set by the server's clock, and back the
live members with their capacities, the crawl's state, whether it was asked to stop and the
dead (whose leases it reclaims at once). A worker counts dead only after a TTL of Redis serving
beats, so a paused Redis kills nobody; one back from a freeze beats under a new incarnation,
which its lease tokens carry. `PartitionView` turns the member list into the shards a worker
may lease. Each rule: docs/cluster.md, "Membership: registration, heartbeats, TTL"."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, cast

from ..config import CLUSTER_DEFAULTS
from ..partition import Member, PartitionError, Strategy, capacity_lease_size
from ._redis import Keys, RedisClient, boot_clock, server_time, text

__all__ = [
    "Beat",
    "Membership",
    "PartitionView",
    "WorkerStatus",
]

WORKER_STATES: Final = ("starting", "crawling", "idle", "stopping", "stopped")
#: HTTP statuses and outcome keys a status record carries at most (the most common)
STATUS_KEYS_MAX: Final = 20


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """A worker's status record (what `gossamer status` shows).

    `state` is the worker's own (starting, crawling, idle, stopping, stopped) while it is
    live; for a worker whose heartbeats stopped without a goodbye it reads `dead`. Times are
    the Redis server's."""

    id: str
    machine: str
    pid: int
    state: str
    capacity: float = 1.0
    hosts: tuple[str, ...] = ()
    pages: int = 0
    requests: int = 0
    errors: int = 0
    pages_per_s: float = 0.0
    out: str = ""
    started_at: float = 0.0
    last_beat: float = 0.0
    # for the dashboard's totals (a record of an older worker has none): response body
    # bytes, requests by HTTP status and by outcome key, the STATUS_KEYS_MAX most common of
    # each (a record stays under ~1.5 kB however many kinds a crawl meets)
    body_bytes: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    # what the worker costs its machine, over the last beat's interval (engine.machine):
    # CPU percent of one core, resident bytes, free bytes of its output directory's disk
    # (None: unknown), HTTP bytes a second received and sent; `disk_low`: it stopped
    # taking hosts because that disk is under --disk-margin
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    disk_free_bytes: int | None = None
    bytes_in_per_s: float = 0.0
    bytes_out_per_s: float = 0.0
    disk_low: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str | bytes, **override: Any) -> WorkerStatus:
        data = json.loads(raw)
        data["hosts"] = tuple(data.get("hosts", ()))
        for key in ("statuses", "outcomes"):
            if not isinstance(data.get(key, {}), dict):
                data[key] = {}
        data.update(override)
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in fields})


@dataclass(frozen=True, slots=True)
class Beat:
    """What a heartbeat learned: the server's time, whether this worker's record had
    expired, the crawl's state, whether this worker is asked to stop, the live members."""

    now: float
    expired: bool
    crawl_state: str
    stop_requested: bool
    members: tuple[Member, ...]
    #: this worker's incarnation (bumped by a beat that found its record expired)
    incarnation: int = 0
    #: the dead workers: id -> the incarnation they died in (their leases are reclaimed)
    dead: Mapping[str, int] = field(default_factory=dict)
    #: when the beat was sent (this machine's boot clock): the worker is surely alive, and
    #: its leases its own, until sent + TTL (minus a margin)
    sent: float = 0.0


_BEAT = """
-- KEYS: live, workers, hb:<id>, meta, stopreq, caps, beats, pulse, inc, mourned
-- ARGV: id, status JSON, TTL (ms), capacity, MOURN_TTLS
local t = redis.call('TIME')
local nows = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local now = tonumber(nows)
local expired = redis.call('EXISTS', KEYS[3]) == 0 and 1 or 0
local inc = tonumber(redis.call('HGET', KEYS[9], ARGV[1]) or '-1')
if expired == 1 then
  inc = inc + 1
  redis.call('HSET', KEYS[9], ARGV[1], inc)
end
local ttl = tonumber(ARGV[3]) / 1000
local pulse = redis.call('HMGET', KEYS[8], 'last', 'since')
local since = tonumber(pulse[2] or '')
if not pulse[1] or not since or now - tonumber(pulse[1]) > ttl / 2 then since = now end
redis.call('HSET', KEYS[8], 'last', nows, 'since', string.format('%.6f', since))
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[7], ARGV[1], nows)
redis.call('HDEL', KEYS[10], ARGV[1])
redis.call('HSET', KEYS[6], ARGV[1], ARGV[4])
redis.call('ZADD', KEYS[1], nows, ARGV[1])
local cutoff = string.format('%.6f', now - tonumber(ARGV[3]) / 1000)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. cutoff)) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[6], id)
end
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local caps = {}
if #ids > 0 then caps = redis.call('HMGET', KEYS[6], unpack(ids)) end
local state = redis.call('HGET', KEYS[4], 'state') or ''
local stop = redis.call('SISMEMBER', KEYS[5], ARGV[1])
local dead = {}
local bt = redis.call('HGETALL', KEYS[7])
local mourn = ttl * tonumber(ARGV[5])
for j = 1, #bt, 2 do
  local silent = now - math.max(tonumber(bt[j + 1]), since)
  if silent > mourn then
    redis.call('HSET', KEYS[10], bt[j], bt[j + 1])
    redis.call('HDEL', KEYS[7], bt[j])
  elseif silent > ttl then
    dead[#dead + 1] = bt[j]
    dead[#dead + 1] = redis.call('HGET', KEYS[9], bt[j]) or '0'
  end
end
return {nows, expired, state, stop, ids, caps, inc, dead}
"""

_DEREGISTER = """
-- KEYS: live, hb:<id>, workers, stopreq, caps, meta, beats. ARGV: id, final JSON, TTL (ms)
-- {crawl state, live workers left}; the last worker out of a stopping crawl stops it
local t = redis.call('TIME')
local nows = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('HSET', KEYS[7], ARGV[1], nows)
local cutoff = string.format('%.6f', tonumber(nows) - tonumber(ARGV[3]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. cutoff)
local left = redis.call('ZCARD', KEYS[1])
local state = redis.call('HGET', KEYS[6], 'state') or ''
if state == 'stopping' and left == 0 then
  redis.call('HSET', KEYS[6], 'state', 'stopped', 'ended', nows)
  state = 'stopped'
end
return {state, left}
"""


#: TTLs of silence after which a dead or exited worker is no longer answered dead by beats
MOURN_TTLS: Final = 10


class Membership:
    """Registration and heartbeats of the workers of one crawl (see the module docstring).

    `ttl` is the heartbeat record's time to live in seconds: a worker silent that long is
    dead. Not thread-safe: give each thread its own (the client may be shared)."""

    def __init__(
        self, client: RedisClient, crawl: str, *, ttl: float = CLUSTER_DEFAULTS.heartbeat_ttl
    ) -> None:
        if not ttl > 0:
            raise ValueError(f"ttl must be > 0, not {ttl}")
        self.client = client
        self.keys = Keys(crawl)
        self.ttl = ttl
        self._beat = client.register_script(_BEAT)
        self._deregister = client.register_script(_DEREGISTER)

    @property
    def interval(self) -> float:
        """Seconds between two heartbeats: five a TTL."""
        return self.ttl / 5

    def new_id(self) -> str:
        """A worker id never given before in this crawl: w1, w2, …"""
        return f"w{int(self.client.incr(self.keys.seq))}"

    def beat(self, status: WorkerStatus) -> Beat:
        """Publish `status` (its id's heartbeat) and learn the live members and the dead."""
        k = self.keys
        sent = boot_clock()
        reply = cast(
            list[Any],
            self._beat(
                keys=[k.live, k.workers, k.heartbeat(status.id), k.meta, k.stop_requests,
                      k.caps, k.beats, k.pulse, k.incarnations, k.mourned],
                args=[status.id, status.to_json(), max(1, round(self.ttl * 1000)),
                      repr(status.capacity), MOURN_TTLS],
            ),
        )  # fmt: skip
        nows, expired, state, stop, ids, caps, inc, raw_dead = reply
        dead = {text(raw_dead[j]): int(raw_dead[j + 1]) for j in range(0, len(raw_dead), 2)}
        members = []
        for raw_id, cap in zip(ids, caps, strict=True):
            try:
                members.append(Member(text(raw_id), float(cap) if cap is not None else 1.0))
            except (PartitionError, ValueError):
                members.append(Member(text(raw_id)))
        return Beat(
            float(nows), bool(expired), text(state), bool(stop), tuple(members), int(inc), dead,
            sent,
        )

    def deregister(self, status: WorkerStatus) -> str:
        """Leave the crawl at once, keeping `status` as the worker's last record; the
        crawl's state afterwards."""
        k = self.keys
        state, _left = cast(
            list[Any],
            self._deregister(
                keys=[k.live, k.heartbeat(status.id), k.workers, k.stop_requests, k.caps,
                      k.meta, k.beats],
                args=[status.id, status.to_json(), max(1, round(self.ttl * 1000))],
            ),
        )  # fmt: skip
        return text(state)

    def members(self) -> list[Member]:
        """The live members (heartbeats younger than the TTL), by id."""
        return [Member(s.id, s.capacity) for s in self.statuses() if s.state != "dead"
                and s.state != "stopped"]  # fmt: skip

    def statuses(self) -> list[WorkerStatus]:
        """Every worker the crawl has had: live ones with their current record (`stopping`
        once asked to stop), exited ones (`stopped`) and dead ones (`dead`: no heartbeat for
        the TTL, no goodbye), with `last_beat` from the server; ordered by worker number."""
        k = self.keys
        now = server_time(self.client)
        live = {
            text(m): float(score)
            for m, score in cast(
                list[tuple[Any, float]], self.client.zrange(k.live, 0, -1, withscores=True)
            )
        }
        beats = {
            text(i): float(t)
            for key in (k.mourned, k.beats)  # a worker in both: its beat is the newer
            for i, t in cast(dict[Any, Any], self.client.hgetall(key)).items()
        }
        asked = self.stop_requested()
        out = []
        for raw_id, raw in cast(dict[Any, Any], self.client.hgetall(k.workers)).items():
            wid = text(raw_id)
            last = beats.get(wid, 0.0)
            alive = wid in live and live[wid] >= now - self.ttl
            st = WorkerStatus.from_json(raw, last_beat=last)
            if not alive and st.state != "stopped":
                st = WorkerStatus.from_json(raw, last_beat=last, state="dead", hosts=())
            elif alive and wid in asked and st.state != "stopped":
                st = WorkerStatus.from_json(raw, last_beat=last, state="stopping")
            out.append(st)
        return sorted(out, key=lambda s: (len(s.id), s.id))

    def ask_to_stop(self, worker_ids: Sequence[str]) -> None:
        """Ask these workers to finish their batches and exit (seen on their next beat)."""
        if worker_ids:
            self.client.sadd(self.keys.stop_requests, *worker_ids)

    def stop_requested(self) -> set[str]:
        """Ids asked to stop that have not exited yet."""
        return {text(x) for x in cast(set[Any], self.client.smembers(self.keys.stop_requests))}


class PartitionView:
    """A worker's `partition(now)` for its frontier: the strategy applied to the member list
    of the last heartbeat (`update`, from the heartbeat thread; `partition` runs on the
    event loop's thread on every lease).

    `partition(now)` is `(shards, valid_until)`: the shards this worker may lease now (None:
    any) and until when that answer holds (leases end by then). A worker the last heartbeat
    did not list (not registered yet, or its record expired) leases nothing until it is
    back; so does a worker the strategy cannot place (more workers than `--phases`)."""

    def __init__(self, strategy: Strategy, member_id: str) -> None:
        self.strategy = strategy
        self.member_id = member_id
        self._members: tuple[Member, ...] = ()
        # (members, answer, from, until): one answer is reused while it holds
        self._cache: tuple[tuple[Member, ...], frozenset[int] | None, float, float] | None = None
        self.problem: str | None = None  # why this worker may lease nothing, if it may not
        #: the dead workers of the last heartbeat (id -> incarnation): the frontier
        #: reclaims their leases (`dead_owners`)
        self.dead: Mapping[str, int] = {}

    @property
    def members(self) -> tuple[Member, ...]:
        return self._members

    def update(self, members: Sequence[Member]) -> None:
        """The live members of the last heartbeat (replaced atomically)."""
        self._members = tuple(sorted(members, key=lambda m: m.id))

    def partition(self, now: float) -> tuple[frozenset[int] | None, float]:
        members = self._members
        cache = self._cache
        if cache is not None and cache[0] is members and cache[2] <= now < cache[3]:
            return cache[1], cache[3]
        if self.strategy.unrestricted and self.member_id in {m.id for m in members}:
            answer: frozenset[int] | None = None
            start, until = -math.inf, math.inf
        else:
            try:
                answer = self.strategy.shards_for(self.member_id, members, now)
                start, until = now, self.strategy.valid_until(now)
                self.problem = None
            except PartitionError as exc:  # not a member (yet), or no phase left for it
                self.problem = str(exc)
                return frozenset(), now + 1.0
        self._cache = (members, answer, start, until)
        return answer, until

    def share(self) -> float | None:
        """The fraction of the hosts in play this worker may hold at once under an
        unrestricted strategy (`dynamic`) when it is not alone: its capacity over the live
        members' (4 sites and 2 workers: 2 each, not 4 for the first to lease). None (no
        limit) alone, before it is listed, or under a static strategy (its shards are its
        share already)."""
        members = self._members
        if not self.strategy.unrestricted or len(members) < 2:
            return None
        mine = [m.capacity for m in members if m.id == self.member_id]
        if not mine:
            return None
        return mine[0] / sum(m.capacity for m in members)

    def lease_size(self, per_host: int) -> int:
        """URLs to lease per host: for an unrestricted strategy (`dynamic`), `per_host` scaled
        by this worker's capacity against the members' mean (`capacity_lease_size`); else
        `per_host`."""
        members = self._members
        if not self.strategy.unrestricted or self.member_id not in {m.id for m in members}:
            return per_host
        return capacity_lease_size(per_host, self.member_id, members)

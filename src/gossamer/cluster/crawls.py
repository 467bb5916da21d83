"""The crawls a Redis holds, their settings, seeds and state: the crawl list `gs:crawls` and
each crawl's record.

A crawl's record is the hash `gs:<crawl>:{m}:meta` (the truth); `gs:crawls` lists every crawl
for `status`. States::

    running ──stop──► stopping ──last worker out──► stopped ──resume──► running
       │                  │
       └──────────────────┴──frontier exhausted──► finished

`create_crawl` seeds the frontier before the crawl is listed and marked running, so no worker
ever joins a crawl whose seeds are not in yet (docs/cluster.md, "Lifecycle")."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from ..config import CLUSTER_DEFAULTS, CrawlSettings
from ..frontier import Frontier
from ..frontier._registry import FrontierPlace
from ..frontier._registry import open_frontier as open_named_frontier
from ..partition import STRATEGY_OPTIONS, Strategy, strategy_named
from ._redis import REGISTRY, Keys, RedisClient, redact, server_time, text

__all__ = [
    "STATES",
    "CrawlRecord",
    "CrawlRecordError",
    "create_crawl",
    "list_crawls",
    "load_crawl",
    "mark_finished",
    "open_frontier",
    "request_stop",
    "resume_command",
    "resume_crawl",
    "store_machines",
    "stored_settings",
]

STATES: Final = ("running", "stopping", "stopped", "finished")
#: settings that belong to one machine or one run, never stored with a cluster crawl
LOCAL_FIELDS: Final = frozenset({"output", "workers", "resolve_file", "recrawl", "site_sizes"})
#: a strategy option's setting (STRATEGY_OPTIONS but the weights, which SOURCE gives)
_OPTION_SETTINGS: Final = {"epsilon": "epsilon", "period": "phase_period", "phases": "phases"}
#: settings the record keeps in fields of its own (`partition`, `heartbeat_ttl`), not among
#: its stored settings; a worker's settings get them back from there (`worker_settings`)
RECORD_FIELDS: Final = frozenset({"partition", "heartbeat_ttl", *_OPTION_SETTINGS.values()})


class CrawlRecordError(ValueError):
    """No such crawl, an ambiguous choice, or a crawl that cannot be created (the message
    says which and lists the crawls)."""


@dataclass(frozen=True, slots=True)
class CrawlRecord:
    """A crawl as stored in Redis (`load_crawl`)."""

    id: str
    state: str
    seeds: tuple[str, ...]
    settings: dict[str, Any]  # the stored worker settings (JSON of CrawlSettings fields)
    partition: dict[str, Any]  # {"name": …, "epsilon"/"period"/"phases"/"weights": … if given}
    created: float  # Redis server time
    heartbeat_ttl: float
    resolve_text: str = ""  # the --resolve-file given at creation, copied in
    #: the machine list its workers run on (`crawl --machines FILE`, the dashboard's
    #: Machines field): a machine list's text (runner/machines.py), "" for none
    machines: str = ""
    ended: float | None = None

    @property
    def keys(self) -> Keys:
        return Keys(self.id)

    @property
    def partition_name(self) -> str:
        """The crawl's partition strategy's name."""
        return str(self.partition.get("name", CLUSTER_DEFAULTS.partition))

    def strategy(self) -> Strategy:
        """The partition strategy every worker of the crawl uses."""
        p = self.partition
        options = {k: p[k] for k in STRATEGY_OPTIONS if k in p}
        return strategy_named(self.partition_name, **options)

    def worker_settings(
        self,
        output: Path,
        *,
        resolve_file: Path | None = None,
        concurrency: int | None = None,
    ) -> CrawlSettings:
        """The settings a worker crawls with: the stored ones and the record's own
        (`RECORD_FIELDS`), its own output directory, the resolve file it wrote
        `resolve_text` to, and its own concurrency if given."""
        values = dict(self.settings)
        p = self.partition
        values.update(
            {setting: p.get(option) for option, setting in _OPTION_SETTINGS.items()},
            partition=self.partition_name,
            heartbeat_ttl=self.heartbeat_ttl,
        )
        values.update(output=output, resolve_file=resolve_file, workers=1, recrawl=None)
        if concurrency is not None:
            values["concurrency"] = concurrency
        try:
            return CrawlSettings(**values)
        except ValueError as exc:
            raise CrawlRecordError(
                f"crawl {self.id}: its stored settings are unusable: {exc}"
            ) from exc

    def summary(self) -> dict[str, Any]:
        """What `gs:crawls` holds for this crawl."""
        return {
            "id": self.id,
            "state": self.state,
            "created": self.created,
            "ended": self.ended,
            "seeds": list(self.seeds),
            "partition": self.partition_name,
            "max_pages": self.settings.get("max_pages"),
        }


def stored_settings(settings: CrawlSettings) -> dict[str, Any]:
    """The settings workers need (scope, limits, politeness, user agent, resolve rules…),
    as JSON-able values: everything but the machine-local fields and those the record
    keeps apart (`RECORD_FIELDS`)."""
    kept_apart = LOCAL_FIELDS | RECORD_FIELDS
    return {k: v for k, v in settings.manifest().items() if k not in kept_apart}


def open_frontier(
    client: RedisClient,
    crawl_id: str,
    settings: CrawlSettings,
    *,
    partition: Callable[[float], tuple[frozenset[int] | None, float]] | None = None,
    dead_owners: Callable[[], Mapping[str, int]] | None = None,
) -> Frontier:
    """The crawl's frontier in Redis (the registered "redis" backend), configured from its
    settings like the embedded one; `dead_owners`: the workers whose leases it reclaims."""
    from .stores import CLUSTER

    place = FrontierPlace(
        redis=client, crawl_id=crawl_id, partition=partition, dead_owners=dead_owners
    )
    return open_named_frontier(CLUSTER.frontier, settings, place)


FrontierFactory = Callable[[RedisClient, str, CrawlSettings], Frontier]


def _new_id(now: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(2)


def _check_id(crawl_id: str) -> None:
    if not crawl_id or any(c in crawl_id for c in "{}:* \t\r\n") or len(crawl_id) > 100:
        raise CrawlRecordError(
            f"invalid crawl id {crawl_id!r}: no braces, colons, stars or spaces, at most 100"
        )


def create_crawl(
    client: RedisClient,
    seeds: Sequence[str],
    settings: CrawlSettings,
    *,
    weights: Sequence[tuple[int, float]] | None = None,
    crawl_id: str | None = None,
    frontier_factory: FrontierFactory | None = None,
    machines: str = "",
) -> str:
    """Store a new crawl, seed its frontier with `seeds` and mark it running; its id. Its
    partition strategy and heartbeat TTL are the settings' (`settings.cluster`).

    `weights` ((shard, size) pairs) are the `sized` strategy's known shard sizes;
    `machines`, the machine list its workers run on (kept with it: `store_machines`).

    Raises CrawlRecordError (a reused id, no seeds, `--recrawl`) and PartitionError (a
    strategy or options that do not exist)."""
    cluster = settings.cluster
    opts: dict[str, Any] = {
        option: getattr(cluster, setting) for option, setting in _OPTION_SETTINGS.items()
    }
    opts["weights"] = None if weights is None else [[int(s), float(w)] for s, w in weights]
    strategy_named(cluster.partition, **opts)  # refuses unknown names and misplaced options
    if settings.recrawl is not None:
        raise CrawlRecordError("--recrawl is not available in cluster mode yet")
    if not seeds:
        raise CrawlRecordError("give at least one seed URL")
    resolve_text = ""
    if settings.fetch.resolve_file is not None:
        try:
            resolve_text = settings.fetch.resolve_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise CrawlRecordError(f"cannot read {settings.fetch.resolve_file}: {exc}") from exc
    now = server_time(client)
    if crawl_id is None:
        crawl_id = _new_id(now)
        while client.hexists(REGISTRY, crawl_id):
            crawl_id = _new_id(now)
    _check_id(crawl_id)
    keys = Keys(crawl_id)
    if client.hexists(REGISTRY, crawl_id) or not client.hsetnx(keys.meta, "id", crawl_id):
        raise CrawlRecordError(f"a crawl {crawl_id} exists already")
    record = CrawlRecord(
        id=crawl_id,
        state="running",
        seeds=tuple(seeds),
        settings=stored_settings(settings),
        partition={"name": cluster.partition, **{k: v for k, v in opts.items() if v is not None}},
        created=now,
        heartbeat_ttl=cluster.heartbeat_ttl,
        resolve_text=resolve_text,
        machines=machines,
    )
    try:
        make = frontier_factory or (lambda c, i, s: open_frontier(c, i, s))
        frontier = make(client, crawl_id, settings)
        try:
            from ..engine.crawler import seed_frontier

            seed_frontier(frontier, settings, list(seeds))
        finally:
            frontier.close()
        client.hset(keys.meta, mapping=cast(Any, _fields(record)))
    except BaseException:
        client.delete(keys.meta)
        raise
    client.hset(REGISTRY, crawl_id, json.dumps(record.summary()))
    return crawl_id


def _fields(record: CrawlRecord) -> dict[str, str]:
    return {
        "id": record.id,
        "state": record.state,
        "seeds": json.dumps(list(record.seeds)),
        "settings": json.dumps(record.settings),
        "partition": json.dumps(record.partition),
        "created": repr(record.created),
        "heartbeat_ttl": repr(record.heartbeat_ttl),
        "resolve_text": record.resolve_text,
        "machines": record.machines,
    }


def _record(raw: dict[Any, Any]) -> CrawlRecord:
    f = {text(k): text(v) for k, v in raw.items()}
    return CrawlRecord(
        id=f["id"],
        state=f["state"],
        seeds=tuple(json.loads(f["seeds"])),
        settings=json.loads(f["settings"]),
        partition=json.loads(f["partition"]),
        created=float(f["created"]),
        heartbeat_ttl=float(f.get("heartbeat_ttl", CLUSTER_DEFAULTS.heartbeat_ttl)),
        resolve_text=f.get("resolve_text", ""),
        machines=f.get("machines", ""),
        ended=float(f["ended"]) if f.get("ended") else None,
    )


def _read(client: RedisClient, crawl_id: str) -> CrawlRecord | None:
    """The crawl's record; None when there is none or it is still being created."""
    raw = cast(dict[Any, Any], client.hgetall(Keys(crawl_id).meta))
    if not raw or (b"state" not in raw and "state" not in raw):
        return None
    return _record(raw)


def list_crawls(client: RedisClient) -> list[CrawlRecord]:
    """Every crawl the crawl list holds, oldest first, with its current state."""
    out = []
    for crawl_id in cast(list[Any], client.hkeys(REGISTRY)):
        rec = _read(client, text(crawl_id))
        if rec is not None:
            out.append(rec)
    return sorted(out, key=lambda r: (r.created, r.id))


def _listing(crawls: Sequence[CrawlRecord]) -> str:
    if not crawls:
        return "no crawls in this Redis"
    lines = [f"  {c.id}  {c.state:<9} {', '.join(c.seeds[:2])}" for c in crawls]
    return "crawls:\n" + "\n".join(lines)


def load_crawl(
    client: RedisClient,
    crawl_id: str | None = None,
    *,
    among: Sequence[str] = ("running", "stopping"),
) -> CrawlRecord:
    """The crawl `crawl_id`; with None, the only crawl there is, else the only one in a
    state of `among` (running or stopping; a resume: stopped). CrawlRecordError (listing the
    crawls) when there is none or a choice."""
    if crawl_id is not None:
        rec = _read(client, crawl_id)
        if rec is None:
            if client.exists(Keys(crawl_id).meta):
                raise CrawlRecordError(f"crawl {crawl_id} is being created; try again in a moment")
            raise CrawlRecordError(f"no crawl {crawl_id}; {_listing(list_crawls(client))}")
        return rec
    crawls = list_crawls(client)
    if len(crawls) == 1:
        return crawls[0]
    running = [c for c in crawls if c.state in among]
    if len(running) == 1:
        return running[0]
    which = among[0] if among else "running"
    if not running:
        raise CrawlRecordError(f"no {which} crawl: give --crawl ID; {_listing(crawls)}")
    raise CrawlRecordError(
        f"{len(running)} crawls are {which}: give --crawl ID; {_listing(crawls)}"
    )


# ---------------------------------------------------------------------------- state changes

_TRANSITION = """
-- KEYS: meta, live. ARGV: new state, heartbeat TTL (ms), from states...
-- {old state, changed 0/1}. 'stopping' with no live worker goes straight to 'stopped'.
local cur = redis.call('HGET', KEYS[1], 'state')
if not cur then return {'', 0} end
local ok = false
for i = 3, #ARGV do if cur == ARGV[i] then ok = true end end
if not ok then return {cur, 0} end
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local new = ARGV[1]
if new == 'stopping' then
  local cutoff = tonumber(now) - tonumber(ARGV[2]) / 1000
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%.6f', cutoff))
  if redis.call('ZCARD', KEYS[2]) == 0 then new = 'stopped' end
end
redis.call('HSET', KEYS[1], 'state', new)
if new ~= 'running' and new ~= 'stopping' then redis.call('HSET', KEYS[1], 'ended', now) end
if new == 'running' then redis.call('HDEL', KEYS[1], 'ended') end
return {cur, 1}
"""


def _transition(
    client: RedisClient, record: CrawlRecord, new: str, from_states: Sequence[str]
) -> tuple[str, bool]:
    keys = record.keys
    script = client.register_script(_TRANSITION)
    ttl_ms = int(record.heartbeat_ttl * 1000)
    old, changed = cast(
        list[Any], script(keys=[keys.meta, keys.live], args=[new, ttl_ms, *from_states])
    )
    if changed:
        refresh_summary(client, record.id)
    return text(old), bool(changed)


def refresh_summary(client: RedisClient, crawl_id: str) -> None:
    """Copy the record's current state into its `gs:crawls` summary."""
    rec = _read(client, crawl_id)
    if rec is not None:
        client.hset(REGISTRY, crawl_id, json.dumps(rec.summary()))


def request_stop(client: RedisClient, record: CrawlRecord) -> str:
    """Ask every worker of a running crawl to stop (they see it on their next heartbeat);
    the crawl's state afterwards (`stopped` at once when no worker is alive)."""
    _transition(client, record, "stopping", ("running",))
    rec = _read(client, record.id)
    return rec.state if rec is not None else ""


def mark_finished(client: RedisClient, record: CrawlRecord) -> bool:
    """Mark a running or stopping crawl finished (its frontier is exhausted: the caller
    checked). True when this call changed it."""
    return _transition(client, record, "finished", ("running", "stopping"))[1]


def settle_stopped(client: RedisClient, record: CrawlRecord) -> bool:
    """A stopping crawl with no live worker left becomes stopped. True when it changed."""
    return _transition(client, record, "stopping", ("stopping",))[1] and (
        (_read(client, record.id) or record).state == "stopped"
    )


#: an incarnation above any a worker reaches: `resume_crawl` reclaims every lease of a worker
_EVERY_INCARNATION: Final = 2**62


def store_machines(client: RedisClient, crawl_id: str, machines: str) -> None:
    """Keep `machines` (a machine list's text) as the crawl's machine list: the one
    `workers --scale`, `crawl --resume --redis` and the dashboard start its workers on."""
    client.hset(Keys(crawl_id).meta, "machines", machines)


def resume_crawl(client: RedisClient, record: CrawlRecord) -> bool:
    """Set a stopped crawl running again, its frontier as the stop left it (queued URLs,
    seen-set, done and failed counts) but for the leases still out — those of workers that
    died before or during the stop, which no live worker is left to reclaim —, which are
    reclaimed first: their URLs are queued again at once, not when the leases expire. True
    when this call resumed it (False: it was not stopped, or another resume came first).

    A worker of the stopped crawl that was only frozen and comes back finds its leases
    gone: its completions are refused (fencing) and it goes on under a new incarnation."""
    if record.state != "stopped":
        return False
    seq = client.get(record.keys.seq)
    known = {text(w) for w in cast(list[Any], client.hkeys(record.keys.workers))}
    known |= {f"w{k}" for k in range(1, int(seq or 0) + 1)}
    every = dict.fromkeys(known, _EVERY_INCARNATION)
    settings = record.worker_settings(Path("."))
    frontier = open_frontier(client, record.id, settings, dead_owners=lambda: every)
    try:
        frontier.reclaim_expired()  # expired or not: every owner counts dead
    finally:
        frontier.close()
    return _transition(client, record, "running", ("stopped",))[1]


def resume_command(url: str, crawl_id: str) -> str:
    """The command that resumes the stopped crawl `crawl_id` (its password never shown)."""
    return f"gossamer crawl --resume --redis {redact(url)} --crawl {crawl_id}"

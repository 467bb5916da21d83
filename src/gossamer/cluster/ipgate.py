"""Per-IP politeness across machines: at most `limit` hosts of one IP fetched at once by all
the workers of a crawl together.

A slot is a Redis key taken with `SET NX PX ttl` and a fencing value, refreshed and released
by compare-and-set scripts, so a dead or frozen holder blocks an IP for at most `ttl` seconds
and a late release never frees another holder's slot. A hold also knows until when its slot is
surely its own (its last successful send plus the TTL, minus a margin, on this machine's
monotonic clock); every request goes through the gate's fetcher guard (`guard(fetcher)`),
which starts it at once inside that window and otherwise confirms or re-takes the slot first.
The worker's leases are guarded the same way (`alive_until`, `lease_check`). Waiters are
served first come first served across workers: each IP has a queue of waiting tokens in
Redis, and a slot let go goes to its head, not to the releasing worker's next host.
`waiting(ip)` tells the engine to hand an IP over after the request in hand instead of
keeping it (docs/cluster.md, "Per-IP politeness across machines")."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from ..config import CLUSTER_DEFAULTS
from ..engine.ipgate import LocalIpGate
from ..fetch import Fetching, FetchRequest, FetchResult, FetchStats, StartingFetcher
from ._redis import TRANSIENT, Keys, RedisClient, is_auth_error

__all__ = ["GatedFetcher", "GatedStartingFetcher", "IpGateStats", "RedisIpGate"]

_ACQUIRE = """
-- KEYS: slot 0..n-1, queue, seen. ARGV: token, TTL (ms), waiter TTL (ms)
-- the slot index held by the token (already or now), or -1 (the token waits in the queue).
-- The queue (score: arrival) is first come first served: a token takes a free slot only
-- when fewer tokens wait ahead of it than there are free slots; `seen` (score: last try)
-- drops waiters that stopped trying (a dead or cancelled worker) after the waiter TTL.
local n = #KEYS - 2
local q, seen = KEYS[n + 1], KEYS[n + 2]
local tok = ARGV[1]
for i = 1, n do
  if redis.call('GET', KEYS[i]) == tok then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    redis.call('ZREM', q, tok)
    redis.call('ZREM', seen, tok)
    return i - 1
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = now - tonumber(ARGV[3])
local stale = redis.call('ZRANGEBYSCORE', seen, '-inf', old)
if #stale > 0 then
  redis.call('ZREM', q, unpack(stale))
  redis.call('ZREMRANGEBYSCORE', seen, '-inf', old)
end
local free = 0
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 0 then free = free + 1 end
end
local ahead = redis.call('ZRANK', q, tok)
if not ahead then ahead = redis.call('ZCARD', q) end
if ahead < free then
  for i = 1, n do
    if redis.call('SET', KEYS[i], tok, 'NX', 'PX', ARGV[2]) then
      redis.call('ZREM', q, tok)
      redis.call('ZREM', seen, tok)
      return i - 1
    end
  end
end
redis.call('ZADD', q, 'NX', now, tok)
redis.call('ZADD', seen, now, tok)
redis.call('PEXPIRE', q, 4 * tonumber(ARGV[3]))
redis.call('PEXPIRE', seen, 4 * tonumber(ARGV[3]))
return -1
"""

_RELEASE = """
-- KEYS: slot. ARGV: token. 1 when released, 0 when the slot was not the token's.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_REFRESH = """
-- KEYS: n slots, then the seen keys of their IPs' queues. ARGV: TTL (ms), n, n tokens,
-- waiter TTL (ms). 1/0 per slot (still the token's and refreshed / lost), then 1/0 per
-- queue (a waiter tried within the waiter TTL)
local n = tonumber(ARGV[2])
local out = {}
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[2 + i] then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = now - tonumber(ARGV[3 + n])
for j = n + 1, #KEYS do
  out[j] = redis.call('ZCOUNT', KEYS[j], '(' .. old, '+inf') > 0 and 1 or 0
end
return out
"""


def _boot_clock() -> float:
    """A monotonic clock that also counts suspended time (Linux CLOCK_BOOTTIME)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


_clock = _boot_clock if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic


@dataclass(slots=True)
class _Hold:
    """One held slot: its key, the fencing token, and until when (this machine's clock)
    the slot is surely still ours."""

    ip: str
    key: str
    token: str
    valid_until: float


_HOLD: contextvars.ContextVar[_Hold | None] = contextvars.ContextVar(
    "gossamer_ip_hold", default=None
)


@dataclass(frozen=True, slots=True)
class IpGateStats:
    """Counters of one gate: holds taken, waits (every slot was taken), polls while waiting,
    slots found lost at a refresh, slots confirmed or taken again before a request (after a
    stall), Redis errors waited out."""

    holds: int
    waits: int
    polls: int
    lost: int
    confirmed: int
    redis_errors: int
    held_now: int


class RedisIpGate:
    """The cluster's per-IP gate (the `LocalIpGate`/`FileIpGate` interface: `hold(ip)`,
    `waiting(ip)`), plus `guard(fetcher)`. Use it as an async context manager: it owns
    the loop that refreshes the held slots."""

    def __init__(
        self,
        client: RedisClient,
        crawl: str,
        limit: int,
        *,
        owner: str = "",
        ttl: float = CLUSTER_DEFAULTS.heartbeat_ttl,
        poll: float = 0.005,
        max_poll: float = 0.02,
        refresh: float = 0.25,
        margin: float | None = None,
        io: Executor | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, not {limit}")
        if not ttl > 0.1:
            raise ValueError(f"ttl must be > 0.1 s, not {ttl}")
        self.client = client
        # where Redis calls run: the worker's I/O thread (they are awaited: a paused Redis
        # never blocks the event loop), or inline on the loop's thread when None
        self.io = io
        self.keys = Keys(crawl)
        self.limit = limit
        self.owner = owner or "gate"
        self.ttl = ttl
        self.poll = poll
        self.max_poll = max(poll, max_poll)
        self.refresh = min(refresh, ttl / 4)
        self.margin = min(max(0.2 * ttl, 0.5), ttl / 2) if margin is None else margin
        self._ttl_ms = max(1, round(ttl * 1000))
        # a waiter not trying for this long leaves the IP's queue (a dead or stopped worker)
        self._want_ms = max(500, round(max(self.max_poll * 10, self.refresh * 2) * 1000))
        self._local = LocalIpGate(limit)
        self._acquire_s = client.register_script(_ACQUIRE)
        self._release_s = client.register_script(_RELEASE)
        self._refresh_s = client.register_script(_REFRESH)
        self._tokens = itertools.count(1)
        self._held: dict[str, _Hold] = {}  # token -> hold
        self._wanted: frozenset[str] = frozenset()  # IPs another worker waits for
        self._polling: dict[str, int] = {}  # IP -> hosts of this process waiting for a slot
        self._pollers: dict[str, asyncio.Lock] = {}  # IP -> held by the one host polling
        self._wakers: dict[str, asyncio.Event] = {}  # IP -> set when we let a slot go
        self._key_memo: dict[str, list[str]] = {}
        self._task: asyncio.Task[None] | None = None
        self._holds = self._waits = self._polls = self._lost = self._confirmed = self._errors = 0
        #: until when (this machine's boot clock) the worker surely counts alive and its
        #: leases its own; a request after it awaits `lease_check` first (cluster.joined)
        self.alive_until = math.inf
        self.lease_check: Callable[[FetchRequest], Awaitable[None]] | None = None

    # ------------------------------------------------------------------ life cycle
    async def __aenter__(self) -> RedisIpGate:
        if self._task is None:
            self._task = asyncio.create_task(self._maintain(), name="ip-gate-refresh")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def statistics(self) -> IpGateStats:
        return IpGateStats(
            self._holds,
            self._waits,
            self._polls,
            self._lost,
            self._confirmed,
            self._errors,
            len(self._held),
        )

    # ------------------------------------------------------------------ the gate
    def waiting(self, ip: str) -> bool:
        """Whether a host of this process, or (at the last refresh: in the IP's queue)
        of another worker, waits for a slot of `ip`."""
        return self._local.waiting(ip) or ip in self._polling or ip in self._wanted

    @asynccontextmanager
    async def hold(self, ip: str) -> AsyncIterator[None]:
        """Hold one of the IP's `limit` slots, cluster-wide, for the body; requests made
        through `guard(fetcher)` in the body are fenced by it (see the module docstring)."""
        async with self._local.hold(ip):
            hold = _Hold(ip, "", f"{self.owner}:{next(self._tokens)}", -math.inf)
            await self._take(hold)
            self._held[hold.token] = hold
            self._holds += 1
            reset = _HOLD.set(hold)
            try:
                yield
            finally:
                _HOLD.reset(reset)
                del self._held[hold.token]
                await self._release(hold)
                woken = self._wakers.get(ip)
                if woken is not None:  # our poller for the IP tries again now
                    woken.set()

    def guard(self, fetcher: Fetching) -> GatedFetcher:
        """`fetcher` with every request fenced by the current task's hold (with its fast
        path, when it has one: a `GatedStartingFetcher`)."""
        if isinstance(fetcher, StartingFetcher):
            return GatedStartingFetcher(fetcher, self)
        return GatedFetcher(fetcher, self)

    def _slot_keys(self, ip: str) -> list[str]:
        keys = self._key_memo.get(ip)
        if keys is None:
            if len(self._key_memo) > 100_000:
                self._key_memo.clear()
            keys = [self.keys.ip_slot(ip, k) for k in range(self.limit)]
            keys.append(self.keys.ip_queue(ip))
            keys.append(self.keys.ip_seen(ip))
            self._key_memo[ip] = keys
        return keys

    async def _take(self, hold: _Hold) -> None:
        """Take (or confirm) a slot for `hold`'s token, waiting while all are taken.

        Only one host of this process polls Redis for an IP: the others wait behind it
        (`_pollers`), and a slot this process lets go wakes the poller at once (`_wakers`)
        instead of at its next poll. Each waiting host polled on its own before, up to
        `per_ip` of them (the local gate lets no more through): at `per_ip` 64, 64 scripts
        of up to 129 key operations each every 5–20 ms per worker and per IP, the same storm
        as the pool's lock files (issue 21). Across workers this still polls — a released
        slot is found within `max_poll` — because a blocking wait (BLPOP, or a pub/sub
        message) would need a connection and a thread of its own per worker: the worker's
        Redis calls share one I/O thread with its frontier, which a blocking call stalls."""
        if await self._try(hold):
            return
        ip = hold.ip
        self._waits += 1
        self._polling[ip] = self._polling.get(ip, 0) + 1
        poller = self._pollers.get(ip)
        if poller is None:
            poller = self._pollers[ip] = asyncio.Lock()
        try:
            async with poller:  # behind this process's other waiters of the IP
                wait = self.poll
                while not await self._try(hold):
                    self._polls += 1
                    woken = self._wakers[ip] = asyncio.Event()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait):
                            await woken.wait()
                    if self._wakers.get(ip) is woken:
                        del self._wakers[ip]
                    wait = min(wait * 1.5, self.max_poll)
        finally:
            if self._polling[ip] == 1:
                del self._polling[ip]
                if not poller.locked() and self._pollers.get(ip) is poller:
                    del self._pollers[ip]
            else:
                self._polling[ip] -= 1

    async def _try(self, hold: _Hold) -> bool:
        """One try to take (or confirm) a slot for `hold`: False when every slot is taken
        (the IP is marked wanted). Redis errors are waited out here."""
        keys = self._slot_keys(hold.ip)
        args: list[str | int] = [hold.token, self._ttl_ms, self._want_ms]
        pause = self.poll
        while True:
            sent = _clock()
            try:
                k = int(cast(int, await self._redis(self._acquire_s, keys=keys, args=args)))
            except TRANSIENT as exc:
                if is_auth_error(exc):  # a password changed: waiting cannot help
                    raise
                self._errors += 1
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            if k < 0:
                return False
            hold.key = keys[k]
            hold.valid_until = sent + self.ttl - self.margin
            return True

    async def _redis(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`call(*args, **kwargs)` on the I/O thread (`io`), or inline without one."""
        if self.io is None:
            return call(*args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.io, functools.partial(call, *args, **kwargs))

    async def _release(self, hold: _Hold) -> None:
        if not hold.key:
            return
        try:
            await self._redis(self._release_s, keys=[hold.key], args=[hold.token])
        except TRANSIENT:  # the slot expires by itself within the TTL
            self._errors += 1

    async def confirm(self, hold: _Hold) -> None:
        """Make sure `hold`'s slot is still its own before a request (after a stall): keep
        it, or take a slot again, waiting for the IP like any waiter."""
        await self._take(hold)
        self._confirmed += 1

    async def _maintain(self) -> None:
        """Every `refresh` seconds: extend the held slots (those found lost are marked so),
        and learn which of the held IPs other workers want."""
        while True:
            await asyncio.sleep(self.refresh)
            # the held slots are read here, on the loop's thread (which changes them), and
            # the round trip made on the I/O thread
            holds = [h for h in self._held.values() if h.key]
            await self._redis(self._refresh, holds)

    def refresh_now(self) -> None:
        """One refresh round (see `_maintain`), inline."""
        self._refresh([h for h in self._held.values() if h.key])

    def _refresh(self, holds: list[_Hold]) -> None:
        if not holds:
            self._wanted = frozenset()
            return
        ips = sorted({h.ip for h in holds})
        keys = [h.key for h in holds] + [self.keys.ip_seen(ip) for ip in ips]
        args: list[Any] = [self._ttl_ms, len(holds), *(h.token for h in holds), self._want_ms]
        sent = _clock()
        try:
            reply = cast(list[int], self._refresh_s(keys=keys, args=args))
        except TRANSIENT:
            self._errors += 1
            return
        for h, ok in zip(holds, reply, strict=False):
            if ok:
                h.valid_until = max(h.valid_until, sent + self.ttl - self.margin)
            elif h.valid_until != -math.inf:
                h.valid_until = -math.inf  # the next request takes a slot again first
                self._lost += 1
        self._wanted = frozenset(ip for ip, w in zip(ips, reply[len(holds) :], strict=True) if w)


class GatedFetcher:
    """A fetcher whose requests are fenced by the IP hold of the task making them: a request
    goes out at once while the hold's slot is surely valid, and after the slot is confirmed
    or taken again otherwise. `fetch` and `aclose` as the wrapped fetcher; `guard()` gives
    a `GatedStartingFetcher` (with `start` and `poll`) for a fetcher with the fast path."""

    def __init__(self, inner: Fetching, gate: RedisIpGate) -> None:
        self.inner = inner
        self.gate = gate

    async def fetch(self, request: FetchRequest) -> FetchResult:
        gate = self.gate
        if gate.lease_check is not None and _clock() >= gate.alive_until:
            await gate.lease_check(request)  # (raises StaleLeaseError: the lease was lost)
        hold = _HOLD.get()
        if hold is not None and _clock() >= hold.valid_until:
            await self.gate.confirm(hold)
        return await self.inner.fetch(request)

    def statistics(self) -> FetchStats:
        """The wrapped fetcher's counters (none when it keeps none)."""
        inner = self.inner
        return inner.statistics() if isinstance(inner, _Statistics) else FetchStats()

    async def aclose(self) -> None:
        inner = self.inner
        if isinstance(inner, _Closing):
            await inner.aclose()


class GatedStartingFetcher(GatedFetcher):
    """`GatedFetcher` with the fast path of the wrapped fetcher: `start` goes straight to the
    wrapped fetcher's while the hold is surely valid (else a task around the fenced
    `fetch`), `poll` is the wrapped fetcher's."""

    def __init__(self, inner: StartingFetcher, gate: RedisIpGate) -> None:
        super().__init__(inner, gate)
        self._inner_start = inner.start
        self.poll = inner.poll  # (a bound method: no extra call on the hot path)

    def start(self, request: FetchRequest) -> asyncio.Future[FetchResult]:
        hold = _HOLD.get()
        now = _clock()
        if (hold is None or now < hold.valid_until) and now < self.gate.alive_until:
            return self._inner_start(request)
        return asyncio.ensure_future(self.fetch(request))


@runtime_checkable
class _Statistics(Protocol):
    def statistics(self) -> FetchStats: ...


@runtime_checkable
class _Closing(Protocol):
    async def aclose(self) -> None: ...


if TYPE_CHECKING:
    from ..engine.seams import IpGate

    def _conforms(gate: RedisIpGate, fetcher: GatedStartingFetcher) -> tuple[IpGate, Any]:
        fast: StartingFetcher = fetcher  # mypy checks the gate and the fast path's guard
        return gate, fast

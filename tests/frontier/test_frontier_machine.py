"""A Hypothesis state machine: a backend against the in-memory reference, on a fake clock.

Every step is applied to the backend under test and to `MemoryFrontier` (the model), and their
answers must agree exactly: lease choices (hosts by next-fetch time then name, URLs by priority
then FIFO), expiries, counts, politeness timing, the hosts as a display reads them.
Independently of the model the machine checks what must never happen: a URL or a host in two
live leases, a stale token accepted, a change made by a refused call, a URL lost (draining at
the end accounts for every discovered URL).
SQLite runs add reopening the file and a second connection sharing it (another "process").
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest
from _frontier_helpers import FakeClock, check_sqlite_counters, fp_of
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from gossamer.frontier import (
    Discovered,
    Frontier,
    FrontierStats,
    HostBatch,
    HostsView,
    MemoryFrontier,
    Outcome,
    Outlinks,
    SqliteFrontier,
    StaleLeaseError,
    Verdict,
)
from gossamer.frontier.redis import RedisClient, RedisFrontier, connect, disconnect
from gossamer.testweb.redisd import RedisClusterServers, RedisServer

HOSTS = ("a.example", "b.example", "c.example")
PENDING_FIELDS = ("duplicates_seen", "dropped_by_budget")  # per-connection until flushed
KINDS = ("skip", "done", "done404", "failed", "retry500", "429", "503ra", "neterr", "neterr_fail")


def discovered(h: int, i: int, prio: int) -> Discovered:
    host = HOSTS[h]
    url = f"http://{host}/p{i}"
    return Discovered(url, host, prio, fp_of(url), prio, f"http://{host}/" if i else None)


def linked(h: int, i: int, depth: int, parent: tuple[int, int], delta: int) -> Discovered:
    """URL i of host h found at `depth` on URL parent[1] of host parent[0]."""
    host = HOSTS[h]
    url = f"http://{host}/p{i}"
    up = f"http://{HOSTS[parent[0]]}/p{parent[1]}"
    return Discovered(url, host, depth, fp_of(url), depth, up, fp_of(up), delta)


def outcome(kind: str, u: Any, elapsed: float | None) -> Outcome:
    v, status, ra, err = {
        "done": (Verdict.DONE, 200, None, None),
        "done404": (Verdict.DONE, 404, None, "fetch/status/404"),
        "failed": (Verdict.FAILED, None, None, "robots/disallowed"),
        "retry500": (Verdict.RETRY, 500, None, "fetch/status/500"),
        "429": (Verdict.RETRY, 429, None, "fetch/status/429"),
        "503ra": (Verdict.RETRY, 503, 2.0, "fetch/status/503"),
        "neterr": (Verdict.RETRY, None, None, "fetch/error/timeout"),
        "neterr_fail": (Verdict.FAILED, None, None, "fetch/error/reset"),
    }[kind]
    return Outcome(u.url, u.fp, v, status=status, retry_after=ra, error=err, elapsed=elapsed)


def view(b: HostBatch) -> tuple[Any, ...]:
    return (
        b.host,
        b.expires_at,
        tuple((u.url, u.fp, u.depth, u.parent, u.attempts) for u in b.urls),
    )


def as_tuple(s: FrontierStats, skip: tuple[str, ...] = ()) -> tuple[Any, ...]:
    return tuple(
        (name, getattr(s, name)) for name in FrontierStats.__dataclass_fields__ if name not in skip
    )


class FrontierMachine(RuleBasedStateMachine):
    """Override `open_backend` (and `persistent`) to run another backend."""

    options: ClassVar[dict[str, Any]] = {
        "lease_ttl": 10.0,
        "max_attempts": 2,
        "host_budget": 5,
        "max_pages": 9,
        "default_delay": 1.0,
        "max_crawl_delay": 3.0,
        "adaptive_factor": 0.5,
        "max_host_errors": 3,
        "backoff_base": 1.0,
        "backoff_max": 4.0,
        "max_retry_after": 5.0,
    }
    persistent = False

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="frontier-machine-"))
        self.clock = FakeClock()
        self.model = MemoryFrontier(clock=self.clock, **self.options)
        self.suts: list[Frontier] = [self.open_backend()]
        self.live: dict[str, tuple[str, HostBatch, float]] = {}  # token -> model token, batch, exp
        self.stale: list[HostBatch] = []

    def open_backend(self) -> Frontier:
        return MemoryFrontier(clock=self.clock, **self.options)

    def sut(self, which: int) -> Frontier:
        return self.suts[which % len(self.suts)]

    def _retire_expired(self, now: float) -> None:
        """Leases expired at `now` are reclaimed by the next lease/reclaim: their tokens die."""
        for token, (_, b, exp) in list(self.live.items()):
            if exp <= now:
                del self.live[token]
                self.stale.append(b)

    # ------------------------------------------------------------------ rules
    @initialize(picks=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), max_size=4))
    def seed(self, picks: list[tuple[int, int]]) -> None:
        batch = [discovered(h, i, 0) for h, i in picks]
        assert self.suts[0].put_discovered(batch) == self.model.put_discovered(batch)

    @rule(
        picks=st.lists(
            st.tuples(st.integers(0, 2), st.integers(0, 8), st.integers(0, 2)), max_size=6
        ),
        which=st.integers(0, 1),
    )
    def discover(self, picks: list[tuple[int, int, int]], which: int) -> None:
        batch = [discovered(h, i, p) for h, i, p in picks]
        assert self.sut(which).put_discovered(batch) == self.model.put_discovered(batch)

    @rule(max_hosts=st.integers(0, 3), per_host=st.integers(0, 4), which=st.integers(0, 1))
    def lease(self, max_hosts: int, per_host: int, which: int) -> None:
        now = self.clock()
        if max_hosts and per_host:  # lease(0, …) does nothing, not even reclaim
            self._retire_expired(now)
        got = self.sut(which).lease(max_hosts, per_host, now=now)
        want = self.model.lease(max_hosts, per_host, now=now)
        assert [view(b) for b in got] == [view(b) for b in want]
        held = {b.host for _, b, _ in self.live.values()}
        for g, w in zip(got, want, strict=True):
            assert g.host not in held and g.urls
            assert g.token not in self.live and all(g.token != b.token for b in self.stale)
            self.live[g.token] = (w.token, g, g.expires_at)

    @precondition(lambda self: self.options.get("max_depth") is not None)
    @rule(
        picks=st.lists(
            st.tuples(
                st.integers(0, 2),  # host
                st.integers(0, 8),  # URL
                st.integers(0, 4),  # depth offered
                st.tuples(st.integers(0, 2), st.integers(0, 8)),  # the page it is found on
                st.sampled_from([0, 1]),  # the edge's delta (0: a redirect)
            ),
            max_size=6,
        ),
        which=st.integers(0, 1),
    )
    def discover_links(
        self, picks: list[tuple[int, int, int, tuple[int, int], int]], which: int
    ) -> None:
        """Links found on pages (leased, done, queued or unknown): depth relaxation."""
        batch = [linked(h, i, d, parent, delta) for h, i, d, parent, delta in picks]
        assert self.sut(which).put_discovered(batch) == self.model.put_discovered(batch)

    @precondition(lambda self: self.options.get("max_depth") is not None)
    @rule(
        page=st.tuples(st.integers(0, 2), st.integers(0, 8)),
        depth=st.integers(0, 3),  # the depth the page was fetched at, as the engine saw it
        children=st.lists(
            st.tuples(st.integers(0, 2), st.integers(0, 8), st.sampled_from([0, 1])),
            max_size=5,
            unique_by=lambda c: c[:2],
        ),
        which=st.integers(0, 1),
    )
    def discover_outlinks(
        self,
        page: tuple[int, int],
        depth: int,
        children: list[tuple[int, int, int]],
        which: int,
    ) -> None:
        """A page's links sent as edges only (Outlinks): recorded, and relaxed at once when
        the page is already shallower than `depth`."""
        url = f"http://{HOSTS[page[0]]}/p{page[1]}"
        kids = [f"http://{HOSTS[h]}/p{i}" for h, i, _ in children]
        rec = Outlinks(
            url,
            fp_of(url),
            depth,
            [fp_of(k) for k in kids],
            [HOSTS[h] for h, _, _ in children],
            [delta for _, _, delta in children],
        )
        assert self.sut(which).put_discovered([rec]) == self.model.put_discovered([rec])

    @precondition(lambda self: self.live)
    @rule(data=st.data(), which=st.integers(0, 1))
    def complete(self, data: st.DataObject, which: int) -> None:
        token = data.draw(st.sampled_from(list(self.live)))
        model_token, batch, _ = self.live.pop(token)
        outcomes = []
        for u in batch.urls:
            kind = data.draw(st.sampled_from(KINDS))
            if kind != "skip":
                elapsed = data.draw(st.sampled_from([None, 0.5, 4.0]))
                outcomes.append(outcome(kind, u, elapsed))
        outcomes = data.draw(st.permutations(outcomes))
        lower = data.draw(st.sampled_from([None, 0.0, 2.5, 8.0]))
        nfa = None if lower is None else self.clock() + lower
        renew = data.draw(st.sampled_from([0, 0, 1, 3]))
        got = self.sut(which).complete(token, outcomes, nfa, renew)
        want = self.model.complete(model_token, outcomes, nfa, renew)
        self.stale.append(batch)
        assert (got is None) == (want is None)
        event("renewed" if got is not None else "released")
        if got is not None and want is not None:  # a renewal is a new, live lease
            assert view(got) == view(want) and got.host == batch.host
            assert got.token not in self.live and all(got.token != b.token for b in self.stale)
            self.live[got.token] = (want.token, got, got.expires_at)

    @precondition(lambda self: self.stale)
    @rule(data=st.data(), which=st.integers(0, 1))
    def stale_calls_are_refused(self, data: st.DataObject, which: int) -> None:
        batch = data.draw(st.sampled_from(self.stale))
        f = self.sut(which)
        before = as_tuple(f.statistics())
        acks = [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in batch.urls]
        with pytest.raises(StaleLeaseError):
            f.complete(batch.token, acks)
        with pytest.raises(StaleLeaseError):
            f.extend(batch.token, self.clock() + 1000)
        assert as_tuple(f.statistics()) == before

    @precondition(lambda self: self.live)
    @rule(data=st.data(), which=st.integers(0, 1))
    def foreign_outcome_is_refused(self, data: st.DataObject, which: int) -> None:
        token = data.draw(st.sampled_from(list(self.live)))
        f = self.sut(which)
        before = as_tuple(f.statistics())
        stranger = Outcome("http://elsewhere.example/", fp_of("x"), Verdict.DONE, 200)
        with pytest.raises(ValueError):
            f.complete(token, [stranger])
        assert as_tuple(f.statistics()) == before

    @precondition(lambda self: self.live)
    @rule(data=st.data(), dt=st.sampled_from([-3.0, 5.0, 15.0, 40.0]), which=st.integers(0, 1))
    def extend(self, data: st.DataObject, dt: float, which: int) -> None:
        token = data.draw(st.sampled_from(list(self.live)))
        model_token, batch, exp = self.live[token]
        until = self.clock() + dt
        assert self.sut(which).extend(token, until) == self.model.extend(model_token, until)
        self.live[token] = (model_token, batch, max(exp, until))

    @rule(dt=st.sampled_from([0.5, 1.0, 2.0, 4.0, 11.0]))
    def advance_clock(self, dt: float) -> None:
        self.clock.advance(dt)

    @rule(which=st.integers(0, 1))
    def reclaim(self, which: int) -> None:
        now = self.clock()
        self._retire_expired(now)
        assert self.sut(which).reclaim_expired(now) == self.model.reclaim_expired(now)

    @rule(
        h=st.integers(0, 2), delay=st.sampled_from([None, 0.0, 2.0, 9.0]), which=st.integers(0, 1)
    )
    def set_host_delay(self, h: int, delay: float | None, which: int) -> None:
        self.sut(which).set_host_delay(HOSTS[h], delay)
        self.model.set_host_delay(HOSTS[h], delay)

    @precondition(lambda self: self.persistent)
    @rule()
    def reopen(self) -> None:
        for f in self.suts:
            f.close()
        self.suts = [self.open_backend()]

    @precondition(lambda self: self.persistent and len(self.suts) == 1)
    @rule()
    def second_connection(self) -> None:
        self.suts.append(self.open_backend())

    # ------------------------------------------------------------------ invariants
    @invariant()
    def agrees_with_the_model(self) -> None:
        skip = PENDING_FIELDS if len(self.suts) > 1 else ()
        want = as_tuple(self.model.statistics(), skip)
        for f in self.suts:
            assert as_tuple(f.statistics(), skip) == want

    @invariant()
    def hosts_agree_with_the_model(self) -> None:
        want = {v.host: v for v in self.model.top_hosts(100)}
        uncounted = {h: replace(v, fetched=None) for h, v in want.items()}
        for f in self.suts:
            assert isinstance(f, HostsView)
            got = {v.host: v for v in f.top_hosts(100)}
            # Redis counts a host's URLs only under a host budget
            counts = not isinstance(f, RedisFrontier) or f.options.host_budget is not None
            assert got == (want if counts else uncounted)

    @invariant()
    def leases_are_exclusive(self) -> None:
        hosts = [b.host for _, b, _ in self.live.values()]
        fps = [u.fp for _, b, _ in self.live.values() for u in b.urls]
        assert len(hosts) == len(set(hosts))
        assert len(fps) == len(set(fps))
        s = self.suts[0].statistics()
        assert s.leased == len(fps) and s.leased_hosts == len(hosts)
        limit = self.options["max_pages"]
        assert limit is None or s.published <= limit

    def teardown(self) -> None:
        try:
            if hasattr(self, "suts"):
                self._drain()
        finally:
            for f in getattr(self, "suts", []):
                f.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _drain(self) -> None:
        """Every discovered URL ends done or failed (or queued beyond max_pages)."""
        for f in self.suts[1:]:
            f.close()
        self.suts = self.suts[:1]
        f = self.suts[0]
        self.clock.advance(1e6)
        f.reclaim_expired(float("inf"))
        self.model.reclaim_expired(float("inf"))
        self.clock.advance(1e6)  # reclaimed hosts rest their delay from now
        queued = f.statistics().queued
        drained: list[int] = []
        for _ in range(1000):
            got = f.lease(10, 100)
            want = self.model.lease(10, 100)
            assert [view(b) for b in got] == [view(b) for b in want]
            if not got:
                break
            for g, w in zip(got, want, strict=True):
                acks = [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in g.urls]
                f.complete(g.token, acks)
                self.model.complete(w.token, acks)
                drained += [u.fp for u in g.urls]
            self.clock.advance(100.0)
        s = f.statistics()
        assert len(drained) == len(set(drained))
        assert s.leased == 0
        limit = self.options["max_pages"]
        if limit is None or s.done < limit:
            assert s.queued == 0 and len(drained) == queued
        assert s.discovered == s.queued + s.done + s.failed
        assert as_tuple(s) == as_tuple(self.model.statistics())
        if self.persistent:  # reopen: the per-connection counters were flushed
            f.close()
            self.suts = [self.open_backend()]
            assert as_tuple(self.suts[0].statistics()) == as_tuple(self.model.statistics())
            self.check_store()

    def check_store(self) -> None:
        """Backend-specific checks of what a reopened store holds."""


class SqliteMachine(FrontierMachine):
    persistent = True

    def open_backend(self) -> Frontier:
        return SqliteFrontier(self.tmp / "f.sqlite", clock=self.clock, **self.options)

    def check_store(self) -> None:
        check_sqlite_counters(self.tmp / "f.sqlite")


_SERVERS: dict[str, Any] = {}


def _redis_client(cluster: bool) -> RedisClient:
    """A real redis-server (or 3-master Redis Cluster) shared by every example of the
    session (Hypothesis machines cannot take pytest fixtures); each example is a new crawl."""
    key = "cluster" if cluster else "single"
    if key not in _SERVERS:
        directory = Path(tempfile.mkdtemp(prefix=f"frontier-machine-redis-{key}-"))
        server = RedisClusterServers(directory) if cluster else RedisServer(directory)
        server.__enter__()
        client = connect(server.url)
        atexit.register(server.stop)
        atexit.register(disconnect, client)
        _SERVERS[key] = (server, client)
    return cast(RedisClient, _SERVERS[key][1])


class RedisMachine(FrontierMachine):
    """The Redis backend against the model; a reopen is a new client object on the same
    crawl (nothing cached: completes go through the store)."""

    persistent = True
    cluster = False

    def open_backend(self) -> Frontier:
        if not hasattr(self, "crawl"):
            self.crawl = f"m{uuid.uuid4().hex[:12]}"
        client = _redis_client(self.cluster)
        return RedisFrontier(client, self.crawl, clock=self.clock, **self.options)

    def teardown(self) -> None:
        super().teardown()
        RedisFrontier(_redis_client(self.cluster), self.crawl, clock=self.clock).delete()


class RedisUnlimitedMachine(RedisMachine):
    options: ClassVar[dict[str, Any]] = {
        **FrontierMachine.options,
        "max_pages": None,
        "host_budget": None,
        "max_host_errors": None,
        "max_attempts": 3,
        "default_delay": 0.0,
    }


class RedisClusterMachine(RedisMachine):
    cluster = True


class SqliteUnlimitedMachine(SqliteMachine):
    options: ClassVar[dict[str, Any]] = {
        **FrontierMachine.options,
        "max_pages": None,
        "host_budget": None,
        "max_host_errors": None,
        "max_attempts": 3,
        "default_delay": 0.0,  # hosts need no rest: complete(…, renew) hands them back
    }


class DepthMachine(FrontierMachine):
    """With a max_depth: URLs parked, depths lowered, recorded children relaxed. (No host
    budget: a URL the budget refuses is not remembered alike by every backend.)"""

    options: ClassVar[dict[str, Any]] = {
        **FrontierMachine.options,
        "max_depth": 2,
        "host_budget": None,
    }


class SqliteDepthMachine(SqliteMachine):
    options = DepthMachine.options


# (No Redis depth machine: Redis keeps a lowered queued URL where it is in its host's queue,
# so its lease order may differ from the model's; tests/frontier/test_frontier_contract.py
# and tests/e2e/test_crawl_depth.py check its depths.)


_settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestMemoryMachine = FrontierMachine.TestCase
TestMemoryMachine.settings = _settings
TestSqliteMachine = pytest.mark.slow(SqliteMachine.TestCase)
TestSqliteMachine.settings = settings(_settings, max_examples=150)
TestSqliteUnlimitedMachine = pytest.mark.slow(SqliteUnlimitedMachine.TestCase)
TestSqliteUnlimitedMachine.settings = _settings
TestRedisMachine = pytest.mark.slow(RedisMachine.TestCase)
TestRedisMachine.settings = settings(_settings, max_examples=100)
TestRedisUnlimitedMachine = pytest.mark.slow(RedisUnlimitedMachine.TestCase)
TestRedisUnlimitedMachine.settings = _settings
TestMemoryDepthMachine = DepthMachine.TestCase
TestMemoryDepthMachine.settings = _settings
TestSqliteDepthMachine = pytest.mark.slow(SqliteDepthMachine.TestCase)
TestSqliteDepthMachine.settings = settings(_settings, max_examples=150)
TestRedisClusterMachine = pytest.mark.slow(RedisClusterMachine.TestCase)
TestRedisClusterMachine.settings = settings(_settings, max_examples=40)

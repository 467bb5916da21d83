"""The host delay's two copies agree: `host_delay` in lua/shard.lua (the Redis frontier's
scripts: complete.lua adds the capped Crawl-delay, reclaim.lua rests a reclaimed host) and
`gossamer.frontier.host_delay` (every Python caller), on a real redis-server. The Lua
function is run alone over a table of cases, then through the frontier's own scripts, whose
next fetch times `top_hosts` shows."""

from __future__ import annotations

import pytest
from _frontier_helpers import FakeClock, done, items

from gossamer.frontier import host_delay
from gossamer.frontier.redis import RedisFrontier, connect, disconnect
from gossamer.frontier.redis._scripts import lua_source

A = "a.example"

#: (configured delay, robots.txt Crawl-delay or None, adaptive delay, cap on the last two)
CASES = [
    (1.0, None, 0.0, 30.0),  # no Crawl-delay: the configured delay
    (1.0, 0.5, 0.0, 30.0),  # a Crawl-delay below the configured delay
    (1.0, 4.0, 0.0, 30.0),  # above it
    (1.0, 3600.0, 0.0, 30.0),  # above the cap: the cap
    (0.0, 30.0, 0.0, 30.0),  # at the cap
    (0.0, 3600.0, 0.0, 0.0),  # cap 0: the Crawl-delay counts for nothing
    (2.0, 3600.0, 0.0, 0.0),  # … and the configured delay still holds
    (1.0, 0.0, 0.0, 30.0),  # Crawl-delay: 0
    (0.0, None, 0.0, 30.0),  # no delay at all
    (0.25, 2.75, 0.0, 30.0),  # fractions
    (0.1, 0.30000000000000004, 0.0, 0.3),  # a Crawl-delay a hair above the cap
    (0.5, 1e-9, 0.0, 30.0),
    (1.5, 2.5, 0.0, 2.25),  # a fractional cap below the Crawl-delay
    (1.0, None, 7.0, 30.0),  # an adaptive delay above the configured delay
    (1.0, None, 70.0, 30.0),  # … above the cap
    (1.0, 3.0, 5.0, 10.0),  # adaptive above the Crawl-delay
    (1.0, 5.0, 3.0, 10.0),  # Crawl-delay above adaptive
    (5.0, 3600.0, 100.0, 30.0),  # both above the cap
    (3.0, 0.5, 0.5, 30.0),  # the configured delay above both
]


def _num(x: float) -> str:
    return repr(float(x))  # as the frontier sends numbers to its scripts


def test_the_lua_host_delay_equals_the_python_one(redis_url: str) -> None:
    # lua/shard.lua is every shard script's prelude; its host_delay is called alone
    lua = (
        lua_source("shard")
        + "\nreturn fmt(host_delay(tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])))"
    )
    client = connect(redis_url)
    try:
        for default, cd, ad, cap in CASES:
            args = (_num(default), "" if cd is None else _num(cd), _num(ad), _num(cap))
            got = float(client.eval(lua, 0, *args))
            assert got == host_delay(default, cd, cap, ad), (default, cd, ad, cap)
    finally:
        disconnect(client)


@pytest.mark.parametrize(("default", "cd", "cap"), [(d, c, m) for d, c, a, m in CASES if not a])
def test_the_frontiers_scripts_rest_a_host_by_the_python_delay(
    redis_url: str, default: float, cd: float | None, cap: float
) -> None:
    """complete.lua (a batch done) and reclaim.lua (a lease expired) set the host's next
    fetch to now + host_delay(…)."""
    clock = FakeClock()
    client = connect(redis_url)
    f = RedisFrontier(client, "delay", clock=clock, default_delay=default,
                      max_crawl_delay=cap, lease_ttl=10.0)  # fmt: skip
    try:
        want = host_delay(default, cd, cap)
        f.put_discovered(items(A, 3))
        f.set_host_delay(A, cd)
        (b,) = f.lease(1, 1)
        f.complete(b.token, [done(b.urls[0])])
        assert f.top_hosts(1)[0].next_fetch_at == clock.t + want
        clock.advance(want)
        assert len(f.lease(1, 1)) == 1
        clock.advance(10.0)
        assert f.reclaim_expired() == 1
        (view,) = f.top_hosts(1)
        assert (view.next_fetch_at, view.delay, view.crawl_delay) == (clock.t + want, want, cd)
    finally:
        f.delete()
        f.close()
        disconnect(client)

"""Fixtures shared by the frontier tests: a fake clock and one fixture over every backend.

A backend joins the contract suite by adding one entry to `BACKENDS`: SQLite, the in-memory
reference, Redis (a real redis-server) and Redis Cluster (three real masters).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _frontier_helpers import FakeClock
from hypothesis import Phase, settings

from gossamer.frontier import Frontier, MemoryFrontier, SqliteFrontier
from gossamer.frontier.redis import RedisFrontier, connect, disconnect


@dataclass
class Backend:
    """How to build (and, for persistent stores, reopen) one backend."""

    name: str
    make: Callable[..., Frontier]  # make(clock=..., **options)
    persistent: bool


def _sqlite(tmp: Path, request: pytest.FixtureRequest) -> Callable[..., Frontier]:
    counter = iter(range(1_000_000))

    def make(**kw: Any) -> Frontier:
        path = kw.pop("path", None) or tmp / f"frontier-{next(counter)}.sqlite"
        return SqliteFrontier(path, **kw)

    return make


def _redis(
    fixture: str, seen: str = "exact"
) -> Callable[[Path, pytest.FixtureRequest], Callable[..., Frontier]]:
    """Frontiers on the session's Redis (emptied for the test); `path` names a crawl, so a
    second frontier with the same `path` reopens the first one's crawl."""

    def factory(tmp: Path, request: pytest.FixtureRequest) -> Callable[..., Frontier]:
        client = connect(request.getfixturevalue(fixture))
        request.addfinalizer(lambda: disconnect(client))
        counter = iter(range(1_000_000))

        def make(**kw: Any) -> Frontier:
            path = kw.pop("path", None)
            crawl = f"p{abs(hash(str(path)))}" if path else f"t{next(counter)}"
            return RedisFrontier(client, crawl, seen=seen, **kw)

        return make

    return factory


def _memory(tmp: Path, request: pytest.FixtureRequest) -> Callable[..., Frontier]:
    return lambda **kw: MemoryFrontier(**kw)


Factory = Callable[[Path, pytest.FixtureRequest], Callable[..., Frontier]]
BACKENDS: dict[str, tuple[Factory, bool]] = {  # name -> (factory, persistent)
    "memory": (_memory, False),
    "sqlite": (_sqlite, True),
    "redis": (_redis("redis_url"), True),
    "redis-bloom": (_redis("redis_url", "bloom"), True),
    "redis-cluster": (_redis("redis_cluster_url"), True),
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    factory, persistent = BACKENDS[request.param]
    return Backend(request.param, factory(tmp_path, request), persistent)


@pytest.fixture
def make(backend: Backend, clock: FakeClock) -> Iterator[Callable[..., Frontier]]:
    """make(**options) -> a new frontier of the backend under test, on the fake clock."""
    made: list[Frontier] = []

    def _make(**kw: Any) -> Frontier:
        kw.setdefault("clock", clock)
        f = backend.make(**kw)
        made.append(f)
        return f

    yield _make
    for f in made:
        f.close()


# `pytest --hypothesis-profile=frontier-noshrink` reports failures without shrinking them
# (used when checking that the state machine catches planted bugs).
settings.register_profile(
    "frontier-noshrink", phases=[Phase.explicit, Phase.reuse, Phase.generate], print_blob=True
)

"""Fixtures shared by the frontier tests: a fake clock and one fixture over every backend.

A new backend (Redis) joins the contract suite by adding one entry to `BACKENDS`.
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


@dataclass
class Backend:
    """How to build (and, for persistent stores, reopen) one backend."""

    name: str
    make: Callable[..., Frontier]  # make(clock=..., **options)
    persistent: bool


def _sqlite(tmp: Path) -> Callable[..., Frontier]:
    counter = iter(range(1_000_000))

    def make(**kw: Any) -> Frontier:
        path = kw.pop("path", None) or tmp / f"frontier-{next(counter)}.sqlite"
        return SqliteFrontier(path, **kw)

    return make


BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "memory": lambda tmp: Backend("memory", lambda **kw: MemoryFrontier(**kw), False),
    "sqlite": lambda tmp: Backend("sqlite", _sqlite(tmp), True),
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return BACKENDS[request.param](tmp_path)


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

"""SqliteFrontier.settle: a batch's links and its completion in one write transaction, with
the same result as put_discovered then complete."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _frontier_helpers import FakeClock, check_sqlite_counters, done, items, stats_tuple

from gossamer.frontier import Outcome, SqliteFrontier, Verdict

A, B = "a.example", "b.example"


def _frontier(path: Path, **kw: object) -> SqliteFrontier:
    return SqliteFrontier(path, clock=FakeClock(), **kw)  # type: ignore[arg-type]


def _commits(f: SqliteFrontier) -> list[str]:
    """Record the statements the frontier's connection runs from now on."""
    seen: list[str] = []
    f._db.set_trace_callback(seen.append)
    return seen


@pytest.mark.parametrize("max_depth", [None, 20])
def test_settle_equals_put_then_complete(tmp_path: Path, max_depth: int | None) -> None:
    kw = {"max_depth": max_depth} if max_depth is not None else {}
    one, two = _frontier(tmp_path / "one.sqlite", **kw), _frontier(tmp_path / "two.sqlite", **kw)
    for f in (one, two):
        f.put_discovered(items(A, 3))
    (a1,), (a2,) = one.lease(1, 3), two.lease(1, 3)
    new = items(A, 2, start=3, depth=1, parent=a1.urls[0].url) + items(B, 2, depth=1)
    queued, renewed, stale = one.settle(a1.token, new, [done(u) for u in a1.urls], None, 2)
    assert (queued, stale) == (4, False)
    assert two.put_discovered(new) == 4
    renewed2 = two.complete(a2.token, [done(u) for u in a2.urls], None, 2)
    assert renewed is not None and renewed2 is not None
    assert [u.url for u in renewed.urls] == [u.url for u in renewed2.urls]
    assert stats_tuple(one) == stats_tuple(two)
    for f in (one, two):
        f.close()
    check_sqlite_counters(tmp_path / "one.sqlite")


def test_settle_is_one_transaction(tmp_path: Path) -> None:
    f = _frontier(tmp_path / "f.sqlite")
    f.put_discovered(items(A, 3))
    (a,) = f.lease(1, 3)
    statements = _commits(f)
    f.settle(a.token, items(B, 2), [done(u) for u in a.urls])
    assert sum(s.startswith("BEGIN") for s in statements) == 1
    assert sum(s == "COMMIT" for s in statements) == 1
    f.close()


def test_a_stale_lease_still_commits_the_links(tmp_path: Path) -> None:
    f = _frontier(tmp_path / "f.sqlite", lease_ttl=10.0)
    f.put_discovered(items(A, 2))
    (a,) = f.lease(1, 2)
    f.complete(a.token, [done(u) for u in a.urls])  # the lease is over: its token is stale
    queued, renewed, stale = f.settle(a.token, items(B, 3), [done(u) for u in a.urls])
    assert (queued, renewed, stale) == (3, None, True)
    assert f.statistics().queued == 3
    f.close()
    db = sqlite3.connect(tmp_path / "f.sqlite")
    assert db.execute("SELECT count(*) FROM urls").fetchone()[0] == 5
    db.close()


def test_a_failed_settle_applies_nothing(tmp_path: Path) -> None:
    """An outcome the batch does not hold is refused by the complete: the links of the same
    call roll back with it (one transaction), and the frontier stays usable."""
    f = _frontier(tmp_path / "f.sqlite")
    f.put_discovered(items(A, 2))
    (a,) = f.lease(1, 2)
    before = stats_tuple(f)
    foreign = items("c.example", 1)[0]
    with pytest.raises(ValueError):
        f.settle(a.token, items(B, 3), [Outcome(foreign.url, foreign.fp, Verdict.DONE, status=200)])
    assert stats_tuple(f) == before
    assert f.put_discovered(items(B, 3)) == 3  # not taken for duplicates of a rolled-back put
    f.complete(a.token, [done(u) for u in a.urls])
    f.close()
    check_sqlite_counters(tmp_path / "f.sqlite")

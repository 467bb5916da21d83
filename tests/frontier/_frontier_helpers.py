"""Builders and checks shared by the frontier tests."""

from __future__ import annotations

import sqlite3
from array import array
from typing import Any

import xxhash

from gossamer.frontier import Discovered, Frontier, FrontierStats, LeasedURL, Outcome, Verdict


class FakeClock:
    """An injected clock: time moves only when a test says so."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def fp_of(url: str) -> int:
    return xxhash.xxh3_64_intdigest(url.encode())


def url_of(host: str, i: int) -> str:
    return f"http://{host}/p{i}.html"


def item(
    host: str, i: int, *, depth: int = 0, priority: int | None = None, parent: str | None = None
) -> Discovered:
    u = url_of(host, i)
    return Discovered(
        url=u,
        host=host,
        depth=depth,
        fp=fp_of(u),
        priority=depth if priority is None else priority,
        parent=parent,
    )


def items(host: str, n: int, start: int = 0, **kw: Any) -> list[Discovered]:
    return [item(host, i, **kw) for i in range(start, start + n)]


def done(u: LeasedURL, status: int | None = 200, **kw: Any) -> Outcome:
    return Outcome(u.url, u.fp, Verdict.DONE, status=status, **kw)


def failed(u: LeasedURL, **kw: Any) -> Outcome:
    return Outcome(u.url, u.fp, Verdict.FAILED, **kw)


def retry(u: LeasedURL, status: int | None = None, **kw: Any) -> Outcome:
    if status is None:
        kw.setdefault("error", "fetch/error/timeout")
    return Outcome(u.url, u.fp, Verdict.RETRY, status=status, **kw)


def stats_tuple(f: Frontier) -> tuple[Any, ...]:
    s = f.statistics()
    return tuple(getattr(s, name) for name in FrontierStats.__dataclass_fields__)


def check_sqlite_counters(path: Any) -> None:
    """The counters row, per-host pending counts and lease records agree with the tables."""
    db = sqlite3.connect(path)
    try:
        n_urls = db.execute("SELECT count(*) FROM urls").fetchone()[0]
        n_queue = db.execute("SELECT count(*) FROM queue").fetchone()[0]
        n_failed = db.execute("SELECT count(*) FROM failed").fetchone()[0]
        n_leased = db.execute("SELECT coalesce(sum(length(lease)), 0) / 32 FROM hosts").fetchone()
        row = db.execute("SELECT queued, leased, done, failed, hosts FROM counters").fetchone()
        expect = (
            n_queue - n_leased[0],
            n_leased[0],
            n_urls - n_queue - n_failed,
            n_failed,
            db.execute("SELECT count(*) FROM hosts").fetchone()[0],
        )
        assert row == expect, (row, expect)
        bad = db.execute(
            "SELECT h.name, h.pending, (SELECT count(*) FROM queue q WHERE q.host_id = h.id) AS n"
            " FROM hosts h WHERE h.pending != n"
        ).fetchall()
        assert not bad, bad
        both = db.execute("SELECT count(*) FROM queue q JOIN failed f ON f.id = q.id").fetchone()
        assert both[0] == 0
        for host_id, blob in db.execute("SELECT id, lease FROM hosts WHERE lease IS NOT NULL"):
            leased = array("q")
            leased.frombytes(blob)
            for i in range(0, len(leased), 4):
                got = db.execute(
                    "SELECT count(*) FROM queue WHERE host_id = ? AND priority = ? AND id = ?",
                    (host_id, leased[i + 1], leased[i]),
                ).fetchone()[0]
                assert got == 1, ("leased URL not queued", host_id, leased[i])
    finally:
        db.close()


def done_fps(path: Any) -> set[int]:
    """Fingerprints of the URLs a SQLite frontier file holds as done."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT fp FROM urls WHERE id NOT IN (SELECT id FROM queue)"
            " AND id NOT IN (SELECT id FROM failed)"
        ).fetchall()
    db.close()
    return {v + (1 << 64) if v < 0 else v for (v,) in rows}

"""What only the SQLite backend promises: resume, crash safety, processes, storage errors."""

from __future__ import annotations

import errno
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _frontier_helpers import (
    FakeClock,
    check_sqlite_counters,
    done,
    done_fps,
    items,
    stats_tuple,
)
from _frontier_worker import page

from gossamer.frontier import (
    Discovered,
    FrontierStorageError,
    Outlinks,
    SqliteFrontier,
    StaleLeaseError,
)
from gossamer.frontier import sqlite as backend
from gossamer.urls import fingerprint

WORKER = Path(__file__).with_name("_frontier_worker.py")
A, B = "a.example", "b.example"


def open_frontier(path: Path, clock: FakeClock, **kw: object) -> SqliteFrontier:
    return SqliteFrontier(path, clock=clock, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- resume


def test_reopen_resumes_everything(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "f.sqlite"
    f = open_frontier(path, clock, lease_ttl=30.0, default_delay=2.0)
    f.put_discovered(items(A, 4) + items(B, 4))
    a, b = f.lease(2, 2)
    f.complete(a.token, [done(u) for u in a.urls])
    f.put_discovered(items(A, 2))  # duplicates, counted in memory then flushed on close
    f.set_host_delay(B, 9.0)
    before = stats_tuple(f)
    f.close()

    g = open_frontier(path, clock, lease_ttl=30.0, default_delay=2.0)
    assert stats_tuple(g) == before
    assert g.put_discovered(items(A, 6)) == 2  # the seen-set came back from the file
    g.complete(b.token, [done(u) for u in b.urls])  # a lease survives a restart
    clock.advance(2.0)
    assert [x.host for x in g.lease(5, 10)] == [A]  # B rests its crawl-delay (9 s)
    clock.advance(7.0)
    assert [x.host for x in g.lease(5, 10)] == [B]
    g.close()
    check_sqlite_counters(path)


def test_abandoned_leases_come_back_after_a_crash(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "f.sqlite"
    f = open_frontier(path, clock, lease_ttl=30.0)
    f.put_discovered(items(A, 3))
    lost = f.lease(1, 3)[0]
    # no close(): the process "dies" here
    g = open_frontier(path, clock, lease_ttl=30.0)
    assert g.lease(1, 3) == []  # still held until it expires
    assert g.reclaim_expired(float("inf")) == 3
    again = g.lease(1, 3)[0]
    assert [u.url for u in again.urls] == [u.url for u in lost.urls]
    with pytest.raises(StaleLeaseError):
        f.complete(lost.token, [])
    f.close()
    g.close()


def test_two_connections_share_dedupe_and_max_pages(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "f.sqlite"
    f = open_frontier(path, clock, max_pages=5)
    g = open_frontier(path, clock, max_pages=5)
    assert f.put_discovered(items(A, 3)) == 3
    assert g.put_discovered(items(A, 4)) == 1  # g syncs f's inserts before writing
    assert f.put_discovered(items(A, 5)) == 1
    assert g.statistics().queued == 5
    assert f.put_discovered(items(B, 3)) == 3
    x = f.lease(1, 4)
    y = g.lease(5, 4)
    assert sum(len(b.urls) for b in x + y) == 5
    assert {b.host for b in x}.isdisjoint({b.host for b in y})
    f.close()
    g.close()
    check_sqlite_counters(path)


# ---------------------------------------------------------------------- processes


def _worker(path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _done_lines(out: str) -> list[int]:
    # A SIGKILL can cut the last line mid-number: only newline-terminated lines count.
    whole = out.split("\n")[:-1]
    return [int(fp) for line in whole if line.startswith("D ") for fp in line.split()[1:]]


def _seed(path: Path, hosts: int) -> None:
    f = SqliteFrontier(path)
    f.put_discovered([page(h, 0) for h in range(hosts)])
    f.close()


@pytest.mark.slow
def test_processes_crawl_one_file_without_overlap(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    hosts, pages = 8, 300
    _seed(path, hosts)
    procs = [_worker(path, str(hosts), str(pages), "--pause", "0.002") for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    acked = [fp for out, _ in outs for fp in _done_lines(out)]
    assert len(acked) == len(set(acked)) == hosts * pages  # each page exactly once
    assert sum(1 for out, _ in outs if _done_lines(out)) >= 2  # the work was shared
    f = SqliteFrontier(path)
    s = f.statistics()
    f.close()
    assert (s.done, s.queued, s.leased) == (hosts * pages, 0, 0)
    check_sqlite_counters(path)


@pytest.mark.slow
def test_processes_share_max_pages_exactly(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    _seed(path, 6)
    procs = [_worker(path, "6", "100", "--max-pages", "137") for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    acked = [fp for out, _ in outs for fp in _done_lines(out)]
    assert len(acked) == len(set(acked)) == 137
    check_sqlite_counters(path)


@pytest.mark.slow
def test_sigkill_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    hosts, pages = 6, 600
    rng = random.Random(7)
    committed: set[int] = set()
    for k in range(4):
        if k == 0:
            _seed(path, hosts)
        p = _worker(path, str(hosts), str(pages), "--lease-ttl", "600", "--pause", "0.005")
        time.sleep(rng.uniform(0.3, 0.8))
        os.kill(p.pid, signal.SIGKILL)
        out, _ = p.communicate(timeout=30)
        committed |= set(_done_lines(out))
        check_sqlite_counters(path)
        on_disk = done_fps(path)
        assert committed <= on_disk  # every acknowledged completion is on disk
        assert len(on_disk) < hosts * pages  # killed mid-crawl (else the test proves little)
        f = SqliteFrontier(path)
        f.reclaim_expired(float("inf"))  # what `gossamer crawl --resume` does
        f.close()
    p = _worker(path, str(hosts), str(pages))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert len(done_fps(path)) == hosts * pages
    check_sqlite_counters(path)


# ---------------------------------------------------------------------- storage errors


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(FrontierStorageError) as e:
        SqliteFrontier(path)
    assert isinstance(e.value, OSError)


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    with pytest.raises(FrontierStorageError, match="not a frontier"):
        SqliteFrontier(path)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    SqliteFrontier(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(FrontierStorageError, match="schema version 99"):
        SqliteFrontier(path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FrontierStorageError):
        SqliteFrontier(tmp_path / "no" / "such" / "dir" / "f.sqlite")


def test_full_disk_raises_enospc_and_changes_nothing(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "f.sqlite"
    f = open_frontier(path, clock)
    f.put_discovered(items(A, 10))
    before = stats_tuple(f)
    pages = f._db.execute("PRAGMA page_count").fetchone()[0]
    f._db.execute(f"PRAGMA max_page_count = {pages}")  # the "disk" is full now
    big = [
        type(i)(i.url + "x" * 3000, i.host, i.depth, i.fp, i.priority, i.parent)
        for i in items(B, 50)
    ]
    with pytest.raises(FrontierStorageError) as e:
        f.put_discovered(big)
    assert e.value.errno == errno.ENOSPC
    assert stats_tuple(f) == before
    f._db.execute("PRAGMA max_page_count = 1073741823")  # room again: nothing was lost
    assert f.put_discovered(big) == 50
    f.close()
    check_sqlite_counters(path)


# ---------------------------------------------------------------------- the O(log n) promise


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        (backend._READY, (0.0, 10)),
        (backend._ANY_WORK, (0.0, 0.0)),
        (backend._QUEUE, (1, 20)),
        (backend._BY_TOKEN, (1, "t")),
        (backend._EXPIRED, (0.0,)),
        ("SELECT id, fp FROM urls WHERE id > ? ORDER BY id", (5,)),
        ("SELECT id, name, total, dead FROM hosts WHERE name IN (?, ?)", ("a", "b")),
        ("DELETE FROM queue WHERE host_id = ? AND priority = ? AND id = ?", (1, 2, 3)),
        (
            "UPDATE queue SET attempts = ? WHERE host_id = ? AND priority = ? AND id = ?",
            (1, 1, 2, 3),
        ),
        ("INSERT INTO failed(id) SELECT id FROM queue WHERE host_id = ?", (1,)),
    ],
)
def test_hot_queries_use_an_index(tmp_path: Path, sql: str, args: tuple[object, ...]) -> None:
    path = tmp_path / "f.sqlite"
    SqliteFrontier(path).close()
    with sqlite3.connect(path) as db:
        plan = " | ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql, args))
    db.close()
    scans = plan.replace("SCAN CONSTANT ROW", "")  # the outer SELECT of EXISTS (…)
    if sql == backend._READY:
        # an ordered walk of the partial index hosts_order, stopped by LIMIT: it passes over
        # only ready-ordered hosts that are still resting (within max_backlog_lead)
        assert plan == "SCAN hosts USING INDEX hosts_order", plan
        return
    assert "SEARCH" in plan and "SCAN" not in scans and "TEMP B-TREE" not in plan, plan


# ---------------------------------------------------------------------- depth storage


def _depth_url(host: str, i: int, depth: int, parent: Discovered | None = None) -> Discovered:
    url = f"http://{host}/p{i}"
    return Discovered(
        url, host, depth, fingerprint(url), depth,
        None if parent is None else parent.url, None if parent is None else parent.fp,
    )  # fmt: skip


def _drain(f: SqliteFrontier) -> dict[str, int]:
    got: dict[str, int] = {}
    while batches := f.lease(10, 10):
        for b in batches:
            got.update((u.url, u.depth) for u in b.urls)
            f.complete(b.token, [done(u) for u in b.urls])
    return got


def test_a_page_s_children_are_one_links_row(tmp_path: Path) -> None:
    """A page's recorded children take one row, appended to when the page sends more (a
    page fetched again), whatever mix of offers and Outlinks, deltas 1 and 0."""
    path = tmp_path / "f.sqlite"
    f = SqliteFrontier(path, max_depth=5)
    p = _depth_url(A, 0, 1)
    kids = [_depth_url(B, i, 2, parent=p) for i in range(3)]
    f.put_discovered([p])
    f.put_discovered([kids[0], Outlinks(p.url, p.fp, 1, [kids[1].fp], [B], [1])])
    f.put_discovered([Outlinks(p.url, p.fp, 1, [kids[2].fp, kids[0].fp], [B, B], [0, 1])])
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, length(fps), length(other) FROM links").fetchall()
    db.close()
    assert rows == [(1, 3 * 8, 9)]  # kids 0 and 1, kid 0 again; kid 2 with delta 0
    f.put_discovered([_depth_url(A, 0, 0)])  # P lowered, and through its row kid 0
    assert f.statistics().depth_lowered == 2  # (kids 1 and 2 were never offered: unknown)
    f.close()


def test_a_file_of_the_first_depth_layout_still_relaxes_its_edges(tmp_path: Path) -> None:
    """A crawl file written with one `edges` row per link (the first max_depth layout)
    still relaxes through those rows after an upgrade."""
    path = tmp_path / "f.sqlite"
    f = SqliteFrontier(path, max_depth=2)
    p, c = _depth_url(A, 0, 2), _depth_url(B, 0, 3)
    f.put_discovered([p, c])  # C parked
    assert _drain(f) == {p.url: 2}
    f.close()
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE edges (parent INTEGER NOT NULL, child INTEGER NOT NULL,"
            " delta INTEGER NOT NULL, PRIMARY KEY (parent, child)) WITHOUT ROWID"
        )
        edge = (backend._to_db(p.fp), backend._to_db(c.fp))
        db.execute("INSERT INTO edges VALUES (?, ?, 1)", edge)
    db.close()
    g = SqliteFrontier(path, max_depth=2)
    assert g.put_discovered([_depth_url(A, 0, 0)]) == 1  # C at 0 + 1: unparked
    assert _drain(g) == {c.url: 1}
    g.close()

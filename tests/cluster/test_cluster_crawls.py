"""The crawl registry on a real Redis: create, list, choose, state changes."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from gossamer.cluster._redis import REGISTRY, Keys, RedisClient
from gossamer.cluster.crawls import (
    LOCAL_FIELDS,
    CrawlRecordError,
    create_crawl,
    list_crawls,
    load_crawl,
    mark_finished,
    open_frontier,
    request_stop,
    resume_crawl,
    store_machines,
)
from gossamer.cluster.members import Membership, WorkerStatus
from gossamer.config import CrawlSettings, load_settings
from gossamer.frontier import Discovered, MemoryFrontier
from gossamer.frontier.redis import connect
from gossamer.partition import Consistent, PartitionError, Phase, Sized

SEED = "http://www.h0.example/"


@pytest.fixture
def client(redis_url: str) -> Iterator[RedisClient]:
    c = connect(redis_url)
    yield c
    c.close()


def settings(tmp_path: Path, **extra: object) -> CrawlSettings:
    flags: dict[str, object] = {"seeds": [SEED], "output": tmp_path / "out", "max_pages": 50}
    flags.update(extra)
    return load_settings(flags)


def test_create_seeds_the_frontier_and_stores_worker_settings(
    client: RedisClient, tmp_path: Path
) -> None:
    resolve = tmp_path / "resolve.txt"
    resolve.write_text("www.h0.example:80:127.1.0.1:8080\n")
    s = settings(tmp_path, resolve_file=resolve, delay=0.25, user_agent="ua/1", scope="all",
                 partition="consistent", epsilon=0.5, heartbeat_ttl=3.0)  # fmt: skip
    crawl_id = create_crawl(client, s.seeds, s)
    rec = load_crawl(client, crawl_id)
    assert rec.state == "running" and rec.seeds == (SEED,)
    assert rec.heartbeat_ttl == 3.0
    assert rec.resolve_text == resolve.read_text()
    assert not LOCAL_FIELDS & set(rec.settings)
    assert isinstance(rec.strategy(), Consistent) and rec.strategy().epsilon == 0.5
    (tmp_path / "w1.txt").write_text(rec.resolve_text)
    ws = rec.worker_settings(tmp_path / "w1", resolve_file=tmp_path / "w1.txt", concurrency=7)
    assert (ws.politeness.delay, ws.fetch.user_agent) == (0.25, "ua/1")
    assert (ws.scope, ws.max_pages) == ("all", 50)
    assert ws.output == tmp_path / "w1" and ws.fetch.concurrency == 7
    assert ws.fetch.resolve_file == tmp_path / "w1.txt"
    frontier = open_frontier(client, crawl_id, ws)
    try:
        st = frontier.statistics()
    finally:
        frontier.close()
    assert (st.queued, st.leased, st.done) == (1, 0, 0)
    summary = json.loads(client.hget(REGISTRY, crawl_id))
    assert summary["state"] == "running" and summary["partition"] == "consistent"
    assert all(k.startswith(f"gs:{crawl_id}:") for k in map(bytes.decode, client.keys("gs:2*")))


def test_frontier_factory_and_refusals(client: RedisClient, tmp_path: Path) -> None:
    seeded: list[int] = []

    class Recording(MemoryFrontier):
        def put_discovered(self, items: Sequence[Discovered]) -> int:
            seeded.append(super().put_discovered(items))
            return seeded[-1]

    def factory(c: RedisClient, crawl: str, s: object) -> MemoryFrontier:
        return Recording()

    s = settings(tmp_path)
    crawl_id = create_crawl(client, s.seeds, s, crawl_id="mine", frontier_factory=factory)
    assert crawl_id == "mine" and seeded == [1]
    with pytest.raises(CrawlRecordError, match="exists already"):
        create_crawl(client, s.seeds, s, crawl_id="mine", frontier_factory=factory)
    with pytest.raises(CrawlRecordError, match="invalid crawl id"):
        create_crawl(client, s.seeds, s, crawl_id="a:b", frontier_factory=factory)
    nope = settings(tmp_path, partition="nope")
    modulo = settings(tmp_path, partition="modulo", phases=3)
    with pytest.raises(PartitionError, match="unknown partition"):
        create_crawl(client, s.seeds, nope, frontier_factory=factory)
    with pytest.raises(PartitionError, match="takes no"):
        create_crawl(client, s.seeds, modulo, frontier_factory=factory)
    with pytest.raises(CrawlRecordError, match="seed"):
        create_crawl(client, [], s, frontier_factory=factory)
    assert [c.id for c in list_crawls(client)] == ["mine"]


def test_the_machine_list_is_kept_with_the_crawl(client: RedisClient, tmp_path: Path) -> None:
    """A crawl keeps the machine list it was created with, and the one given later (what
    `workers --scale`, a resume and the dashboard's slider start its workers on)."""
    from gossamer.cluster.control import Machines
    from gossamer.runner.machines import Machine

    s = settings(tmp_path)
    mk = lambda c, i, st: MemoryFrontier()  # noqa: E731
    plain = load_crawl(client, create_crawl(client, s.seeds, s, crawl_id="p", frontier_factory=mk))
    assert plain.machines == "" and Machines(()).for_crawl(plain) is None
    listed = "a.example workers=2\nroot@b.example:2222 out=/srv/g\n"
    crawl_id = create_crawl(client, s.seeds, s, crawl_id="m", frontier_factory=mk,
                            machines=listed)  # fmt: skip
    record = load_crawl(client, crawl_id)
    assert record.machines == listed
    own = Machines((), ssh="ssh -F cfg", remote="gossamer").for_crawl(record)
    assert own == Machines(
        [Machine("a.example", workers=2), Machine("b.example", "root", 2222, out="/srv/g")],
        ssh="ssh -F cfg", remote="gossamer",
    )  # fmt: skip
    given = Machines([Machine("c.example")])
    assert given.for_crawl(record) is given  # a list given wins
    store_machines(client, crawl_id, "c.example\n")
    assert load_crawl(client, crawl_id).machines == "c.example\n"
    store_machines(client, crawl_id, "c.example nonsense\n")  # (written by another gossamer)
    with pytest.raises(ValueError, match="crawl m's machine list, line 1: 'nonsense'"):
        Machines(()).for_crawl(load_crawl(client, crawl_id))


def test_a_failed_seeding_leaves_no_crawl(client: RedisClient, tmp_path: Path) -> None:
    def broken(c: RedisClient, crawl: str, s: object) -> MemoryFrontier:
        raise OSError("boom")

    s = settings(tmp_path)
    with pytest.raises(OSError, match="boom"):
        create_crawl(client, s.seeds, s, crawl_id="x", frontier_factory=broken)
    assert list_crawls(client) == [] and not client.exists(Keys("x").meta)


def test_load_chooses_the_only_or_the_only_running_crawl(
    client: RedisClient, tmp_path: Path
) -> None:
    s = settings(tmp_path)
    mk = lambda c, i, st: MemoryFrontier()  # noqa: E731
    with pytest.raises(CrawlRecordError, match="no crawls in this Redis"):
        load_crawl(client)
    with pytest.raises(CrawlRecordError, match="no crawl nope"):
        load_crawl(client, "nope")
    create_crawl(client, s.seeds, s, crawl_id="a", frontier_factory=mk)
    assert load_crawl(client).id == "a"
    mark_finished(client, load_crawl(client, "a"))
    assert load_crawl(client).id == "a"  # the only crawl, whatever its state
    create_crawl(client, s.seeds, s, crawl_id="b", frontier_factory=mk)
    assert load_crawl(client).id == "b"  # the only running one
    create_crawl(client, s.seeds, s, crawl_id="c", frontier_factory=mk)
    with pytest.raises(CrawlRecordError, match=r"2 crawls are running(.|\n)*  b (.|\n)*  c "):
        load_crawl(client)
    request_stop(client, load_crawl(client, "b"))  # no live worker: stopped at once
    assert load_crawl(client, "b").state == "stopped"
    assert load_crawl(client).id == "c"
    client.hsetnx(Keys("d").meta, "id", "d")  # reserved, not seeded yet
    with pytest.raises(CrawlRecordError, match="being created"):
        load_crawl(client, "d")


def test_states_stop_with_live_workers_and_finish(client: RedisClient, tmp_path: Path) -> None:
    s = settings(tmp_path)
    crawl_id = create_crawl(client, s.seeds, s, frontier_factory=lambda c, i, st: MemoryFrontier())
    rec = load_crawl(client, crawl_id)
    members = Membership(client, crawl_id, ttl=rec.heartbeat_ttl)
    w = WorkerStatus(members.new_id(), "m", 1, "crawling")
    members.beat(w)
    assert request_stop(client, rec) == "stopping"
    assert json.loads(client.hget(REGISTRY, crawl_id))["state"] == "stopping"
    assert members.beat(w).crawl_state == "stopping"
    assert members.deregister(w) == "stopped"  # the last worker out
    assert load_crawl(client, crawl_id).ended is not None
    assert not mark_finished(client, load_crawl(client, crawl_id))  # stopped is final
    other = create_crawl(client, s.seeds, s, frontier_factory=lambda c, i, st: MemoryFrontier())
    assert mark_finished(client, load_crawl(client, other))
    assert load_crawl(client, other).state == "finished"
    assert request_stop(client, load_crawl(client, other)) == "finished"


def test_resume_sets_a_stopped_crawl_running_with_every_lease_back(
    client: RedisClient, tmp_path: Path
) -> None:
    """A worker dies holding a lease and the crawl is stopped (no live worker: at once), its
    lease still out; a resume reclaims it (whatever its expiry) and sets the crawl running,
    its record's end cleared. A running or finished crawl is not resumed."""
    from gossamer.frontier._registry import FrontierPlace
    from gossamer.frontier._registry import open_frontier as open_named

    s = settings(tmp_path, max_pages=None)
    crawl_id = create_crawl(client, s.seeds, s)
    rec = load_crawl(client, crawl_id)
    assert not resume_crawl(client, rec)  # running: nothing to resume
    # a worker that took an id and a lease and died before its first beat (so no live
    # worker is left: the stop is at once; its id is known from the id counter alone)
    wid = Membership(client, crawl_id, ttl=rec.heartbeat_ttl).new_id()
    place = FrontierPlace(redis=client, crawl_id=crawl_id, owner=wid)
    worker = open_named("redis", rec.worker_settings(tmp_path / wid), place)
    try:
        (batch,) = worker.lease(1, 5)
    finally:
        worker.close()
    assert batch.token.split("-", 1)[1].startswith(f"{wid}_")
    assert request_stop(client, rec) == "stopped"
    stopped = load_crawl(client, crawl_id, among=("stopped",))
    assert stopped.ended is not None

    def counts() -> tuple[int, int]:
        frontier = open_frontier(client, crawl_id, rec.worker_settings(tmp_path))
        try:
            st = frontier.statistics()
        finally:
            frontier.close()
        return st.queued, st.leased

    assert counts() == (0, 1)
    assert resume_crawl(client, stopped)
    running = load_crawl(client, crawl_id)
    assert (running.state, running.ended) == ("running", None)
    assert json.loads(client.hget(REGISTRY, crawl_id))["state"] == "running"
    assert counts() == (1, 0)  # the lease reclaimed long before its expiry (120 s)
    assert not resume_crawl(client, stopped)  # (a stale record: the crawl runs already)
    mark_finished(client, running)
    assert not resume_crawl(client, load_crawl(client, crawl_id))


def test_phase_options_round_trip(client: RedisClient, tmp_path: Path) -> None:
    s = settings(tmp_path, partition="phase", phase_period=2.5, phases=4)
    crawl_id = create_crawl(
        client, s.seeds, s, frontier_factory=lambda c, i, st: MemoryFrontier(),
    )  # fmt: skip
    strategy = load_crawl(client, crawl_id).strategy()
    assert strategy == Phase(period=2.5, phases=4)


def test_sized_weights_round_trip(client: RedisClient, tmp_path: Path) -> None:
    s = settings(tmp_path, partition="sized")
    crawl_id = create_crawl(
        client, s.seeds, s, weights=[(17, 300.0), (4, 12.5)],
        frontier_factory=lambda c, i, st: MemoryFrontier(),
    )  # fmt: skip
    record = load_crawl(client, crawl_id)
    assert record.strategy() == Sized(weights=((17, 300.0), (4, 12.5)))
    assert record.partition == {"name": "sized", "weights": [[17, 300.0], [4, 12.5]]}
    with pytest.raises(PartitionError, match="needs weights"):
        create_crawl(client, s.seeds, s, frontier_factory=lambda c, i, st: MemoryFrontier())


def test_a_bloom_seen_set_is_the_crawls_for_every_worker(
    client: RedisClient, tmp_path: Path
) -> None:
    s = settings(tmp_path, seen_set="bloom")
    crawl_id = create_crawl(client, s.seeds, s)
    rec = load_crawl(client, crawl_id)
    assert rec.settings["seen_set"] == "bloom"
    frontier = open_frontier(client, crawl_id, rec.worker_settings(tmp_path / "w1"))
    try:
        assert frontier.seen == "bloom"  # type: ignore[attr-defined]
        assert frontier.statistics().queued == 1
    finally:
        frontier.close()


@pytest.mark.parametrize(("order", "lead"), [("ready", 0.0), ("largest-first", 0.01)])
def test_the_lease_order_is_the_crawls_for_every_worker(
    client: RedisClient, tmp_path: Path, order: str, lead: float
) -> None:
    """`--lease-order` is stored with the crawl: every worker's frontier leases that way
    (the embedded crawl's frontier takes the same knob, tests/test_config.py)."""
    s = settings(tmp_path, lease_order=order)
    crawl_id = create_crawl(client, s.seeds, s)
    rec = load_crawl(client, crawl_id)
    frontier = open_frontier(client, crawl_id, rec.worker_settings(tmp_path / "w1"))
    try:
        assert frontier.options.backlog_lead == lead  # type: ignore[attr-defined]
    finally:
        frontier.close()

"""`replica_acks`: each completion is followed by WAIT on its connection (real servers: a
master with a replica, and a master alone)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gossamer.frontier import Discovered, Outcome, Verdict
from gossamer.frontier.redis import RedisFrontier
from gossamer.testweb.redisd import HOST, RedisServer, RedisServerError, find_redis_server
from gossamer.urls import fingerprint


@pytest.fixture(autouse=True)
def _need_redis() -> None:
    try:
        find_redis_server()
    except RedisServerError as exc:
        pytest.skip(str(exc))


def _fill(f: RedisFrontier, hosts: int = 3) -> None:
    items = []
    for h in range(hosts):
        for i in range(4):
            url = f"http://h{h}.example/p{i}"
            items.append(Discovered(url, f"h{h}.example", 0, fingerprint(url)))
    f.put_discovered(items)


def _complete_all(f: RedisFrontier) -> list[float]:
    took = []
    for b in f.lease(10, 10):
        t = time.monotonic()
        f.complete(b.token, [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in b.urls])
        took.append(time.monotonic() - t)
    return took


def test_completions_are_on_the_replica_when_they_return(tmp_path: Path) -> None:
    with RedisServer(tmp_path / "m") as master, RedisServer(
        tmp_path / "r", extra=(f"replicaof {HOST} {master.port}",)
    ) as replica:
        with replica.client() as rc:
            deadline = time.monotonic() + 30
            while rc.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline
                time.sleep(0.05)
        with master.client() as client:
            f = RedisFrontier(client, "c", default_delay=0.0, replica_acks=1)
            _fill(f)
            _complete_all(f)
            assert (f.replica_waits, f.replica_shortfalls) == (3, 0)
            assert f.statistics().done == 12
            f.close()
        with replica.client() as rc:  # a completion's effect is there already
            assert rc.dbsize() > 0


def test_without_a_replica_only_the_first_completion_waits_the_time_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with RedisServer(tmp_path / "m") as master, master.client() as client:
        f = RedisFrontier(
            client, "c", default_delay=0.0, replica_acks=1, replica_ack_timeout=0.3
        )
        _fill(f)
        took = _complete_all(f)
        assert took[0] >= 0.29
        assert max(took[1:]) < 0.25
        assert f.replica_shortfalls == 3
        assert sum("only 0 of 1 Redis replicas" in r.getMessage() for r in caplog.records) == 1
        f.close()

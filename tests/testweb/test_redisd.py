"""gossamer.testweb.redisd: real redis-server processes that start, crash, come back and stop."""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import redis.cluster

import redis_fixtures
from gossamer.testweb import redisd
from gossamer.testweb.redisd import RedisClusterServers, RedisServer, RedisServerError


def _running(pid: int) -> bool:
    """A live process (not a zombie) has this pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_server_starts_answers_and_stops(tmp_path: Path) -> None:
    with RedisServer(tmp_path, maxmemory="64mb") as server:
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        assert _running(server.pid)
        with redis.Redis.from_url(server.url) as client:
            assert client.ping()
            assert client.config_get("save") == {"save": ""}
            assert client.config_get("appendonly") == {"appendonly": "yes"}
            assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
            assert client.config_get("bind") == {"bind": "127.0.0.1"}
            assert client.config_get("maxmemory") == {"maxmemory": str(64 * 2**20)}
            assert client.config_get("dir") == {"dir": str(tmp_path.resolve())}
        assert server.info_memory() > 0
        assert server.log_path.exists()
        pid, port = server.pid, server.port
    assert not server.running
    assert not _running(pid)
    assert not _accepts(port)
    server.stop()  # idempotent


def test_kill_then_restart_keeps_aof_data(tmp_path: Path) -> None:
    with RedisServer(tmp_path, extra=["appendfsync always"]) as server:
        port, first_pid = server.port, server.pid
        with server.client() as client:
            client.set("crawl:seen", "1")
            client.rpush("crawl:queue", *range(100))
        server.kill()  # a crash: nothing flushed at exit
        assert not server.running and not _running(first_pid)
        server.restart()
        assert server.port == port and server.pid != first_pid
        with server.client() as client:
            assert client.get("crawl:seen") == b"1"
            assert client.llen("crawl:queue") == 100
        server.restart()  # restarting a running server stops it first (graceful)
        with server.client() as client:
            assert client.llen("crawl:queue") == 100


def test_a_given_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RedisServerError, match="Address already in use"):
            RedisServer(tmp_path, port=port, start_timeout=5)


def test_a_missing_binary_points_at_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(redisd, "_BIN_DIRS", ("/nonexistent",))
    with pytest.raises(RedisServerError, match=r"scripts/setup\.sh"):
        redisd.find_redis_server()
    with pytest.raises(pytest.fail.Exception, match=r"scripts/setup\.sh"):
        redis_fixtures._require_redis()  # the fixtures fail (CI installs redis), never skip


CHILD = """
import sys, time
from gossamer.testweb.redisd import RedisServer
server = RedisServer(sys.argv[1])
print(server.pid, server.port, flush=True)
time.sleep(60)
"""


def test_the_server_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None
            ready, _, _ = select.select([child.stdout], [], [], 20)
            assert ready, "the child did not start a server in 20 s"
            pid, port = map(int, child.stdout.readline().split())
            assert _running(pid) and _accepts(port)
        finally:
            child.kill()
            child.wait(10)
    assert _wait_gone(pid), f"redis-server {pid} outlived the process that started it"


def test_redis_url_fixture_gives_an_empty_database(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.dbsize() == 0
        client.set("left-behind", "1")  # the next user of the fixture must not see it


def test_redis_url_fixture_is_flushed_between_tests(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.dbsize() == 0
        client.set("left-behind", "1")


def _use_cluster(client: redis.cluster.RedisCluster) -> None:
    keys = [f"key-{i}" for i in range(30)]
    for i, key in enumerate(keys):
        client.set(key, i)
    assert [client.get(k) for k in keys] == [str(i).encode() for i in range(30)]
    owners = {client.get_node_from_key(k).name for k in keys}  # type: ignore[no-untyped-call]  # untyped in redis-py
    assert len(owners) == 3, owners  # the keys are spread over every master
    script = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])"
    assert client.eval(script, 2, "{crawl}:seen", "{crawl}:count", "x") == 1
    assert client.get("{crawl}:seen") == b"x"


def test_a_cluster_forms_serves_and_stops(tmp_path: Path) -> None:
    with RedisClusterServers(tmp_path, masters=3) as cluster:
        assert len(set(cluster.ports)) == 3
        assert cluster.url == f"redis://127.0.0.1:{cluster.ports[0]}/0"
        with cluster.client() as client:
            _use_cluster(client)
        pids = [node.pid for node in cluster.nodes]
        assert all(_running(pid) for pid in pids)
    assert not any(_running(pid) for pid in pids)
    assert not any(_accepts(port) for port in cluster.ports)


def test_redis_cluster_url_fixture(redis_cluster_url: str) -> None:
    with redis.cluster.RedisCluster.from_url(redis_cluster_url) as client:
        assert client.dbsize() == 0  # summed over the masters
        _use_cluster(client)

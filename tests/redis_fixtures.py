"""Real Redis servers for tests (a pytest plugin, registered by tests/conftest.py).

- `redis_server` (session): one `RedisServer` (AOF on) in a temporary directory.
- `redis_url` (function): its URL, after FLUSHALL (started again first if a test stopped it).
- `redis_cluster` (session): a 3-master `RedisClusterServers`.
- `redis_cluster_url` (function): its URL, after FLUSHALL on every master.
- `redis_password_server` (session): a `RedisServer` with `requirepass` (a random password,
  `PASSWORD_SERVER_USERS` has its ACL users); `redis_password_url` (function): its URL
  with the password, after FLUSHALL.

The servers are started only by the tests that ask for them and stopped at the end of the
session (and die with the test process). When redis-server is not installed these fixtures
fail (they do not skip: CI installs it with scripts/setup.sh).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from gossamer.testweb.redisd import (
    RedisClusterServers,
    RedisServer,
    RedisServerError,
    find_redis_cli,
    find_redis_server,
)


def _require_redis() -> None:
    try:
        find_redis_server()
        find_redis_cli()
    except RedisServerError as exc:
        pytest.fail(f"Redis tests need a local redis-server: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the session (127.0.0.1, a free port, AOF on)."""
    _require_redis()
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL (redis://127.0.0.1:PORT/0), emptied (FLUSHALL) for this test."""
    if not redis_server.running:  # a test stopped or killed it
        redis_server.restart()
    with redis_server.client() as client:
        client.flushall()
    return redis_server.url


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """One 3-master Redis Cluster for the session."""
    _require_redis()
    with RedisClusterServers(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisClusterServers) -> str:
    """The session cluster's URL (its first node), emptied (FLUSHALL on every master)."""
    stopped = [node for node in redis_cluster.nodes if not node.running]
    for node in stopped:  # a test stopped or killed a node
        node.restart()
    if stopped:
        redis_cluster.wait_until_ok()
    for node in redis_cluster.nodes:
        with node.client() as client:
            client.flushall()
    return redis_cluster.url


#: ACL users of `redis_password_server`, name -> password (random: a test can look for it in
#: outputs): "crawler" may do everything on the gs:* keys, "reader" only PING and INFO (a
#: NOPERM after connecting)
PASSWORD_SERVER_USERS = {
    "crawler": f"crawler-{secrets.token_hex(8)}",
    "reader": f"reader-{secrets.token_hex(8)}",
}


@pytest.fixture(scope="session")
def redis_password_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the session that asks for a password (`requirepass`, a random
    one with a "/" and a "#", which must be quoted in a URL) and has the ACL users of
    PASSWORD_SERVER_USERS."""
    _require_redis()
    crawler, reader = PASSWORD_SERVER_USERS["crawler"], PASSWORD_SERVER_USERS["reader"]
    users = (
        f"user crawler on >{crawler} ~gs:* +@all",  # as docs/cluster.md advises
        f"user reader on >{reader} ~* &* -@all +ping +info +hello +auth +client",
    )
    with RedisServer(
        tmp_path_factory.mktemp("redis-password"),
        password=f"pw/{secrets.token_hex(8)}#",
        extra=users,
    ) as server:
        yield server


@pytest.fixture
def redis_password_url(redis_password_server: RedisServer) -> str:
    """The password server's URL with its password (redis://:PW@127.0.0.1:PORT/0), emptied."""
    if not redis_password_server.running:
        redis_password_server.restart()
    with redis_password_server.client() as client:
        client.flushall()
    return redis_password_server.url

"""Connecting to Redis: a client for a URL (one server or Redis Cluster), closing it, and
the client-wide calls the frontier makes besides its scripts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, cast

import redis
import redis.cluster
import redis.exceptions

from .._protocol import FrontierStorageError

__all__ = ["RedisClient", "connect", "disconnect"]

RedisClient = redis.Redis | redis.cluster.RedisCluster
#: a wrong or missing password (WRONGPASS, NOAUTH), not an outage
_AUTH_ERRORS: Final = (redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError)


def connect(url: str, **kw: Any) -> RedisClient:
    """A client for `url` (redis://host:port/db): a RedisCluster client when the server is
    a Redis Cluster node, else a plain one. Connection errors raise FrontierStorageError,
    whose message does not quote `url` (it may hold a password; redis-py's own messages
    name the host and port)."""
    try:
        client = redis.Redis.from_url(url, **kw)
        info = client.info("cluster")
        if info.get("cluster_enabled"):
            client.close()
            return redis.cluster.RedisCluster.from_url(url, **kw)
        return client
    except redis.exceptions.RedisError as exc:
        raise FrontierStorageError(0, f"cannot use Redis: {exc}") from exc


def disconnect(client: RedisClient) -> None:
    """Close a client from `connect` and every socket it opened (a RedisCluster client's
    `close` leaves its per-node connection pools open)."""
    if isinstance(client, redis.cluster.RedisCluster):
        for node in client.get_nodes():  # type: ignore[no-untyped-call]
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()
    client.close()


def _scan(client: RedisClient, pattern: str) -> Iterator[bytes]:
    yield from cast(Iterator[bytes], client.scan_iter(match=pattern, count=1000))

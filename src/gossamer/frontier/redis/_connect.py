"""Connecting to Redis: a client for a URL (one server, Redis Cluster, or the master of a
Redis Sentinel service), closing it, and the client-wide calls the frontier makes besides
its scripts."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, cast

import redis
import redis.cluster
import redis.exceptions
import redis.sentinel

from .._protocol import FrontierStorageError

__all__ = [
    "SENTINEL_SCHEMES",
    "RedisClient",
    "SentinelURL",
    "connect",
    "disconnect",
    "parse_sentinel_url",
]

RedisClient = redis.Redis | redis.cluster.RedisCluster
#: a wrong or missing password (WRONGPASS, NOAUTH), not an outage
_AUTH_ERRORS: Final = (redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError)


#: URL schemes of a Redis Sentinel service (`rediss+sentinel`: TLS to the sentinels and
#: to the master)
SENTINEL_SCHEMES: Final = ("redis+sentinel", "rediss+sentinel")
SENTINEL_PORT: Final = 26379


@dataclass(frozen=True, slots=True)
class SentinelURL:
    """A parsed `redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]…]/SERVICE[/DB]`
    (`?sentinel_password=…` when the sentinels want a password of their own; with
    `rediss+sentinel://`, `?ssl_ca_certs=FILE`: the CA certificate the sentinels' and the
    master's certificates are checked with, else the system's)."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None
    tls: bool = False
    ssl_ca_certs: str | None = None


def parse_sentinel_url(url: str) -> SentinelURL | None:
    """`url` as a Sentinel URL; None when it is not one (another scheme); ValueError,
    without the password, when it is malformed."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SENTINEL_SCHEMES:
        return None
    userinfo, at, tail = rest.rpartition("@")
    username = password = None
    if at:
        user, colon, pw = userinfo.partition(":")
        username = urllib.parse.unquote(user) or None
        password = urllib.parse.unquote(pw) if colon and pw else None
    tail, _, query = tail.partition("?")
    hostlist, _, path = tail.partition("/")
    sentinels: list[tuple[str, int]] = []
    for item in hostlist.split(","):
        host, port = _host_port(item.strip())
        sentinels.append((host, port))
    parts = [p for p in path.split("/") if p]
    if not parts or len(parts) > 2:
        raise ValueError("a Sentinel URL names its service: redis+sentinel://HOST:PORT/SERVICE")
    service = urllib.parse.unquote(parts[0])
    db = 0
    if len(parts) == 2:
        if not parts[1].isdigit():
            raise ValueError(f"the database must be a number, not {parts[1]!r}")
        db = int(parts[1])
    sentinel_password = ca_certs = None
    tls = scheme.lower() == "rediss+sentinel"
    for name, value in urllib.parse.parse_qsl(query):
        if name == "sentinel_password":
            sentinel_password = value or None
        elif name == "ssl_ca_certs" and tls:
            ca_certs = value or None
        else:
            raise ValueError(f"unknown Sentinel URL parameter {name!r}")
    return SentinelURL(
        tuple(sentinels), service, db, username, password, sentinel_password, tls=tls,
        ssl_ca_certs=ca_certs,
    )  # fmt: skip


def _host_port(item: str) -> tuple[str, int]:
    if not item:
        raise ValueError("a Sentinel URL lists at least one sentinel, HOST[:PORT]")
    if item.startswith("["):  # [IPv6]:port
        host, _, port = item[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
    if port and not port.isdigit():
        raise ValueError(f"the port of sentinel {host!r} is not a number")
    return host, int(port) if port else SENTINEL_PORT


def _sentinel_master(parsed: SentinelURL, kw: dict[str, Any]) -> redis.Redis:
    """A client of the master of `parsed`'s service: every new connection asks the
    sentinels where the master is, so after a failover the client reconnects to the
    promoted replica (a connection to a demoted master fails as a ConnectionError)."""
    own: dict[str, Any] = {"db": parsed.db}
    if parsed.username is not None:
        own["username"] = parsed.username
    if parsed.password is not None:
        own["password"] = parsed.password
    tls: dict[str, Any] = {"ssl": True} if parsed.tls else {}
    if parsed.ssl_ca_certs is not None:
        tls["ssl_ca_certs"] = parsed.ssl_ca_certs
    own.update(tls)
    own.update(kw)  # $REDISCLI_AUTH's password, time-outs, retries
    sentinel_kwargs: dict[str, Any] = {
        k: v for k, v in kw.items() if k in ("socket_connect_timeout", "socket_timeout")
    }
    sentinel_kwargs.setdefault("socket_timeout", 5.0)
    if parsed.sentinel_password is not None:
        sentinel_kwargs["password"] = parsed.sentinel_password
    sentinel_kwargs.update(tls)
    sentinel = redis.sentinel.Sentinel(list(parsed.sentinels), sentinel_kwargs=sentinel_kwargs)
    client = cast(redis.Redis, sentinel.master_for(parsed.service, **own))
    try:
        client.ping()  # no master known, a refused password: now, not at the first call
    except redis.sentinel.MasterNotFoundError:
        # (redis-py's message repeats every sentinel client's repr: a screenful)
        client.close()
        where = ", ".join(f"{h}:{p}" for h, p in parsed.sentinels)
        raise redis.exceptions.ConnectionError(
            f"the sentinels at {where} name no master of service {parsed.service!r} (none "
            "answers, none monitors that name, or its master is down and not yet replaced)"
        ) from None
    return client


def connect(url: str, **kw: Any) -> RedisClient:
    """A client for `url` (redis://host:port/db): a RedisCluster client when the server is
    a Redis Cluster node, the master of a Sentinel service for redis+sentinel://, else a
    plain one. Connection errors raise FrontierStorageError, whose message does not quote
    `url` (it may hold a password; redis-py's own messages name the host and port); a
    malformed URL raises ValueError."""
    parsed = parse_sentinel_url(url)
    try:
        if parsed is not None:
            return _sentinel_master(parsed, kw)
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

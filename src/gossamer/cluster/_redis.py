"""What the cluster modules share about Redis: key names, transient errors, the server clock.

Every key of the cluster's coordination lives in one hash slot per crawl,
`gs:<crawl>:{m}:…`, so the multi-key Lua scripts of registry, membership and IP gate run on
Redis Cluster as on one server; the crawl registry `gs:crawls` is one more key, only ever
used alone. (The frontier's keys are `gs:<crawl>:{<shard>}:…` and `gs:<crawl>:{g}:…`.)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import redis
import redis.cluster
import redis.exceptions

from ..frontier import FrontierStorageError

RedisClient = redis.Redis | redis.cluster.RedisCluster

#: the crawl registry: crawl id -> JSON summary
REGISTRY: Final = "gs:crawls"

#: errors that say "Redis cannot be reached right now" (a restart, a failover, the network):
#: a worker waits them out; anything else is a bug or a refusal and is raised
TRANSIENT: Final = (
    redis.exceptions.ConnectionError,  # BusyLoadingError too (a restart loading its AOF)
    redis.exceptions.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ReadOnlyError,  # a replica being promoted
)

_T = TypeVar("_T")


def is_transient(exc: BaseException) -> bool:
    """A transient Redis error, also when the frontier wrapped it (FrontierStorageError
    raised `from` one after its own retries ran out)."""
    if isinstance(exc, TRANSIENT):
        return True
    return isinstance(exc, FrontierStorageError) and isinstance(exc.__cause__, TRANSIENT)


class Keys:
    """The key names of one crawl's coordination (all in the `{m}` slot)."""

    __slots__ = ("crawl", "prefix")

    def __init__(self, crawl: str) -> None:
        self.crawl = crawl
        self.prefix = f"gs:{crawl}:{{m}}:"

    @property
    def meta(self) -> str:
        """hash: the crawl's record (state, settings, seeds, partition, times)"""
        return self.prefix + "meta"

    @property
    def seq(self) -> str:
        """counter: worker ids are w<INCR>"""
        return self.prefix + "seq"

    @property
    def live(self) -> str:
        """zset: worker id -> server time of its last heartbeat"""
        return self.prefix + "live"

    @property
    def workers(self) -> str:
        """hash: worker id -> its last status record (JSON), kept after it exits or dies"""
        return self.prefix + "workers"

    @property
    def beats(self) -> str:
        """hash: worker id -> server time of its last heartbeat, kept after it exits"""
        return self.prefix + "beats"

    @property
    def caps(self) -> str:
        """hash: live worker id -> capacity"""
        return self.prefix + "caps"

    @property
    def stop_requests(self) -> str:
        """set: ids of the workers asked to stop (`workers --scale` down)"""
        return self.prefix + "stopreq"

    def heartbeat(self, worker: str) -> str:
        """string with a TTL: the worker's status record, while its heartbeats come"""
        return f"{self.prefix}hb:{worker}"

    def spawned(self, machine: str) -> str:
        """hash: pid -> JSON of the detached workers started on `machine`"""
        return f"{self.prefix}spawned:{machine}"

    def ip_slot(self, ip: str, k: int) -> str:
        """string with a TTL: slot k of an IP's per-IP limit, value = the holder's token"""
        return f"{self.prefix}ip:{ip}:{k}"

    def ip_want(self, ip: str) -> str:
        """string with a short TTL: someone waits for a slot of the IP"""
        return f"{self.prefix}ipwant:{ip}"


def server_time(client: RedisClient) -> float:
    """The Redis server's clock (TIME), seconds."""
    sec, usec = client.time()
    return sec + usec / 1e6


def text(value: Any) -> str:
    """A reply (bytes or str) as str."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def retrying(
    fn: Callable[[], _T],
    *,
    what: str,
    deadline: float = float("inf"),
    sleep: Callable[[float], object] = time.sleep,
) -> _T:
    """Call `fn`, waiting out transient Redis errors with back-off (0.05 s doubling to 2 s)
    until `deadline` (time.monotonic); a message on stderr once per outage."""
    pause = 0.05
    told = False
    while True:
        try:
            result = fn()
        except Exception as exc:
            if not is_transient(exc) or time.monotonic() >= deadline:
                raise
            if not told:
                print(f"gossamer: Redis unreachable ({what}): {exc}; retrying", file=sys.stderr)
                told = True
            sleep(pause)
            pause = min(pause * 2, 2.0)
            continue
        if told:
            print(f"gossamer: Redis reachable again ({what})", file=sys.stderr)
        return result

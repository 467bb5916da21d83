"""What the cluster modules share about Redis: key names, transient errors, the server clock.

Every key of the cluster's coordination lives in one hash slot per crawl,
`gs:<crawl>:{m}:…`, so the multi-key Lua scripts of crawl records, membership and IP gate run on
Redis Cluster as on one server; the crawl list `gs:crawls` is one more key, only ever
used alone. (The frontier's keys are `gs:<crawl>:{<shard>}:…` and `gs:<crawl>:{g}:…`.)
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, Final, TypeVar

import redis
import redis.cluster
import redis.exceptions

from ..exitcodes import Exit
from ..frontier import FrontierStorageError, FrontierUnreachable
from ..urls import split_userinfo, url_password, written_password

RedisClient = redis.Redis | redis.cluster.RedisCluster

#: the crawl list: crawl id -> JSON summary
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
_log = logging.getLogger(__name__)


#: errors that say "Redis refuses these credentials": a wrong password or user (WRONGPASS),
#: none given where one is needed (NOAUTH, "HELLO must be called with the client already
#: authenticated"), an ACL user not allowed a command (NOPERM). redis-py makes the first
#: ones ConnectionErrors: they are told apart from TRANSIENT ones, as waiting cannot help.
AUTH_ERRORS: Final = (
    redis.exceptions.AuthenticationError,
    redis.exceptions.AuthorizationError,
    redis.exceptions.AuthenticationWrongNumberOfArgsError,
    redis.exceptions.NoPermissionError,
)

_HIDDEN: Final = "***"
#: query parameters of a Redis URL that hold a password (a Sentinel URL's sentinels' own)
_SECRET_PARAMS: Final = ("password", "sentinel_password")


def _cause(exc: BaseException) -> BaseException:
    """The Redis error under a FrontierStorageError raised `from` one."""
    if isinstance(exc, FrontierStorageError) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


def is_auth_error(exc: BaseException) -> bool:
    """Redis refused the credentials (or a command to this ACL user), also when the
    frontier wrapped the error."""
    return isinstance(_cause(exc), AUTH_ERRORS)


def is_transient(exc: BaseException) -> bool:
    """A transient Redis error, also when the frontier wrapped it (FrontierStorageError
    raised `from` one after its own retries ran out). Never an authentication error."""
    cause = _cause(exc)
    return isinstance(cause, TRANSIENT) and not isinstance(cause, AUTH_ERRORS)


def is_timeout(exc: BaseException) -> bool:
    """Redis did not answer in time (connecting, or a command's answer), also when the
    frontier wrapped the error."""
    return isinstance(_cause(exc), redis.exceptions.TimeoutError)


# ---------------------------------------------------------------------------- secrets


def url_username(url: str) -> str | None:
    """The user name of a Redis URL (an ACL user), None for the default user."""
    try:
        name = urllib.parse.urlsplit(url).username
    except ValueError:
        return None
    return urllib.parse.unquote(name) if name else None


def redact(url: str) -> str:
    """`url` fit to print, log or store: its password replaced by *** (the userinfo's and a
    `password=` and `sentinel_password=` query parameters'): redis://:***@host:6379/0,
    rediss://user:***@host/0, redis+sentinel://:***@h1:26379,h2:26379/mymaster/0.
    The userinfo ends at the last "@", so that an unquoted "/", "#" or "@" in the password
    (which redis-py cannot parse either) does not show it."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return scrub(url, url)
    parts = split_userinfo(url)
    if parts is not None and parts[2] is not None:
        rest = f"{parts[1]}:{_HIDDEN}@{parts[3]}"
    head, qmark, query = rest.partition("?")
    if qmark:
        query = "&".join(
            f"{pair.partition('=')[0]}={_HIDDEN}" if pair.partition("=")[0] in _SECRET_PARAMS
            else pair
            for pair in query.split("&")
        )
    return scrub(f"{scheme}{sep}{head}{qmark}{query}", url)


def scrub(message: str, url: str, *, pieces: bool = False) -> str:
    """`message` with every copy of `url`'s password (as written, and unquoted) replaced by
    ***: for texts from elsewhere (an exception's) that may quote the URL. With `pieces`,
    also the pieces an unquoted password is cut into by URL delimiters, which a parser's
    error may quote ("Port could not be cast to integer value as 'pw'")."""
    secrets = {s for s in (url_password(url), written_password(url)) if s}
    if pieces:
        for secret in list(secrets):
            secrets.update(p for p in re.split(r"[/#?@:&=]", secret) if len(p) >= 3)
    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, _HIDDEN)
    return message


# ---------------------------------------------------------------------------- connect errors


class RedisConnectError(Exception):
    """A `gossamer` command cannot use Redis; `exit` is its exit status. The message never
    holds the password."""

    exit: int = Exit.FAILURE


class RedisBadURL(RedisConnectError):
    """The --redis URL does not parse."""

    exit = Exit.USAGE


class RedisUnavailable(RedisConnectError):
    """Redis does not answer (refused, timed out, loading, a cluster down)."""

    exit = Exit.UNAVAILABLE


class RedisRefused(RedisConnectError):
    """Redis refuses the credentials of the URL, or asks for a password it does not hold."""

    exit = Exit.NOPERM


class RedisUntrusted(RedisConnectError):
    """Redis's TLS certificate is not trusted (no `ssl_ca_certs` naming its CA, or another
    server): an authentication that failed, as a refused password, and no reason to wait."""

    exit = Exit.NOPERM


def error_text(exc: BaseException, url: str) -> str:
    """What Redis (or redis-py) said, for a message: the wrapped error's text, without the
    password of `url` or a trailing full stop."""
    return scrub(str(_cause(exc)), url, pieces=True).strip().rstrip(".")


def refusal(url: str, exc: BaseException) -> RedisRefused:
    """The error to show for an authentication error `exc` at `url`."""
    cause = _cause(exc)
    why = error_text(exc, url)
    safe = redact(url)
    user = url_username(url)
    if isinstance(cause, redis.exceptions.NoPermissionError):
        who = f"user {user!r}" if user else "the default user"
        return RedisRefused(
            f"Redis at {safe} does not allow {who} what gossamer needs ({why}); give that "
            "user every command on the gs:* keys (ACL SETUSER … ~gs:* +@all), or use another"
        )
    if url_password(url) is None:
        if os.environ.get("REDISCLI_AUTH"):
            return RedisRefused(
                f"Redis at {safe} refused the {'user and ' if user else ''}password in "
                f"$REDISCLI_AUTH ({why}); check it"
            )
        if user:
            how = f"redis://{user}:PASSWORD@host:port/db"
        else:
            how = "redis://:PASSWORD@host:port/db, or redis://USER:PASSWORD@host:port/db " \
                "for an ACL user"  # fmt: skip
        return RedisRefused(
            f"Redis at {safe} asks for a password: put it in the URL ({how}) or in "
            "$REDISCLI_AUTH"
        )
    return RedisRefused(
        f"Redis at {safe} refused the {'user and ' if user else ''}password ({why}); "
        "check them in the URL"
    )


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
    def acked(self) -> str:
        """string: written just before a WAIT, so that the WAIT covers every earlier write"""
        return self.prefix + "acked"

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
    def mourned(self) -> str:
        """hash: worker id -> server time of its last heartbeat, for a worker dead or gone
        for `MOURN_TTLS` TTLs: moved here from `beats`, so beats stop answering it dead
        (its leases were reclaimed long since) and their cost does not grow with restarts"""
        return self.prefix + "mourned"

    @property
    def pulse(self) -> str:
        """hash: `last`, the server time of the last heartbeat of any worker, and `since`,
        the start of the current run of heartbeats (none for half a TTL starts a new one):
        a worker counts dead only after a TTL of beats (cluster.members)"""
        return self.prefix + "pulse"

    @property
    def incarnations(self) -> str:
        """hash: worker id -> its incarnation (bumped when it comes back after its
        heartbeat expired); its lease tokens carry it"""
        return self.prefix + "inc"

    @property
    def caps(self) -> str:
        """hash: live worker id -> capacity"""
        return self.prefix + "caps"

    @property
    def stop_requests(self) -> str:
        """set: ids of the workers asked to stop (`workers --scale` down)"""
        return self.prefix + "stopreq"

    @property
    def events(self) -> str:
        """stream: the crawl's page events (cluster/stream.py), read by the consumer group
        `graph`; trimmed by the consumer once acknowledged, capped by MAXLEN ~"""
        return self.prefix + "events"

    @property
    def log(self) -> str:
        """stream: the workers' diagnostics (cluster/logstream.py), capped by MAXLEN ~, read
        by the dashboard's log tail"""
        return self.prefix + "log"

    @property
    def fetches(self) -> str:
        """stream: a sample of the workers' fetches (cluster/fetchstream.py), one entry a
        worker a tick, capped by MAXLEN ~, read by the dashboard's log tail"""
        return self.prefix + "fetches"

    @property
    def graph_stats(self) -> str:
        """string: JSON of the live graph's statistics, written by `gossamer graph follow`
        every few seconds (docs/graph.md), read by `gossamer status`"""
        return self.prefix + "graphstats"

    def heartbeat(self, worker: str) -> str:
        """string with a TTL: the worker's status record, while its heartbeats come"""
        return f"{self.prefix}hb:{worker}"

    def spawned(self, machine: str) -> str:
        """hash: pid -> JSON of the detached workers started on `machine`"""
        return f"{self.prefix}spawned:{machine}"

    def ip_slot(self, ip: str, k: int) -> str:
        """string with a TTL: slot k of an IP's per-IP limit, value = the holder's token"""
        return f"{self.prefix}ip:{ip}:{k}"

    def ip_queue(self, ip: str) -> str:
        """sorted set, short TTL: the tokens waiting for a slot of the IP (score: arrival)"""
        return f"{self.prefix}ipq:{ip}"

    def ip_seen(self, ip: str) -> str:
        """sorted set, short TTL: the same tokens (score: their last try), to drop the dead"""
        return f"{self.prefix}ipqs:{ip}"


def boot_clock() -> float:
    """A monotonic clock that also counts suspended time (Linux CLOCK_BOOTTIME): how long a
    worker may trust its last heartbeat (or IP slot) is measured on it."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


def server_time(client: RedisClient) -> float:
    """The Redis server's clock (TIME), seconds."""
    sec, usec = client.time()
    return sec + usec / 1e6


def text(value: Any) -> str:
    """A reply (bytes or str) as str."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


class Patience:
    """How long a worker's Redis calls wait out an outage (docs/cluster.md, "A stop while
    Redis is down"). For ever while it crawls: a restart or a failover is waited out. Once it
    is stopping (`stopping()`: a first SIGINT/SIGTERM, a stop request, the crawl stopped),
    until Redis has been unreachable `seconds` since the stop or since it last answered
    (`reached()`), whichever is later; then, or at once on `give_up()` (a second stop
    signal), every wait ends: `over()` is True, each `retrying(patience=…)` call fails at
    once with FrontierUnreachable, and the callbacks of `on_give_up` run (the worker's Redis
    I/O thread fails the calls it holds). Safe from any thread; a watchdog thread, started
    by `stopping()` and ended by `close()` or the give-up, gives up when the time is out
    even if no call is retrying then (one waiting for a paused Redis's reply)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._since: float | None = None  # stopping since (None: not stopping)
        self._reached = clock()  # when Redis last answered
        self._over = threading.Event()
        self._wake = threading.Event()  # the watchdog's: given up, or closed
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        #: why the worker gave up (None: it did not): "time" (unreachable for `seconds`
        #: while stopping) or "signal" (a second stop)
        self.why: str | None = None

    def stopping(self) -> None:
        """The worker is stopping: Redis is waited for `seconds` at most from now on (the
        first call starts the watchdog; later ones change nothing)."""
        with self._lock:
            if self._since is not None:
                return
            self._since = self._clock()
        threading.Thread(target=self._watch, name="redis-patience", daemon=True).start()

    def reached(self) -> None:
        """Redis answered just now."""
        self._reached = self._clock()

    def deadline(self) -> float:
        """When (on the clock) the waiting ends: inf while not stopping."""
        since = self._since
        if since is None:
            return math.inf
        return max(since, self._reached) + self.seconds

    def over(self) -> bool:
        """Whether the worker gave up on Redis (the time is out, or `give_up()`)."""
        if not self._over.is_set() and self._clock() >= self.deadline():
            self.give_up("time")
        return self._over.is_set()

    def give_up(self, why: str = "signal") -> None:
        """Stop waiting for Redis now (idempotent: the first reason stays)."""
        with self._lock:
            if self._over.is_set():
                return
            self.why = why
            self._over.set()
            self._wake.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def on_give_up(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from any thread, once) when the worker gives up on Redis."""
        with self._lock:
            if not self._over.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def sleep(self, seconds: float) -> None:
        """Sleep `seconds`, less if the waiting ends first."""
        self._over.wait(max(0.0, min(seconds, self.deadline() - self._clock())))

    def close(self) -> None:
        """End the watchdog (the worker is done with Redis)."""
        self._wake.set()

    def _watch(self) -> None:
        while not self._wake.is_set():
            left = self.deadline() - self._clock()
            if left <= 0:
                self.give_up("time")
                return
            self._wake.wait(min(left, 1.0))


def retrying(
    fn: Callable[[], _T],
    *,
    what: str,
    deadline: float = float("inf"),
    sleep: Callable[[float], object] = time.sleep,
    patience: Patience | None = None,
) -> _T:
    """Call `fn`, waiting out transient Redis errors with back-off (0.05 s doubling to 2 s)
    until `deadline` (time.monotonic); a message on stderr once per outage. With a
    `patience`, also until it is `over()` (a worker stopping with Redis down), then
    FrontierUnreachable — at once, without a call, once it is over; an answer counts as
    Redis reached."""
    pause = 0.05
    told = False
    while True:
        if patience is not None and patience.over():
            raise FrontierUnreachable(0, f"Redis unreachable ({what}): the worker gave up")
        try:
            result = fn()
        except FrontierUnreachable:
            raise
        except Exception as exc:
            if not is_transient(exc) or time.monotonic() >= deadline:
                raise
            if patience is not None and patience.over():
                raise FrontierUnreachable(0, f"Redis unreachable ({what}): {exc}") from exc
            if not told:
                _log.warning(f"Redis unreachable ({what}): {exc}; retrying")
                told = True
            if patience is not None:
                patience.sleep(pause)
            else:
                sleep(pause)
            pause = min(pause * 2, 2.0)
            continue
        if patience is not None:
            patience.reached()
        if told:
            _log.info(f"Redis reachable again ({what})")
        return result


def wait_replicas(client: RedisClient, crawl: str, acks: int, timeout: float) -> int | None:
    """Wait until `acks` replicas have every write the master ran so far (a write of the
    crawl's `acked` key, then `WAIT acks timeout` on the same connection: WAIT counts the
    replicas that have the connection's last write, and so everything before it); the
    replicas that did, None when not asked (`acks` 0, or Redis Cluster). Used after the
    writes a failover must not lose outside the frontier: the crawl's creation, its end."""
    if acks <= 0 or isinstance(client, redis.cluster.RedisCluster):
        return None
    pipe = client.pipeline(transaction=False)
    pipe.set(Keys(crawl).acked, "1")
    pipe.execute_command("WAIT", acks, max(1, round(timeout * 1000)))  # type: ignore[no-untyped-call]
    got = int(pipe.execute()[1])
    if got < acks:
        _log.warning(
            f"only {got} of {acks} Redis replicas acknowledged crawl {crawl}'s record within "
            f"{timeout:g} s: a failover now may lose it"
        )
    return got

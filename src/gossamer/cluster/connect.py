"""Connecting to a crawl's Redis: waiting for it, refusing bad URLs and credentials
with one clear error, the password taken from $REDISCLI_AUTH when the URL has none; and a
command's session with it (`with_client`: one attempt, its errors said as one line and
their exit status)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from ..exitcodes import Exit
from ..urls import url_password
from ._redis import (
    RedisBadURL,
    RedisClient,
    RedisConnectError,
    RedisUnavailable,
    RedisUntrusted,
    error_text,
    is_auth_error,
    is_timeout,
    is_transient,
    redact,
    refusal,
)
from .crawls import CrawlRecordError

_log = logging.getLogger(__name__)

__all__ = [
    "CONNECT_PATIENCE",
    "CONNECT_TIMEOUT",
    "CONTROL_PATIENCE",
    "connect_redis",
    "report_failure",
    "with_client",
]

CONNECT_PATIENCE = 30.0  # seconds a starting worker waits for Redis before giving up
#: seconds to open a TCP connection to Redis (redis-py waits forever by default: a host that
#: drops packets would hang a command; a loopback or LAN connect takes under a millisecond)
CONNECT_TIMEOUT = 5.0
#: seconds a command a person or script waits for (`crawl --redis`, `status`, `stop`,
#: `workers`, `graph follow`) waits for an unreachable Redis: none (one attempt; opening the
#: connection is bounded by CONNECT_TIMEOUT)
CONTROL_PATIENCE = 0.0

def connect_redis(
    url: str,
    *,
    patience: float = CONNECT_PATIENCE,
    answer_within: float | None = None,
    sleep: Callable[[float], object] = time.sleep,
) -> RedisClient:
    """A client for `url` (a Redis Cluster client when the server is a cluster node).

    `answer_within`: seconds the client waits for each answer of Redis, every command sent
    once (redis-py's retries off), so a Redis that accepts connections and never answers
    ends a one-shot command (`status`) with an error; None: no limit, and redis-py retries
    (a worker waits out a paused Redis on purpose).

    An unreachable Redis is waited for up to `patience` seconds (0: one attempt), saying so
    on stderr, then RedisUnavailable; credentials Redis refuses raise RedisRefused at once
    (waiting cannot help); a malformed URL RedisBadURL; another Redis error (a bug, or a
    server gossamer cannot use) RedisConnectError. No message holds the password.

    A URL without a password takes the one in $REDISCLI_AUTH, when set (redis-cli's
    convention: a password there is not shown by `ps`, nor kept in a shell's history)."""
    from ..frontier.redis import connect

    extra: dict[str, object] = {}
    if (env_password := os.environ.get("REDISCLI_AUTH")) and url_password(url) is None:
        extra["password"] = env_password
    if answer_within is not None:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        extra["socket_timeout"] = answer_within
        extra["retry"] = Retry(NoBackoff(), 0)
    safe = redact(url)
    deadline = time.monotonic() + patience
    pause = 0.05
    told = False
    while True:
        try:
            client = connect(url, socket_connect_timeout=CONNECT_TIMEOUT, **extra)
        except Exception as exc:
            why = error_text(exc, url)
            if is_auth_error(exc):
                raise refusal(url, exc) from None
            if "certificate verify failed" in why.lower():  # waiting cannot help either
                raise RedisUntrusted(
                    f"cannot use Redis at {safe}: {why}; give the CA certificate that signed "
                    "its certificate: rediss://HOST:PORT/DB?ssl_ca_certs=FILE (docs/deploy.md)"
                ) from None
            if isinstance(exc, ValueError):  # from redis-py's URL parser
                raise RedisBadURL(
                    f"--redis {safe}: not a Redis URL ({why}); it reads "
                    "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (rediss:// for TLS), or for "
                    "Redis Sentinel redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]"
                    "…]/SERVICE[/DB], with a / # ? @ : or % in the password written %2F %23 "
                    "%3F %40 %3A %25"
                ) from None
            if not is_transient(exc):
                raise RedisConnectError(f"cannot use Redis at {safe}: {why}") from None
            if time.monotonic() >= deadline:
                waited = f" (waited {patience:g} s)" if patience > 0 else ""
                if is_timeout(exc):
                    raise RedisUnavailable(
                        f"Redis at {safe} does not answer{waited}: {why}; is it paused or "
                        "overloaded, and is that port Redis's?"
                    ) from None
                raise RedisUnavailable(
                    f"cannot reach Redis at {safe}{waited}: {why}; is it running, and are "
                    "the host and port right?"
                ) from None
            if not told:
                _log.warning(
                    f"Redis at {safe} does not answer ({why}); waiting up to "
                    f"{patience:g} s for it",
                    extra={"redis": safe},
                )
                told = True
            sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 2.0)
            continue
        if told:
            _log.info(f"Redis at {safe} answers", extra={"redis": safe})
        return client


def report_failure(exc: BaseException) -> int:
    """Say `exc` as the command's error; its exit status (RedisConnectError's own, else
    Exit.USAGE: no such crawl, a crawl in the wrong state, a bad argument)."""
    _log.error(f"{exc}")
    return exc.exit if isinstance(exc, RedisConnectError) else Exit.USAGE


def _redis_failure(url: str, exc: BaseException) -> RedisConnectError | None:
    """The error to report for a Redis error met after connecting (None: not one of
    those): an ACL user refused a command, or Redis gone meanwhile."""
    if is_auth_error(exc):
        return refusal(url, exc)
    if is_timeout(exc):
        why = error_text(exc, url)
        return RedisUnavailable(f"Redis at {redact(url)} stopped answering: {why}")
    if is_transient(exc):
        return RedisUnavailable(f"lost Redis at {redact(url)}: {error_text(exc, url)}")
    return None


def with_client(
    url: str, command: Callable[[RedisClient], int], *, answer_within: float | None = None
) -> int:
    """A command's session with Redis: connect once (CONTROL_PATIENCE), run `command` with
    the client, close it; the command's exit status. Connecting errors, Redis errors met
    meanwhile (an ACL user refused a command, Redis gone or silent) and crawl-record errors (no
    such crawl, …) are said as one error line and give their exit status; others are raised.
    `answer_within`: connect_redis's (a one-shot command's bound on each answer)."""
    try:
        client = connect_redis(url, patience=CONTROL_PATIENCE, answer_within=answer_within)
    except RedisConnectError as exc:
        return report_failure(exc)
    try:
        return command(client)
    except CrawlRecordError as exc:
        return report_failure(exc)
    except Exception as exc:
        failure = _redis_failure(url, exc)
        if failure is None:
            raise
        return report_failure(failure)
    finally:
        client.close()

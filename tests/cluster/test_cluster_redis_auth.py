"""Redis URLs with secrets: redaction, and how a refused or missing password, an ACL user
without rights and an unreachable server are told apart (in-process; the CLI end to end is
tests/e2e/test_cluster_auth.py)."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest
import redis.exceptions

from gossamer.cluster._redis import (
    RedisBadURL,
    RedisRefused,
    RedisUnavailable,
    is_auth_error,
    is_transient,
    redact,
    scrub,
    url_username,
)
from gossamer.cluster.connect import connect_redis
from gossamer.exitcodes import Exit
from gossamer.frontier import FrontierStorageError
from gossamer.testweb.redisd import RedisServer
from gossamer.urls import url_password, without_password
from redis_fixtures import PASSWORD_SERVER_USERS


@pytest.mark.parametrize(
    ("url", "shown", "password"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0", None),
        ("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0", "s3cret"),
        ("redis://alice:s3cret@h:6379/2", "redis://alice:***@h:6379/2", "s3cret"),
        ("rediss://alice:s3cret@h/0", "rediss://alice:***@h/0", "s3cret"),
        ("redis://alice@h:6379/0", "redis://alice@h:6379/0", None),
        ("redis://h:6379/0?password=s3cret&db=1", "redis://h:6379/0?password=***&db=1", "s3cret"),
        ("unix://:s3cret@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0", "s3cret"),
        # quoted in the URL: redis-py unquotes it, and neither form may show
        ("redis://:p%2Fw%40rd@h:6379/0", "redis://:***@h:6379/0", "p/w@rd"),
        # an unquoted "@" in the password: the host is after the last one
        ("redis://:p@ss@h:6379/0", "redis://:***@h:6379/0", "p@ss"),
    ],
)
def test_redact_hides_every_form_of_the_password(
    url: str, shown: str, password: str | None
) -> None:
    assert redact(url) == shown
    assert url_password(url) == password
    if password is not None:
        assert password not in redact(url)
        assert scrub(f"error at {url} ({password})", url) == f"error at {shown} (***)"


def test_a_malformed_url_is_still_redacted() -> None:
    url = "redis://:s3cret@h:notaport/0"
    assert "s3cret" not in redact(url)
    assert url_username("redis://alice:x@h/0") == "alice"
    assert url_username("redis://:x@h/0") is None


def test_auth_errors_are_not_transient() -> None:
    wrong = redis.exceptions.AuthenticationError("invalid username-password pair")
    assert isinstance(wrong, redis.exceptions.ConnectionError)  # why it was retried before
    assert is_auth_error(wrong) and not is_transient(wrong)
    wrapped = FrontierStorageError(0, "cannot use Redis")
    wrapped.__cause__ = wrong
    assert is_auth_error(wrapped) and not is_transient(wrapped)
    refused = redis.exceptions.ConnectionError("Error 111 connecting")
    assert is_transient(refused) and not is_auth_error(refused)
    assert is_auth_error(redis.exceptions.NoPermissionError("NOPERM no permissions"))


def test_connect_tells_refused_missing_and_unreachable_apart(
    redis_password_server: RedisServer,
) -> None:
    port = redis_password_server.port
    secret = redis_password_server.password
    assert secret is not None
    wrong = f"redis://:{quote('wrong-' + secret, safe='')}@127.0.0.1:{port}/0"
    t0 = time.monotonic()
    with pytest.raises(RedisRefused, match=r"refused the password") as info:
        connect_redis(wrong, patience=30)  # no waiting: a refusal is not an outage
    assert time.monotonic() - t0 < 5
    assert info.value.exit == Exit.NOPERM and secret not in str(info.value)
    with pytest.raises(RedisRefused, match=r"asks for a password: put it in the URL"):
        connect_redis(redis_password_server.url_without_password, patience=30)
    user = f"redis://crawler@127.0.0.1:{port}/0"
    with pytest.raises(RedisRefused, match=r"redis://crawler:PASSWORD@host:port/db.*AUTH"):
        connect_redis(user, patience=30)
    crawler = PASSWORD_SERVER_USERS["crawler"]
    client = connect_redis(f"redis://crawler:{crawler}@127.0.0.1:{port}/0", patience=0)
    try:
        assert client.ping()
    finally:
        client.close()
    client = connect_redis(redis_password_server.url, patience=0)
    client.close()


def test_connect_waits_its_patience_for_an_unreachable_redis(
    capsys: pytest.CaptureFixture[str], human_logs: None
) -> None:
    from gossamer.testweb.redisd import _free_ports

    url = f"redis://:s3cret-pw@127.0.0.1:{_free_ports(1)[0]}/0"  # nothing listens there
    slept: list[float] = []
    with pytest.raises(RedisUnavailable, match=r"cannot reach Redis at redis://:\*\*\*@") as info:
        connect_redis(url, patience=0.3, sleep=slept.append)
    assert info.value.exit == Exit.UNAVAILABLE and "(waited 0.3 s)" in str(info.value)
    assert slept  # it waited, and said so once
    err = capsys.readouterr().err
    assert err.count("waiting up to 0.3 s") == 1 and "s3cret-pw" not in err
    with pytest.raises(RedisUnavailable) as info:  # patience 0: one attempt
        connect_redis(url, patience=0, sleep=slept.append)
    assert "waited" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "bare"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:s3cret@h:6379/0", "redis://h:6379/0"),
        ("redis://alice:s3cret@h:6379/2", "redis://alice@h:6379/2"),
        ("rediss://alice:p@ss@h/0", "rediss://alice@h/0"),
        ("redis://h:6379/0?password=s3cret&db=1", "redis://h:6379/0?db=1"),
        ("redis://h:6379/0?password=s3cret", "redis://h:6379/0"),
        ("unix://:s3cret@/run/redis.sock?db=0", "unix:///run/redis.sock?db=0"),
    ],
)
def test_without_password_keeps_everything_but_the_password(url: str, bare: str) -> None:
    assert without_password(url) == bare
    assert url_password(bare) is None and url_username(bare) == url_username(url)


def test_a_url_without_a_password_takes_the_one_in_rediscli_auth(
    redis_password_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-cli's convention: the password in $REDISCLI_AUTH (not on a command line, where
    `ps` shows it); a password in the URL wins; a wrong one is told as the variable's."""
    port = redis_password_server.port
    crawler = PASSWORD_SERVER_USERS["crawler"]
    monkeypatch.setenv("REDISCLI_AUTH", crawler)
    client = connect_redis(f"redis://crawler@127.0.0.1:{port}/0", patience=0)
    try:
        assert client.ping()
    finally:
        client.close()
    client = connect_redis(redis_password_server.url, patience=0)  # its own password
    client.close()
    monkeypatch.setenv("REDISCLI_AUTH", "wrong-" + crawler)
    with pytest.raises(RedisRefused, match=r"refused the user and password in \$REDISCLI_AUTH"):
        connect_redis(f"redis://crawler@127.0.0.1:{port}/0", patience=0)


def test_a_bad_url_is_bad_input_and_shows_no_piece_of_the_password() -> None:
    for url in (
        "http://:s3cret@127.0.0.1:1/0",  # not a Redis scheme
        "redis://:s3cret/more#@127.0.0.1:1/0",  # "/" and "#" unquoted: the port is "s3cret"
    ):
        with pytest.raises(RedisBadURL, match=r"not a Redis URL.*%2F %23") as info:
            connect_redis(url, patience=0)
        assert info.value.exit == Exit.USAGE
        assert "s3cret" not in str(info.value) and "more" not in str(info.value)

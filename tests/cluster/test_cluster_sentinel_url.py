"""Sentinel URLs: parsing, and the password never shown."""

from __future__ import annotations

import pytest

from gossamer.cluster._redis import RedisBadURL, redact
from gossamer.cluster.connect import connect_redis
from gossamer.frontier.redis._connect import SentinelURL, parse_sentinel_url


def test_a_sentinel_url_names_its_sentinels_service_and_db() -> None:
    assert parse_sentinel_url("redis+sentinel://a:26380,b,[::1]:7/crawl/3") == SentinelURL(
        (("a", 26380), ("b", 26379), ("::1", 7)), "crawl", 3
    )
    got = parse_sentinel_url("rediss+sentinel://u:p%40ss@h:1/svc?sentinel_password=s3")
    assert got == SentinelURL((("h", 1),), "svc", 0, "u", "p@ss", "s3", tls=True)
    assert parse_sentinel_url("redis://h:6379/0") is None
    got = parse_sentinel_url("rediss+sentinel://h:1/svc?ssl_ca_certs=/etc/g/ca.crt")
    assert got == SentinelURL((("h", 1),), "svc", tls=True, ssl_ca_certs="/etc/g/ca.crt")


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://h:1",  # no service
        "redis+sentinel://h:x/svc",
        "redis+sentinel://h:1/svc/db",
        "redis+sentinel://h:1/svc/0?other=1",
        "redis+sentinel://h:1/svc/0?ssl_ca_certs=ca.crt",  # (without TLS)
        "redis+sentinel:///svc",
    ],
)
def test_a_malformed_sentinel_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        parse_sentinel_url(url)
    with pytest.raises(RedisBadURL, match="redis\\+sentinel://"):
        connect_redis(url, patience=0)


def test_the_passwords_of_a_sentinel_url_are_hidden() -> None:
    url = "redis+sentinel://:pw1@h1:1,h2:2/svc/0?sentinel_password=pw2"
    assert redact(url) == "redis+sentinel://:***@h1:1,h2:2/svc/0?sentinel_password=***"


def test_no_sentinel_answering_is_one_short_line() -> None:
    from gossamer.cluster._redis import RedisUnavailable
    from gossamer.testweb.redisd import _free_ports

    a, b = _free_ports(2)  # nothing listens there
    with pytest.raises(RedisUnavailable) as caught:
        connect_redis(f"redis+sentinel://:pw@127.0.0.1:{a},127.0.0.1:{b}/svc/0", patience=0)
    text = str(caught.value)
    assert f"the sentinels at 127.0.0.1:{a}, 127.0.0.1:{b} name no master of service 'svc'" in text
    assert "pw" not in text.replace("password", "") and len(text) < 400

"""Crawl-wide request headers and the proxy: parsing, checks, settings and the fetcher's
curl options (against a scripted raw server on loopback; the crawl through a real proxy is in
tests/e2e/test_crawl_fetch_options.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from _fetch_helpers import raw_server, response, run

from gossamer.config import SettingsError, load_settings
from gossamer.fetch import (
    ERROR_BLOCKED_ADDRESS,
    ERROR_CONNECT,
    ERROR_PROXY,
    CurlFetcher,
    FetchRequest,
    Resolver,
)
from gossamer.fetch.options import (
    check_headers,
    check_proxy,
    parse_header,
    probe_proxy,
    proxy_address,
    proxy_credentials,
    redact_proxy,
)

HOST = "www.example.test"
SECRET = "s3cr%40t"  # percent-encoded "s3cr@t"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------ headers
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("From: crawler@example.org", ("From", "crawler@example.org")),
        ("X-Crawl-Id:abc", ("X-Crawl-Id", "abc")),
        ("Accept-Language:  en, fr;q=0.5 \t", ("Accept-Language", "en, fr;q=0.5")),
        ("Cookie: a=1; b=\"x:y\"", ("Cookie", 'a=1; b="x:y"')),  # a colon in the value
        ("x!#$%&'*+-.^_`|~9: v", ("x!#$%&'*+-.^_`|~9", "v")),  # every token character
    ],
)
def test_parse_header(text: str, expected: tuple[str, str]) -> None:
    assert parse_header(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("From crawler@example.org", "has no colon"),
        ("X Crawl: 1", "not a valid header name"),
        (": v", "not a valid header name"),
        ("X-A :1", "not a valid header name"),  # no space before the colon (RFC 9112 §5.1)
        ("X-A:", "empty value"),
        ("X-A:   ", "empty value"),
        ("X-A: a\r\nInjected: 1", "line break"),
        ("X-A: a\nb", "line break"),
        ("X-A: a\0b", "control"),
        ("X-A: café", "non-ASCII"),
        ("Naïve: 1", "not a valid header name"),
    ],
)
def test_parse_header_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_header(text)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("Host", "--resolve"),
        ("content-length", "without a body"),
        ("Transfer-Encoding", "without a body"),
        ("Connection", "alive itself"),
        ("User-Agent", "--user-agent"),
        ("If-None-Match", "--recrawl"),
        ("If-Modified-Since", "--recrawl"),
        ("Range", "part of the page"),
        ("Proxy-Authorization", "--proxy URL"),
        ("Upgrade", "HTTP/1.1 only"),
    ],
)
def test_headers_gossamer_sets_or_that_break_the_crawl_are_refused(name: str, hint: str) -> None:
    with pytest.raises(ValueError, match=f"cannot be set with -H: .*{hint}"):
        check_headers([f"{name}: x"])


def test_check_headers() -> None:
    assert check_headers(["From: a@b.org", "accept: text/html", "Accept-Encoding: gzip, br"]) == [
        ("From", "a@b.org"),
        ("accept", "text/html"),
        ("Accept-Encoding", "gzip, br"),
    ]
    assert check_headers(["Accept-Encoding: identity"]) == [("Accept-Encoding", "identity")]
    with pytest.raises(ValueError, match="x-a is given twice"):
        check_headers(["X-A: 1", "x-a: 2"])
    with pytest.raises(ValueError, match="cannot decode zstd"):
        check_headers(["Accept-Encoding: gzip;q=1, zstd"])


# ------------------------------------------------------------------ proxy
def test_check_proxy_accepts() -> None:
    assert check_proxy(" http://proxy.corp:3128 ") == "http://proxy.corp:3128"
    assert check_proxy("https://u:p@10.0.0.1:8443/") == "https://u:p@10.0.0.1:8443/"
    assert check_proxy("http://[::1]:3128") == "http://[::1]:3128"
    assert check_proxy("ENV") == "env" and check_proxy("none") == "none"
    assert proxy_address("http://proxy.corp") == ("proxy.corp", 1080)  # curl's default
    assert proxy_address("http://u:p@[::1]:3128") == ("::1", 3128)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"socks5://u:{SECRET}@h:1080", "expected an http:// or https:// URL"),
        (f"u:{SECRET}@h:3128", "expected an http:// or https:// URL"),
        ("proxy.corp:3128", "expected an http:// or https:// URL"),
        (f"http://u:{SECRET}@h:99999", "not a valid URL"),
        (f"http://u:{SECRET}@h:port", "not a valid URL"),
        (f"http://u:{SECRET}@:3128", "names no host"),
        (f"http://u:{SECRET}@h:3128/path", "no path or query"),
        (f"http://u:{SECRET}@h:0", "port 0"),
        (f"http://u:{SECRET}@h:3128 x", "space"),
    ],
)
def test_check_proxy_refuses_without_showing_the_password(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        check_proxy(text)
    assert SECRET not in str(info.value) and "s3cr" not in str(info.value)


def test_redact_and_credentials() -> None:
    assert redact_proxy(f"http://user:{SECRET}@h:3128") == "http://user:****@h:3128"
    assert redact_proxy("http://user@h:3128") == "http://user@h:3128"
    assert redact_proxy("http://h:3128") == "http://h:3128"
    assert redact_proxy("http://a:b@c@h:1") == "http://a:****@h:1"  # the last @ ends userinfo
    assert redact_proxy("a:b@h:1") == "a:****@h:1"
    assert redact_proxy(None) is None
    assert proxy_credentials(f"http://us%20er:{SECRET}@h:3128") == ("us er", "s3cr@t")
    assert proxy_credentials("http://h:3128") is None


def test_probe_proxy() -> None:
    assert "Connection refused" in (probe_proxy(f"http://127.0.0.1:{closed_port()}", 2) or "")
    assert "does not resolve" in (probe_proxy("http://proxy.invalid:3128", 2) or "")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert probe_proxy(f"http://127.0.0.1:{s.getsockname()[1]}", 2) is None


# ------------------------------------------------------------------ settings
def test_settings_from_flags_env_and_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings({"headers": ["From:a@b.org", "X-Id: 1"], "proxy": "http://p:3128"})
    assert s.fetch.headers == ["From: a@b.org", "X-Id: 1"] and s.fetch.proxy == "http://p:3128"
    assert s.fetch_options() == {
        "headers": [("From", "a@b.org"), ("X-Id", "1")],
        "proxy": "http://p:3128",
    }
    assert load_settings({}).fetch_options() == {"headers": [], "proxy": None}
    cfg = tmp_path / "c.toml"
    cfg.write_text('[crawl]\nheaders = ["From: t@b.org"]\nproxy = "env"\n')
    assert load_settings({}, config=cfg).fetch.headers == ["From: t@b.org"]
    assert load_settings({}, config=cfg).fetch_options()["proxy"] == "env"
    # the environment: one header a line, or a JSON list; it beats the file, flags beat it
    monkeypatch.setenv("GOSSAMER_HEADERS", "From: e@b.org\nX-Id: 2\n")
    monkeypatch.setenv("GOSSAMER_PROXY", "http://e:3128")
    s = load_settings({}, config=cfg)
    assert (s.fetch.headers, s.fetch.proxy) == (["From: e@b.org", "X-Id: 2"], "http://e:3128")
    monkeypatch.setenv("GOSSAMER_HEADERS", '["From: j@b.org"]')
    assert load_settings({}).fetch.headers == ["From: j@b.org"]
    assert load_settings({"headers": ["X-F: 1"]}).fetch.headers == ["X-F: 1"]
    assert load_settings({}).manifest()["headers"] == ["From: j@b.org"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"headers": ["Host: x"]}, "--header: header Host cannot be set with -H"),
        ({"headers": ["X-A: 1\r\nX-B: 2"]}, "line break"),
        ({"proxy": f"ftp://u:{SECRET}@h:21"}, "--proxy: proxy ftp://u:****@h:21: expected"),
    ],
)
def test_invalid_settings(
    flags: dict[str, object], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line naming the flag; a secret is never in it, nor in the variable's line."""
    with pytest.raises(SettingsError) as info:
        load_settings(flags)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert SECRET not in str(info.value) and "s3cr%40t" not in str(info.value)
    ((name, value),) = flags.items()
    monkeypatch.setenv(f"GOSSAMER_{name.upper()}", json.dumps(value))
    with pytest.raises(SettingsError) as info:
        load_settings({})
    assert str(info.value).startswith(f"GOSSAMER_{name.upper()}: ")
    assert SECRET not in str(info.value) and "s3cr%40t" not in str(info.value)


def test_invalid_headers_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOSSAMER_HEADERS", '["From: x"')
    with pytest.raises(SettingsError, match="not a JSON list"):
        load_settings({})
    monkeypatch.setenv("GOSSAMER_HEADERS", "From x")
    with pytest.raises(SettingsError, match="has no colon"):
        load_settings({})


# ------------------------------------------------------------------ the fetcher's options
def _fetch(
    urls: list[str | FetchRequest], **kw: object
) -> tuple[list[tuple[str | None, int | None, bytes]], list[bytes]]:
    """Fetch `urls` from a raw server that answers 200 (HOST mapped there): per fetch
    (error, status, request_head), and the request heads the server received."""

    async def go() -> tuple[list[tuple[str | None, int | None, bytes]], list[bytes]]:
        async with raw_server(lambda _: [response(200, b"ok")]) as srv:
            resolver = Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True)
            f = CurlFetcher(resolver=resolver, **kw)  # type: ignore[arg-type]
            try:
                out = []
                for u in urls:
                    r = await f.fetch(u if isinstance(u, FetchRequest) else FetchRequest(u))
                    out.append((r.error, r.status, r.request_head))
                return out, [head for _, head in srv.requests]
            finally:
                await f.aclose()

    return run(go())


def test_crawl_headers_are_sent_and_recorded_as_sent() -> None:
    results, received = _fetch(
        [
            f"http://{HOST}/a",
            FetchRequest(f"http://{HOST}/b", (("If-None-Match", '"e"'), ("X-Id", "per-request"))),
        ],
        user_agent="ua/1",
        headers=[("From", "a@b.org"), ("accept", "text/html"), ("X-Id", "7")],
    )
    assert received[0] == (
        b"GET /a HTTP/1.1\r\nHost: www.example.test\r\nUser-Agent: ua/1\r\n"
        b"accept: text/html\r\nAccept-Encoding: gzip, deflate, br\r\nFrom: a@b.org\r\n"
        b"X-Id: 7\r\n\r\n"
    )
    # a request's own headers come on top (a conditional GET of --recrawl), replacing one of
    # the crawl's of the same name
    assert received[1] == (
        b"GET /b HTTP/1.1\r\nHost: www.example.test\r\nUser-Agent: ua/1\r\n"
        b"accept: text/html\r\nAccept-Encoding: gzip, deflate, br\r\nFrom: a@b.org\r\n"
        b'If-None-Match: "e"\r\nX-Id: per-request\r\n\r\n'
    )
    assert [head for _, _, head in results] == received  # the WARC request record's head


def test_the_fetcher_refuses_bad_crawl_headers() -> None:
    for bad in (("Host", "x"), ("X-A", "a\r\nB: c"), ("Bad Name", "v"), ("User-Agent", "x")):
        with pytest.raises(ValueError):
            CurlFetcher(headers=[bad])
    with pytest.raises(ValueError, match="expected an http"):
        CurlFetcher(proxy="socks5://h:1")


def test_without_a_proxy_the_environment_proxy_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    # a dead proxy in every variable libcurl reads: used, each fetch would fail
    dead = f"http://127.0.0.1:{closed_port()}"
    for var in ("http_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, dead)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    for proxy in (None, "none"):
        results, received = _fetch([f"http://{HOST}/"], proxy=proxy)
        assert results[0][:2] == (None, 200) and len(received) == 1
    results, received = _fetch([f"http://{HOST}/"], proxy="env")  # taken when asked
    assert results[0][0] == ERROR_PROXY and received == []
    monkeypatch.setenv("no_proxy", HOST)  # and no_proxy with it, as curl does
    results, received = _fetch([f"http://{HOST}/"], proxy="env")
    assert results[0][:2] == (None, 200) and len(received) == 1


def test_a_dead_proxy_is_a_proxy_error_not_the_sites(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("no_proxy", HOST)  # an explicit proxy takes every URL all the same
    results, received = _fetch(
        [f"http://{HOST}/", f"https://{HOST}:80/"], proxy=f"http://u:p@127.0.0.1:{closed_port()}"
    )
    assert [r[:2] for r in results] == [(ERROR_PROXY, None)] * 2 and received == []


def test_a_proxy_refusing_or_failing_the_tunnel() -> None:
    """A proxy answering CONNECT with 407 refuses us (ERROR_PROXY); with 502 it could not
    reach the site (the site's ERROR_CONNECT). The CONNECT goes to the resolved address."""

    async def go() -> list[tuple[str | None, int | None, str]]:
        answers = {b"407": b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                           b"Content-Length: 0\r\n\r\n",
                   b"502": b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"}  # fmt: skip
        seen: list[bytes] = []

        def script(head: bytes) -> list[bytes | float | str]:
            seen.append(head)
            return [answers[b"407" if b"Proxy-Authorization" not in head else b"502"], "close"]

        async with raw_server(script) as proxy:
            resolver = Resolver([f"{HOST}:80:192.0.2.7:8080"], allow_private=True)
            out = []
            for url in (f"http://127.0.0.1:{proxy.port}", f"http://u:p@127.0.0.1:{proxy.port}"):
                f = CurlFetcher(resolver=resolver, proxy=url)
                try:
                    r = await f.fetch(FetchRequest(f"http://{HOST}/x"))
                    out.append((r.error, r.status, r.error_detail or ""))
                finally:
                    await f.aclose()
        assert all(h.startswith(b"CONNECT 192.0.2.7:8080 HTTP/1.1\r\n") for h in seen), seen
        assert b"Proxy-Authorization: Basic dTpw\r\n" in seen[-1]  # u:p
        return out

    refused, failed = run(go())
    assert refused[:2] == (ERROR_PROXY, None) and "407" in refused[2]
    assert failed[:2] == (ERROR_CONNECT, None) and "502" in failed[2]


def test_the_private_address_guard_holds_through_a_proxy() -> None:
    """gossamer still resolves the site itself: a private address is refused before the
    proxy is asked for anything."""

    async def go() -> tuple[str | None, list[tuple[int, bytes]]]:
        async with raw_server(lambda _: [response(200, b"ok")]) as proxy:
            f = CurlFetcher(
                resolver=Resolver([f"{HOST}:80:10.1.2.3:80"]),
                proxy=f"http://127.0.0.1:{proxy.port}",
            )
            try:
                r = await f.fetch(FetchRequest(f"http://{HOST}/"))
            finally:
                await f.aclose()
            return r.error, proxy.requests

    error, proxied = run(go())
    assert error == ERROR_BLOCKED_ADDRESS and proxied == []


def test_cluster_workers_get_the_headers_and_the_proxy() -> None:
    """Cluster mode stores the settings in Redis for `gossamer worker` (on any machine): the
    headers and the proxy go with them, as --resume takes them from crawl.json."""
    from gossamer.cluster.crawls import stored_settings
    from gossamer.config import CrawlSettings

    s = load_settings({"headers": ["From: a@b.org"], "proxy": "http://u:p@proxy.corp:3128"})
    again = CrawlSettings(**stored_settings(s))
    assert again.fetch_options() == s.fetch_options() == {
        "headers": [("From", "a@b.org")],
        "proxy": "http://u:p@proxy.corp:3128",
    }
    assert CrawlSettings(**s.manifest()).fetch_options() == s.fetch_options()

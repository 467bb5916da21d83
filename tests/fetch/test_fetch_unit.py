"""Pure parts of the fetcher: URL splitting, response heads, results, settings."""

from __future__ import annotations

import dataclasses

import pytest

from gossamer.fetch import ERROR_KEYS, CurlFetcher, FetchRequest, FetchResult, split_url
from gossamer.fetch._types import make_result
from gossamer.fetch.curl import _classify, _final_head, _parse_head


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("http://www.h12.example/news/page-7.html",
         ("www.h12.example", 80, "/news/page-7.html", "www.h12.example")),
        ("http://a.example", ("a.example", 80, "/", "a.example")),
        ("http://a.example?q=1#f", ("a.example", 80, "/?q=1", "a.example")),
        ("http://a.example/p#f?x", ("a.example", 80, "/p", "a.example")),
        ("https://a.example/", ("a.example", 443, "/", "a.example")),
        ("HTTP://A.Example:8080/x", ("a.example", 8080, "/x", "a.example:8080")),
        ("http://a.example:80/x", ("a.example", 80, "/x", "a.example")),
        ("https://a.example:443/x", ("a.example", 443, "/x", "a.example")),
        ("http://1.2.3.4/x", ("1.2.3.4", 80, "/x", "1.2.3.4")),
        ("http://[::1]:8080/x", ("[::1]", 8080, "/x", "[::1]:8080")),
        ("http://[::1]/", ("[::1]", 80, "/", "[::1]")),
    ],
)  # fmt: skip
def test_split_url(url: str, parts: tuple[str, int, str, str]) -> None:
    assert split_url(url) == parts


@pytest.mark.parametrize(
    "url",
    ["ftp://a/", "mailto:x@y", "//a/", "a.example/x", "http://", "http://u:p@a/", "http://a:0/",
     "http://a:65536/", "http://a:x/", "http://[::1/", "http://[::1]x/", "http://a/ b",
     "http://a/é"],
)  # fmt: skip
def test_split_url_refuses(url: str) -> None:
    assert split_url(url) is None


def test_final_head_skips_interim_responses_and_trailers() -> None:
    final = b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\n"
    assert _final_head(final) == final
    assert _final_head(b"HTTP/1.1 100 Continue\r\n\r\n" + final) == final
    assert (
        _final_head(b"HTTP/1.1 103 Early\r\nLink: x\r\n\r\n" + final + b"Trailer: 1\r\n\r\n")
        == final
    )
    assert _final_head(b"HTTP/1.1 200 OK\r\nA: ") == b"HTTP/1.1 200 OK\r\nA: "  # cut short
    assert _final_head(b"HTTP/1.1 101 Switching\r\n\r\n") == b"HTTP/1.1 101 Switching\r\n\r\n"


def test_parse_head() -> None:
    head = (
        b"HTTP/1.0 404 Not Found\r\nContent-Type:text/html \r\nX-Fold: a\r\n\tb\r\n"
        b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nbroken line\r\nX-\xe9: \xff\r\n\r\n"
    )
    status, version, headers = _parse_head(head)
    assert (status, version) == (404, "1.0")
    assert headers == (
        ("Content-Type", "text/html"),
        ("X-Fold", "a b"),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
        ("X-é", "ÿ"),
    )
    assert _parse_head(b"HTTP/1.1 abc\r\n\r\n")[0] is None
    assert _parse_head(b"HTTP/2 204\r\n\r\n")[:2] == (204, "2")


def test_make_result_equals_the_dataclass() -> None:
    values = [f"v{i}" for i in range(len(dataclasses.fields(FetchResult)))]
    assert make_result(*values) == FetchResult(*values)  # type: ignore[arg-type]
    r = make_result(*values)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.url = "x"  # type: ignore[misc]


def test_result_headers_are_case_insensitive() -> None:
    r = FetchResult(
        url="http://a/", status=200, headers=(("ETag", '"1"'), ("Vary", "a"), ("vary", "b")),
        body=b"", raw_body_len=0, truncated=False, error=None, ip=None, port=None,
        started_at=0.0, elapsed=0.0, request_head=b"", response_head=b"", http_version="1.1",
    )  # fmt: skip
    assert r.header("etag") == '"1"' and r.header("missing") is None
    assert r.header_all("VARY") == ["a", "b"] and r.ok


def test_error_classification() -> None:
    assert _classify(56, "Recv failure: Connection reset by peer") == "fetch/error/reset"
    assert _classify(56, "Recv failure: Broken pipe") == "fetch/error/network"
    assert _classify(28, "Operation timed out") == "fetch/error/timeout"
    assert _classify(7, "Failed to connect") == "fetch/error/connect"
    assert _classify(61, "Error while processing content unencoding") == "fetch/error/decode"
    assert _classify(9999, "?") == "fetch/error/other"
    assert len(set(ERROR_KEYS)) == len(ERROR_KEYS)
    assert all(k.startswith("fetch/error/") for k in ERROR_KEYS)


def test_settings_are_validated() -> None:
    for bad in ({"connect_timeout": 0}, {"total_timeout": -1}, {"max_body": 0},
                {"too_large": "explode"}):  # fmt: skip
        with pytest.raises(ValueError):
            CurlFetcher(**bad)  # type: ignore[arg-type]


def test_extra_headers_replace_defaults_in_place() -> None:
    f = CurlFetcher(user_agent="ua/1")
    lines, head = f._merge_headers((("Accept", "text/*"), ("If-None-Match", '"x"')))
    assert lines == ["User-Agent: ua/1", "Accept-Encoding: gzip, deflate, br", "Accept: text/*",
                     'If-None-Match: "x"']  # fmt: skip
    assert head == (
        b"User-Agent: ua/1\r\nAccept-Encoding: gzip, deflate, br\r\nAccept: text/*\r\n"
        b'If-None-Match: "x"\r\n'
    )
    bare = CurlFetcher(user_agent="", accept="", accept_encoding="")
    assert bare._base_list == ["Accept:", "Accept-Encoding:"]  # libcurl's own defaults removed
    assert bare._base_bytes == b""
    assert FetchRequest("http://a/").headers == ()

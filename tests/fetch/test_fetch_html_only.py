"""`FetchRequest(html_only=True)`: a response that is not HTML is stopped at its first body
bytes, so at most its head and one read buffer come off the socket (docs/crawler/fetch.md,
"Non-HTML bodies"). Measured from libcurl's own debug callback (every byte it reads)
against a scripted raw server."""

from __future__ import annotations

import gzip
from typing import Any

import pycurl
import pytest
from _fetch_helpers import Action, raw_server, response, run

from gossamer.fetch import CurlFetcher, FetchRequest, FetchResult, Resolver
from gossamer.fetch.curl import SNIFF_BYTES

HOST = "www.example.test"
BIG = 20 * 1024 * 1024  # a 20 MB "PDF"
PDF = b"%PDF-1.4\n" + bytes(BIG - 9)
BUFFER = 64 * 1024  # CurlFetcher's default buffer_size (libcurl's BUFFERSIZE)


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """[bytes libcurl has read off the socket so far]: the response heads (CURLINFO_HEADER_IN)
    and the bodies as received, before decoding (CURLINFO_DATA_IN), of every handle the
    fetchers make."""
    read = [0]
    new_slot = CurlFetcher._new_slot

    def counting(self: CurlFetcher) -> Any:
        slot = new_slot(self)

        def debug(kind: int, data: bytes) -> None:
            if kind in (pycurl.INFOTYPE_HEADER_IN, pycurl.INFOTYPE_DATA_IN):
                read[0] += len(data)

        slot.curl.setopt(pycurl.VERBOSE, 1)
        slot.curl.setopt(pycurl.DEBUGFUNCTION, debug)
        return slot

    monkeypatch.setattr(CurlFetcher, "_new_slot", counting)
    return read


def fetch_each(
    replies: dict[str, list[Action]], requests: list[FetchRequest], read: list[int], **kw: Any
) -> tuple[list[FetchResult], list[int], list[int], Any]:
    """Serve `replies` by path, fetch `requests` one after the other: the results, the bytes
    read for each, the connection number each request came on, and the fetcher's statistics."""

    def script(head: bytes) -> list[Action]:
        return replies[head.split(b" ")[1].decode()]

    async def go() -> tuple[list[FetchResult], list[int], list[int], Any]:
        async with raw_server(script) as srv:
            resolver = Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True)
            f = CurlFetcher(resolver=resolver, **kw)
            try:
                results, reads = [], []
                for req in requests:
                    before = read[0]
                    results.append(await f.fetch(req))
                    reads.append(read[0] - before)
                return results, reads, [conn for conn, _ in srv.requests], f.statistics()
            finally:
                await f.aclose()

    return run(go())


def pdf_reply(body: bytes = PDF, headers: list[tuple[str, str]] | None = None) -> list[Action]:
    """An application/pdf response sent a megabyte at a time; `headers` replace its
    Content-Length."""
    hs = headers if headers is not None else [("Content-Length", str(len(body)))]
    step = 1 << 20
    head = response(200, b"", [("Content-Type", "application/pdf"), *hs])
    return [head, *(body[i : i + step] for i in range(0, len(body), step))]


def chunked(data: bytes, step: int = 1 << 20) -> list[Action]:
    out: list[Action] = [b"%x\r\n%b\r\n" % (len(data[i : i + step]), data[i : i + step])
                         for i in range(0, len(data), step)]  # fmt: skip
    return [*out, b"0\r\n\r\n"]


def url(path: str, html_only: bool = True) -> FetchRequest:
    return FetchRequest(f"http://{HOST}{path}", html_only=html_only)


def test_a_large_pdf_is_stopped_after_its_head_and_one_buffer(bytes_read: list[int]) -> None:
    page = b"<!DOCTYPE html><title>t</title>" + b"<p>text</p>" * 20_000  # 220 kB of HTML
    replies = {
        "/report": pdf_reply(),
        "/page": [response(200, page, [("Content-Type", "text/html; charset=utf-8")])],
    }
    results, reads, conns, stats = fetch_each(
        replies, [url("/report"), url("/page"), url("/report", html_only=False)], bytes_read,
        max_body=BIG,
    )  # fmt: skip
    cut, html, whole = results
    head = len(cut.response_head)
    assert reads[0] <= head + BUFFER, f"{reads[0]:,} bytes read for a PDF"
    assert cut.error is None and cut.status == 200 and cut.not_html and cut.truncated
    assert cut.header("Content-Length") == str(BIG)
    assert 0 < len(cut.body) <= BUFFER and PDF.startswith(cut.body)
    assert cut.raw_body_len == len(cut.body)
    # the HTML page is read whole, on a new connection (stopping closed the first one)
    assert html.error is None and html.body == page and not html.truncated
    assert not html.not_html and reads[1] >= len(page)
    assert conns == [1, 2, 2]
    # not asked for html_only: the same PDF read whole
    assert whole.error is None and whole.body == PDF and not whole.not_html
    assert reads[2] >= BIG
    assert stats.not_html == 1 and stats.truncated == 1 and stats.errors == {}


@pytest.mark.parametrize(
    "case",
    ["chunked", "no-content-type", "no-content-type-late", "gzip", "interim-1xx", "404",
     "max-body-small"],
)  # fmt: skip
def test_non_html_bodies_of_every_shape_are_stopped(bytes_read: list[int], case: str) -> None:
    blob = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * (BIG // 256)
    kw: dict[str, Any] = {"max_body": BIG}
    if case == "chunked":  # no length: stopped all the same, its length unknown
        reply = pdf_reply(b"", [("Transfer-Encoding", "chunked")]) + chunked(blob)
    elif case == "no-content-type":  # sniffed: not HTML
        reply = [response(200, b"", [("Content-Length", str(len(blob)))]), blob]
    elif case == "no-content-type-late":  # too few bytes to sniff at first: decided later
        head = response(200, b"", [("Content-Length", str(len(blob) + 10))])
        reply = [head, b" " * 10, 0.05, blob]
    elif case == "gzip":
        data = gzip.compress(blob, 1)
        reply = pdf_reply(data, [("Content-Encoding", "gzip"), ("Content-Length", str(len(data)))])
    elif case == "interim-1xx":
        reply = [b"HTTP/1.1 103 Early Hints\r\nContent-Type: text/html\r\n\r\n", *pdf_reply()]
    elif case == "404":  # an error page that is not HTML is not read either
        reply = [response(404, b"", [("Content-Type", "application/json"),
                                     ("Content-Length", str(len(blob)))]), blob]  # fmt: skip
    else:  # a cap below the first chunk: the body kept is the cap's
        reply, kw = pdf_reply(), {"max_body": 100}
    [r], [read], _, stats = fetch_each({"/x": reply}, [url("/x")], bytes_read, **kw)
    # the 103's head is read too; bytes too few to sniff come in a read before the buffer
    before = {"interim-1xx": 100, "no-content-type-late": SNIFF_BYTES}.get(case, 0)
    assert read <= len(r.response_head) + before + BUFFER, f"{read:,} bytes read"
    assert r.error is None and r.not_html and r.truncated, (r.error, r.error_detail)
    assert 0 < len(r.body) <= (100 if case == "max-body-small" else BUFFER)
    assert stats.not_html == 1


@pytest.mark.parametrize(
    "case",
    [
        "html",
        "xhtml",
        "sniffed-html",
        "sniffed-html-late",
        "redirect",
        "small-pdf",
    ],
)
def test_what_is_never_stopped(bytes_read: list[int], case: str) -> None:
    """HTML (by its type, or sniffed without one), a 3xx whatever its type, and a non-HTML
    body whose Content-Length fits in one buffer (read whole: its connection is kept)."""
    big_html = b"  <html><body>" + b"<p>x</p>" * 100_000 + b"</body></html>"
    ctype = {"html": "text/html", "xhtml": "application/xhtml+xml; charset=utf-8"}
    if case in ctype:
        reply = [response(200, big_html, [("Content-Type", ctype[case])])]
    elif case == "sniffed-html":  # no Content-Type: the first bytes say HTML
        reply = [response(200, big_html)]
    elif case == "sniffed-html-late":  # … once there are enough of them to tell
        whole = response(200, b"\n" * 10 + big_html)
        at = whole.index(b"\r\n\r\n") + 14
        reply = [whole[:at], 0.05, whole[at:]]
    elif case == "redirect":
        reply = [response(302, PDF[:200_000], [("Content-Type", "application/pdf"),
                                                ("Location", "/y")], reason="Found")]  # fmt: skip
    else:
        reply = [response(200, PDF[:BUFFER], [("Content-Type", "application/pdf")])]
    results, _, conns, stats = fetch_each({"/x": reply}, [url("/x"), url("/x")], bytes_read)
    sent = b"".join(a for a in reply if isinstance(a, bytes))
    for r in results:
        assert r.error is None and not r.not_html and not r.truncated
        assert r.body == sent[sent.index(b"\r\n\r\n") + 4 :]
    assert conns == [1, 1]  # read to the end: the connection kept alive
    assert stats.not_html == 0


def test_a_stopped_transfer_leaves_the_handle_clean(bytes_read: list[int]) -> None:
    """The handle that stopped a PDF fetches an HTML page whole next, and a plain request
    of the same PDF is read whole (the html_only flag is per request)."""
    small_page = response(200, b"<html>ok</html>", [("Content-Type", "text/html")])
    replies = {"/report": pdf_reply(PDF[: 4 * 1024 * 1024]), "/page": [small_page]}
    results, _, _, stats = fetch_each(
        replies, [url("/report"), url("/page"), url("/report", html_only=False)], bytes_read
    )
    assert [r.not_html for r in results] == [True, False, False]
    assert results[1].body == b"<html>ok</html>" and not results[1].truncated
    assert len(results[2].body) == 4 * 1024 * 1024 and not results[2].truncated
    assert stats.not_html == 1 and stats.truncated == 1

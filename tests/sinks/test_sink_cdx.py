"""The CDXJ index: the lines WarcWriter(cdx=True) writes as it goes equal, byte for byte, what
cdxj-indexer writes from the same files; write_crawl_index covers every closed WARC (those
without a per-file index, e.g. recovered after a kill, indexed by the library)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import surt
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from gossamer.crawldir import CDX_INDEX, CDX_PARTS
from gossamer.sinks import WarcWriter, recover
from gossamer.sinks.cdx import (
    _PLAIN_URL,
    cdxj_line,
    http_status_and_mime,
    surt_key,
    write_crawl_index,
)

BIN = Path(sys.executable).parent
REQ = b"GET /p HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: gossamer/0.1\r\n\r\n"
BODY = b"<html><body>" + b"<p>words</p>" * 200 + b"</body></html>"


def head(status: str = "200 OK", *lines: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *lines]) + "\r\n\r\n").encode()


def library_index(files: list[Path]) -> str:
    """What the `cdxj-indexer` command writes (sorted) for `files`."""
    res = subprocess.run(
        [str(BIN / "cdxj-indexer"), "--sort", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return res.stdout


def write_mixed(w: WarcWriter, n: int = 40) -> None:
    """Responses of several kinds: statuses, types with parameters, no type, a revisit,
    a decoded body, odd URLs, and the same URL twice."""
    t = time.time()
    for k in range(n):
        url = f"http://www.h{k % 3}.example/dir/page-{k}.html?q={k}&x=%20y"
        w.write_exchange(url, "127.0.0.1", REQ, head("200 OK", "Content-Type: text/html; "
                         "charset=utf-8", "Content-Encoding: gzip"), BODY * (k % 4 + 1), t + k)
    w.write_exchange("http://www.h0.example/", None, REQ, head("404 Not Found"), b"no", t)
    w.write_exchange("http://www.h0.example/", None, REQ, head("404 Not Found"), b"no", t)
    w.write_exchange(
        "http://www.h1.example/robots.txt", "127.0.0.1", REQ,
        head("200 OK", "content-type:text/plain"), b"User-agent: *\n", t,
    )
    w.write_exchange(
        "http://www.h1.example/moved", "127.0.0.1", REQ,
        head("301 Moved Permanently", "Location: /x", "Content-Type: TEXT/HTML"), b"", t,
    )
    w.write_exchange(
        "http://www.h2.example/same", "127.0.0.1", REQ,
        head("304 Not Modified", 'ETag: "abc"'), b"", t, revisit=True,
        refers_to_date="2026-01-01T00:00:00Z",
    )
    w.write_exchange(  # the first page's payload again: an identical-payload revisit
        "http://www.h2.example/copy", "127.0.0.1", REQ,
        head("200 OK", "Content-Type: text/html; charset=utf-8", "Content-Encoding: gzip"),
        BODY, t + 1, identical_to=("http://www.h0.example/dir/page-0.html?q=0&x=%20y", t),
    )
    w.write_exchange(
        "https://EXAMPLE.org:443/a b/ü", "::1", REQ, head("200 OK", "Content-Type: image/png"),
        b"\x89PNG" * 50, t, truncated=True,
    )


def test_cdxj_line_is_cdxj_indexer_s_format() -> None:
    line = cdxj_line(
        "http://www.example.com/a?b=1", "2026-11-25T22:14:44.123456Z", "text/html", "200",
        "sha1:ABC", 123, 456, "f.warc.gz",
    )
    key, stamp, data = line.rstrip("\n").split(" ", 2)
    assert (key, stamp) == ("com,example)/a?b=1", "20261125221444")
    assert list(json.loads(data).items()) == [
        ("url", "http://www.example.com/a?b=1"),
        ("mime", "text/html"),
        ("status", "200"),
        ("digest", "sha1:ABC"),
        ("length", "123"),
        ("offset", "456"),
        ("filename", "f.warc.gz"),
    ]
    no_mime = cdxj_line("http://a.example/", "2026-11-25T22:14:44Z", None, "404", "d", 1, 0, "f")
    assert '"mime"' not in no_mime


def _library_surt(url: str) -> str:
    try:
        return surt.surt(url)  # type: ignore[no-any-return]
    except Exception:
        return url


def _library_line(
    url: str, warc_date: str, mime: str | None, status: str | None, digest: str | None,
    length: int, offset: int, filename: str,
) -> str:  # fmt: skip
    """cdxj_line as it was written first: surt.surt and json.dumps."""
    named = (("url", url), ("mime", mime), ("status", status), ("digest", digest))
    fields = {name: value for name, value in named if value is not None}
    fields.update(length=str(length), offset=str(offset), filename=filename)
    stamp = "".join(c for c in warc_date[:19] if c.isdigit())
    return f"{_library_surt(url)} {stamp} {json.dumps(fields)}\n"


_labels = st.text("aAwW09-z", min_size=1, max_size=5)
_plainish_urls = st.builds(
    lambda scheme, www, labels, last, segments, slash: (
        f"{scheme}://{www}{''.join(x + '.' for x in labels)}{last}"
        + "".join("/" + x for x in segments)
        + slash
    ),
    st.sampled_from(["http", "https", "HTTP", "ftp"]),
    st.sampled_from(["", "www.", "www2.", "WWW.", "wwwx.", "www.www."]),
    st.lists(_labels, max_size=3),
    st.text("abzWZ09", min_size=1, max_size=4),
    st.lists(st.text("aB0._~-%;()?#=&:+,!/ \u00e9", min_size=0, max_size=6), max_size=4),
    st.sampled_from(["", "/", "?q=1", "#f", ":8080/"]),
)


@settings(max_examples=3000, deadline=None)
@given(_plainish_urls)
def test_surt_key_is_surt_s(url: str) -> None:
    """The plain URLs' keys worked out in cdx.py equal surt's (and the others are surt's)."""
    assert surt_key(url) == _library_surt(url)


def test_surt_key_covers_the_usual_urls() -> None:
    """The fast path takes the simulated web's URLs, and not what it cannot key alone."""
    for url in ("http://www.h12.example/p/3/x-1.html", "https://a.example/", "http://b.example"):
        assert _PLAIN_URL(url) is not None
        assert surt_key(url) == _library_surt(url)
    for url in (
        "http://a.example/a?b=1", "http://a.example:81/", "http://127.0.0.1/",
        "http://a.example/x//y", "http://a.example/./x", "http://a.example/%41",
    ):  # fmt: skip
        assert _PLAIN_URL(url) is None
        assert surt_key(url) == _library_surt(url)


_text = st.text(st.sampled_from('ab"\\/ \x01\x7f\u00e9\u2028{}:,'), max_size=6)


@settings(max_examples=1000, deadline=None)
@given(
    _text,
    st.sampled_from(["2026-11-26T09:00:00.123456Z", "2026-11-26T09:00:00Z", "20\u00b26-1", ""]),
    st.none() | _text,
    st.none() | _text,
    st.none() | _text,
    st.integers(0, 10**12),
    st.integers(0, 10**12),
    _text,
)
def test_cdxj_line_is_the_library_s_text(
    path: str, date: str, mime: str | None, status: str | None, digest: str | None,
    length: int, offset: int, filename: str,
) -> None:  # fmt: skip
    args = ("http://a.example/" + path, date, mime, status, digest, length, offset, filename)
    assert cdxj_line(*args) == _library_line(*args)


def test_status_and_mime_as_warcio_reads_them() -> None:
    assert http_status_and_mime(head("200 OK", "Content-Type: text/html; charset=x")) == (
        "200",
        "text/html",
    )
    assert http_status_and_mime(head("404 Not Found")) == ("404", None)
    assert http_status_and_mime(head("200 OK", "X: 1", "content-TYPE:  a/b c")) == ("200", "a/b")


def test_writer_index_equals_cdxj_indexer(tmp_path: Path) -> None:
    # a small max_bytes: several files, each with its own per-file index
    with WarcWriter(tmp_path, cdx=True, max_bytes=5_000) as w:
        write_mixed(w)
    warcs = sorted(tmp_path.glob("*.warc.gz"))
    assert len(warcs) > 3
    parts = sorted((tmp_path / CDX_PARTS).glob("*.cdxj"))
    assert [p.name for p in parts] == [f.name + ".cdxj" for f in warcs]
    assert not list((tmp_path / CDX_PARTS).glob("*.open"))
    for warc, part in zip(warcs, parts, strict=True):
        assert part.read_text() == library_index([warc])
    report = write_crawl_index(tmp_path)
    assert report.indexed_by_library == () and report.warcs == len(warcs)
    index = (tmp_path / CDX_INDEX).read_text()
    assert index == library_index(warcs)
    assert report.lines == len(index.splitlines()) == 40 + 7  # one per response/revisit
    lines = index.splitlines()
    assert lines == sorted(lines)
    revisit = [json.loads(x.split(" ", 2)[2]) for x in lines if "/same" in x]
    assert revisit[0]["mime"] == "warc/revisit" and revisit[0]["status"] == "304"
    assert "digest" not in revisit[0]
    copy = [json.loads(x.split(" ", 2)[2]) for x in lines if "/copy" in x]
    first = [json.loads(x.split(" ", 2)[2]) for x in lines if "page-0.html" in x]
    assert (copy[0]["mime"], copy[0]["status"]) == ("warc/revisit", "200")
    assert copy[0]["digest"] == first[0]["digest"]  # what pywb finds the original by


def test_index_of_plain_warc_equals_cdxj_indexer(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, cdx=True, gzip=False) as w:
        write_mixed(w, n=5)
    write_crawl_index(tmp_path)
    assert (tmp_path / CDX_INDEX).read_text() == library_index(sorted(tmp_path.glob("*.warc")))


def test_warcs_without_a_per_file_index_are_indexed_by_the_library(tmp_path: Path) -> None:
    """A file written without cdx=True, one whose per-file index was lost, and a `.open` file
    of a killed writer (recovered: its partial part is stale) are all covered."""
    with WarcWriter(tmp_path, prefix="plain") as w:
        write_mixed(w, n=3)
    with WarcWriter(tmp_path, prefix="lost", cdx=True) as w:
        write_mixed(w, n=3)
    next((tmp_path / CDX_PARTS).glob("lost-*.cdxj")).unlink()
    # a writer SIGKILLed: its file stays `.open`, its index lines partly written
    script = (
        "import os, signal, sys, time\n"
        "from gossamer.sinks import WarcWriter\n"
        "w = WarcWriter(sys.argv[1], prefix='killed', cdx=True)\n"
        "for k in range(30):\n"
        "    w.write_exchange(f'http://k.example/{k}', None, b'GET / HTTP/1.1\\r\\n\\r\\n',\n"
        "                     b'HTTP/1.1 200 OK\\r\\n\\r\\n', b'x' * k, time.time())\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path)], timeout=60, check=False)
    assert res.returncode == -9
    assert list((tmp_path / CDX_PARTS).glob("killed-*.cdxj.open"))
    with next(tmp_path.glob("killed-*.open")).open("ab") as f:
        f.write(b"\x1f\x8b\x08\x00partial member")
    recover(tmp_path)
    report = write_crawl_index(tmp_path)
    assert sorted(n.split("-")[0] for n in report.indexed_by_library) == [
        "killed",
        "lost",
        "plain",
    ]
    assert not list((tmp_path / CDX_PARTS).glob("*.open"))
    warcs = sorted(tmp_path.glob("*.warc.gz"))
    assert len(warcs) == 3
    index = (tmp_path / CDX_INDEX).read_text()
    assert index == library_index(warcs)
    responses = 0
    for warc in warcs:
        with warc.open("rb") as f:
            responses += sum(r.rec_type in ("response", "revisit") for r in ArchiveIterator(f))
    assert len(index.splitlines()) == responses


def test_no_warc_no_index(tmp_path: Path) -> None:
    assert write_crawl_index(tmp_path / "missing").path is None
    assert write_crawl_index(tmp_path).path is None
    assert not (tmp_path / CDX_INDEX).exists()

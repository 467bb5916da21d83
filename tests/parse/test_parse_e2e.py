"""End to end over loopback: pages and sitemaps fetched from a running simulated web with a
plain HTTP client (gzip accepted and decoded, as the fetcher does), parsed, and archived to
WARC; links must equal the model's, the WARC must pass `warcio check`."""

from __future__ import annotations

import gzip
import http.client
import subprocess
import sys
import time
import zlib
from pathlib import Path

from gossamer.parse import ParseOptions, is_html, parse_html, parse_sitemap
from gossamer.sinks import WarcWriter
from gossamer.testweb import HostFlag, PageFlag, WebSpec, serve_in_thread
from gossamer.urls import canonicalize

SPEC = WebSpec(
    seed=9,
    hosts=12,
    pages_mean=15,
    profile="realistic",
    overrides=(
        ("latency_ms", 0.0),
        ("dead_host", 0.0),
        ("hang_page", 0.0),
        ("slow_first_byte", 0.0),
        ("trickle", 0.0),
        ("rate_limit_host", 0.0),
        ("robots_sitemap", 0.5),
        ("gzip_host", 0.5),
        ("charset_host", 0.3),
    ),
)


def _decode(body: bytes, encoding: str | None) -> bytes | None:
    try:
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, EOFError, zlib.error):
        return None  # broken gzip: no content
    return body


def test_fetch_parse_and_archive_a_live_web(tmp_path: Path) -> None:
    warc_dir = tmp_path / "warc"
    pages = sitemaps_read = 0
    with serve_in_thread(SPEC) as web, WarcWriter(warc_dir, max_bytes=200_000) as warc:
        model = web.model
        for h, host in enumerate(model.hosts):
            ip, port = web.address_of(host.name)
            conn = http.client.HTTPConnection(ip, port, timeout=10)
            try:
                targets = [model.page_target(h, i) for i in range(host.pages)]
                if host.flags & HostFlag.SITEMAP:
                    targets.append("/sitemap.xml")
                for target in targets:
                    request = {"Host": host.name, "Accept-Encoding": "gzip, deflate"}
                    for _attempt in range(3):  # first-request 503s and resets: retry
                        try:
                            conn.request("GET", target, headers=request)
                            resp = conn.getresponse()
                            raw = resp.read()
                        except (ConnectionError, http.client.HTTPException):
                            conn.close()
                            conn = http.client.HTTPConnection(ip, port, timeout=10)
                            continue
                        if resp.status != 503:
                            break
                    else:
                        continue
                    url = model.url_of(h, target)
                    body = _decode(raw, resp.getheader("Content-Encoding"))
                    req_head = f"GET {target} HTTP/1.1\r\n" + "".join(
                        f"{k}: {v}\r\n" for k, v in request.items()
                    )
                    resp_head = f"HTTP/1.1 {resp.status} {resp.reason}\r\n" + "".join(
                        f"{k}: {v}\r\n" for k, v in resp.getheaders()
                    )
                    warc.write_exchange(
                        url, ip, req_head.encode(), resp_head.encode(), body or b"", time.time()
                    )
                    if target == "/sitemap.xml":
                        assert body is not None
                        sitemap = parse_sitemap(body, url)
                        assert sitemap.kind == "urlset"
                        assert list(sitemap.urls) == [
                            model.page_url(h, i) for i in range(host.pages)
                        ]
                        sitemaps_read += 1
                        continue
                    headers = {k.lower(): v for k, v in resp.getheaders()}
                    if resp.status != 200 or body is None or not is_html(headers["content-type"]):
                        continue
                    page = parse_html(body, url, headers, ParseOptions())
                    i = targets.index(target)
                    plan = model.plan(h, i)
                    expected = [] if plan.nofollow_page else [
                        canonicalize(link.url) for link in plan.links
                        if link.url and not link.nofollow
                    ]  # fmt: skip
                    if i % 5 == 0:
                        expected.insert(0, url)
                    assert [link.url for link in page.links] == expected, url
                    assert page.nofollow == bool(
                        plan.flags & (PageFlag.META_NOFOLLOW | PageFlag.XROBOTS_NOFOLLOW)
                    )
                    pages += 1
            finally:
                conn.close()
        stats = warc.statistics()
    assert pages > 100 and sitemaps_read >= 1
    files = sorted(warc_dir.glob("*.warc.gz"))
    assert len(files) == stats.files >= 2  # rotated
    assert not list(warc_dir.glob("*.open"))
    check = subprocess.run(
        [str(Path(sys.executable).parent / "warcio"), "check", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr

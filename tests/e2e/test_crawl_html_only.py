"""--html-only end to end: the real CLI crawls a site served by a real nginx whose pages link
to three 20 MB PDFs (sparse files, at URLs without an extension, so the extension filter
does not skip them). Each PDF is stopped after its head: the WARC keeps the head and at most
one read buffer, marked truncated; the crawl log says `ok/not-html`; stats.json and the end
summary count the bytes not downloaded; nginx's log shows the transfers cut short, each on a
connection no later request reuses, with the host's delay kept. The HTML pages, a
robots.txt and a sitemap larger than a buffer, and a small text file are read whole.
Without --html-only the PDFs are read up to --max-body."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_real_site import free_port, write_nginx_conf

from gossamer.testweb._nginx import NginxError, find_nginx, run_nginx

BIG = 20 * 1024 * 1024  # each PDF
PDFS = [f"/files/report-{k}" for k in (1, 2, 3)]
BUFFER = 64 * 1024  # CurlFetcher's read buffer (libcurl's BUFFERSIZE)
DELAY = 0.2
TIMEOUT = 120
# nginx's log: method, target, status, body bytes sent, connection number, end time, duration
ACCESS_FORMAT = (
    "$request_method $request_uri $status $body_bytes_sent $connection $msec $request_time"
)


@dataclass(frozen=True, slots=True)
class Site:
    server: Path
    base: str
    docroot: Path
    access_log: Path


@dataclass(frozen=True, slots=True)
class Served:
    method: str
    target: str
    status: int
    body_bytes: int
    connection: int
    start: float
    end: float


def make_site(tmp_path: Path) -> Site:
    """index.html → the three PDFs, about.html, a small text file and a disallowed page; a
    robots.txt of ~100 kB (its rules at the end) naming a sitemap of ~100 kB (its one URL at
    the end), whose page is linked from nowhere else."""
    try:
        find_nginx()
    except NginxError:
        pytest.skip("nginx is not installed")
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    www = tmp_path / "www"
    (www / "files").mkdir(parents=True)
    (www / "private").mkdir()
    links = [*PDFS, "/about.html", "/notes", "/private/secret.html"]
    (www / "index.html").write_text(
        "<!DOCTYPE html><html><body>"
        + "".join(f'<a href="{u}">{u}</a>\n' for u in links)
        + "<p>" + "padding " * 20_000 + "</p></body></html>"  # 160 kB: more than a buffer
    )  # fmt: skip
    (www / "about.html").write_text('<html><body><a href="/">home</a></body></html>')
    (www / "from-sitemap.html").write_text("<html><body>only in the sitemap</body></html>")
    (www / "private" / "secret.html").write_text("<html><body>secret</body></html>")
    (www / "notes").write_text("notes\n" * 300)  # 1.8 kB of text/plain: within a buffer
    for path in PDFS:  # sparse: 20 MB each on the wire, a few kB on disk
        with (www / path.lstrip("/")).open("wb") as f:
            f.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
            f.truncate(BIG)
    (www / "robots.txt").write_text(
        "".join(f"# comment line {k:06d} of a long robots.txt\n" for k in range(2_500))
        + f"User-agent: *\nDisallow: /private\nSitemap: {base}sitemap.xml\n"
    )
    (www / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + "".join(f"<!-- padding {k:06d} of a long sitemap -->\n" for k in range(2_500))
        + f"<url><loc>{base}from-sitemap.html</loc></url>\n</urlset>\n"
    )
    server = tmp_path / "nginx"
    access_log = write_nginx_conf(
        server, www, port, access_format=ACCESS_FORMAT,
        types="text/plain txt; application/xml xml;",
        locations="location /files/ { default_type application/pdf; } "
        "location = /notes { default_type text/plain; }",
    )  # fmt: skip
    return Site(server, base, www, access_log)


def crawl(site: Site, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable, "-m", "gossamer", "crawl", site.base, "-o", str(out),
        "--allow-private", "--delay", str(DELAY), "--sitemaps", "--workers", "1", *extra,
    ]  # fmt: skip
    with run_nginx(site.server):
        r = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return r


def served(site: Site) -> list[Served]:
    line = re.compile(r"^(\S+) (\S+) (\d{3}) (\d+) (\d+) ([\d.]+) ([\d.]+)$")
    out = []
    for text in site.access_log.read_text().splitlines():
        m = line.match(text)
        assert m is not None, f"unexpected access log line {text!r}"
        end, took = float(m.group(6)), float(m.group(7))
        out.append(Served(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)),
                          int(m.group(5)), end - took, end))  # fmt: skip
    site.access_log.write_text("")  # the next crawl's lines alone
    return out


def warc_responses(out: Path) -> dict[str, tuple[dict[str, str], dict[str, str], bytes]]:
    """target path → (WARC headers, HTTP headers, payload as stored) of each response."""
    from warcio.archiveiterator import ArchiveIterator

    found = {}
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response":
                    target = "/" + rec.rec_headers.get_header("WARC-Target-URI").split("/", 3)[3]
                    found[target] = (
                        dict(rec.rec_headers.headers),
                        dict(rec.http_headers.headers),
                        rec.content_stream().read(),
                    )
    return found


def outcomes(out: Path) -> dict[str, str]:
    lines = (out / "crawl.log.jsonl").read_text().splitlines()
    return {"/" + r["url"].split("/", 3)[3]: r["outcome"] for r in map(json.loads, lines)}


def stats(out: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((out / "stats.json").read_text())
    return result


def test_html_only_stops_each_pdf_after_its_head_and_one_buffer(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    out = tmp_path / "crawl"
    r = crawl(site, out)  # --html-only is the default (SPAWC's policy)
    log = served(site)
    records = warc_responses(out)
    whole = ["/", "/about.html", "/notes", "/robots.txt", "/sitemap.xml", "/from-sitemap.html"]
    assert set(records) == {*whole, *PDFS}  # /private/ is disallowed (robots.txt read whole)

    # each PDF: its head and at most one buffer, marked truncated; the log says why
    read = {}
    for path in PDFS:
        warc, http, payload = records[path]
        assert 0 < len(payload) <= BUFFER, f"{len(payload):,} bytes of {path} read"
        assert warc["WARC-Truncated"] == "unspecified" and payload.startswith(b"%PDF-1.4")
        assert http["Content-Type"] == "application/pdf" and http["Content-Length"] == str(BIG)
        read[path] = len(payload)
        assert outcomes(out)[path] == "ok/not-html"
    # everything else whole (robots.txt and the sitemap are more than a buffer too)
    for path in whole:
        warc, _, payload = records[path]
        file = site.docroot / (path.lstrip("/") or "index.html")
        assert "WARC-Truncated" not in warc and payload == file.read_bytes(), path
    assert (site.docroot / "robots.txt").stat().st_size > BUFFER
    assert (site.docroot / "sitemap.xml").stat().st_size > BUFFER
    assert outcomes(out)["/from-sitemap.html"] == "ok"  # the sitemap's last URL

    # statistics: the bytes received are the HTML's and the text's, plus under a buffer a PDF
    s = stats(out)
    pages = ["/", "/about.html", "/notes", "/from-sitemap.html"]
    page_bytes = sum(len(records[p][2]) for p in pages)
    assert s["bytes"] == page_bytes + sum(read.values()) <= page_bytes + 3 * BUFFER
    assert s["not_html"] == {
        "bodies": 3, "bytes_saved": 3 * BIG - sum(read.values()), "unknown_length": 0,
    }  # fmt: skip
    summary = re.search(r"non-HTML bodies not downloaded: 3 \(([\d.]+) MB saved\)", r.stderr)
    assert summary is not None, r.stderr
    assert float(summary.group(1)) == round((3 * BIG - sum(read.values())) / 1e6, 1)

    # nginx: each PDF's transfer cut short, on a connection no later request reuses; the
    # host's delay kept between every two requests, after a stopped transfer too
    for k, entry in enumerate(log):
        if entry.target in PDFS:
            assert entry.status == 200 and entry.body_bytes < BIG, entry
            assert all(later.connection != entry.connection for later in log[k + 1 :])
    starts = sorted(entry.start for entry in log)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= DELAY - 0.005, gaps

    # gossamer report: the same figure, from stats.json
    rep = subprocess.run([sys.executable, "-m", "gossamer", "report", str(out)],
                         capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert rep.returncode == 0, rep.stderr
    assert "not HTML     non-HTML bodies not downloaded: 3 (" in rep.stdout


def test_without_html_only_the_pdfs_are_read_up_to_max_body(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    out = tmp_path / "crawl"
    cap = 8 * 1024 * 1024
    r = crawl(site, out, "--no-html-only", "--max-body", str(cap))
    log = served(site)
    records = warc_responses(out)
    for path in PDFS:
        warc, _, payload = records[path]
        assert warc["WARC-Truncated"] == "length" and len(payload) == cap
        assert outcomes(out)[path] == "ok/truncated"
    assert stats(out)["bytes"] >= 3 * (cap - BUFFER)  # (libcurl counts whole buffers)
    assert stats(out)["not_html"] == {"bodies": 0, "bytes_saved": 0, "unknown_length": 0}
    assert "non-HTML" not in r.stderr
    assert all(e.body_bytes >= cap for e in log if e.target in PDFS)

"""The floor for bench/bench_crawl.py: the least a Python crawler of the simulated web does.

    .venv/bin/python bench/bare_loop.py --seed http://www.h0.example/ \
        --resolve-file export/resolve.txt --concurrency 64 --stats-out bare.json

One process, one thread: pycurl's multi interface (libcurl keeps the connections alive) and
selectolax's link extraction (`<a href>` and `<area href>`), a set of seen URLs and a deque of
URLs per host — no frontier, no robots.txt, no WARC, no crawl log, no graph, no URL
canonicalisation beyond the join's and dropping the fragment. The same shape as the crawlers
it is the floor of: every host of the web (`*.example`), one request in flight per host,
`--concurrency` in all, no delay (every request of the simulated web's hosts share one IP on
the one-IP webs: the concurrency, at most the `per_ip` the others get, is then the limit per IP
too). What it does not do, every crawler must: so gossamer's CPU a page over this one's is the
price of a real crawler, in Python.

`--joins` says how an href becomes a URL: `can_ada` (the default, the fastest form: the page's
URL parsed once by can_ada, each href joined with `base + href` under the WHATWG rules in C++,
scheme and host read from the result) or `urljoin` (`urllib.parse.urljoin`, `urldefrag`,
`urlsplit`: the loop as first written). Everything else is the same work.

`--warc FILE` adds the least an archiving crawler does on top: each HTML page's response and
request records, with the WARC digests a reader checks (block SHA-1 of head and body, payload
SHA-1, the request's block SHA-1), each record its own gzip member (ISA-L level 1, as
gossamer's default), appended to FILE. No WARC-Date, record ids, warcinfo or index: so its CPU
a page is a floor for any crawler that writes WARC, in any language, with these libraries.
"""

from __future__ import annotations

import argparse
import base64
import collections
import hashlib
import json
import sys
import time
from io import BytesIO
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urldefrag, urljoin, urlsplit

import can_ada
import pycurl
from selectolax.lexbor import LexborHTMLParser as HTMLParser

#: how the loop resolves a page's hrefs (`--joins`)
JOINS = ("can_ada", "urljoin")
#: the links it follows: anchors and image-map areas, as gossamer's parser does (the simulated
#: web links some pages from an <area> alone)
LINKS = "a[href], area[href]"


def connect_to(path: Path) -> list[str]:
    """`HOST:PORT:IP:PORT` lines (curl --connect-to syntax, gossamer's resolve file)."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _digest(data: bytes) -> bytes:
    return b"sha1:" + base64.b32encode(hashlib.sha1(data).digest())


def warc_records(url: str, req: bytes, head: bytes, body: bytes) -> tuple[bytes, bytes]:
    """The response and request records of one exchange (uncompressed)."""
    target = url.encode()
    response = (
        b"WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: %b\r\n"
        b"WARC-Payload-Digest: %b\r\nWARC-Block-Digest: %b\r\n"
        b"Content-Type: application/http;msgtype=response\r\nContent-Length: %d\r\n\r\n"
        % (target, _digest(body), _digest(head + body), len(head) + len(body))
    ) + head + body + b"\r\n\r\n"
    request = (
        b"WARC/1.1\r\nWARC-Type: request\r\nWARC-Target-URI: %b\r\nWARC-Block-Digest: %b"
        b"\r\nContent-Type: application/http;msgtype=request\r\nContent-Length: %d\r\n\r\n"
        % (target, _digest(req), len(req))
    ) + req + b"\r\n\r\n"
    return response, request


def crawl(
    seeds: list[str],
    mapping: list[str],
    concurrency: int,
    user_agent: str,
    warc: BinaryIO | None = None,
    joins: str = "can_ada",
) -> dict[str, int]:
    seen: set[str] = set(seeds)
    todo: dict[str, collections.deque[str]] = collections.defaultdict(collections.deque)
    for url in seeds:
        todo[urlsplit(url).hostname or ""].append(url)
    ready = collections.deque(todo)  # hosts with URLs and no request in flight
    busy: set[str] = set()
    multi = pycurl.CurlMulti()
    free = []
    for _ in range(concurrency):
        c = pycurl.Curl()
        c.setopt(pycurl.CONNECT_TO, mapping)
        c.setopt(pycurl.USERAGENT, user_agent)
        c.setopt(pycurl.NOSIGNAL, 1)
        c.setopt(pycurl.TIMEOUT, 30)
        free.append(c)
    pages = requests = 0
    if warc is not None:
        from isal import isal_zlib

        gzip = isal_zlib.compress

    def start() -> None:
        while free and ready:
            host = ready.popleft()
            queue = todo[host]
            if not queue:
                continue
            url = queue.popleft()
            c = free.pop()
            buf = BytesIO()
            c.setopt(pycurl.URL, url)
            c.setopt(pycurl.WRITEDATA, buf)
            heads = None
            if warc is not None:
                heads = BytesIO()
                c.setopt(pycurl.WRITEHEADER, heads)
            c.bench = (url, host, buf, heads)  # type: ignore[attr-defined]
            busy.add(host)
            multi.add_handle(c)

    start()
    while busy:
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        _, ok, failed = multi.info_read()
        for c in ok + [f[0] for f in failed]:
            multi.remove_handle(c)
            url, host, buf, heads = c.bench  # type: ignore[attr-defined]
            requests += 1
            status = c.getinfo(pycurl.RESPONSE_CODE)
            ctype = c.getinfo(pycurl.CONTENT_TYPE) or ""
            free.append(c)
            busy.discard(host)
            if status == 200 and ctype.startswith("text/html"):
                pages += 1
                body = buf.getvalue()
                if warc is not None and heads is not None:
                    path = url.split("/", 3)[3] if url.count("/") >= 3 else ""
                    req = b"GET /%b HTTP/1.1\r\nHost: %b\r\nUser-Agent: %b\r\n\r\n" % (
                        path.encode(), host.encode(), user_agent.encode()
                    )
                    response, request = warc_records(url, req, heads.getvalue(), body)
                    warc.write(gzip(response, 1, 31) + gzip(request, 1, 31))
                if joins == "can_ada":
                    # WHATWG parsing in C++: the page's URL parsed once, each href joined to it
                    base = can_ada.parse(url)
                    for node in HTMLParser(body).css(LINKS):
                        href = node.attributes.get("href")
                        if not href:
                            continue
                        try:
                            u = base + href
                        except ValueError:
                            continue
                        if u.protocol not in ("http:", "https:"):
                            continue
                        link = u.href
                        if "#" in link:
                            link = link[: link.index("#")]
                        if link in seen:
                            continue
                        lhost = u.hostname
                        if not lhost.endswith(".example"):
                            continue
                        seen.add(link)
                        if not todo[lhost] and lhost not in busy:
                            ready.append(lhost)
                        todo[lhost].append(link)
                else:
                    for node in HTMLParser(body).css(LINKS):
                        href = node.attributes.get("href")
                        if not href:
                            continue
                        link = urldefrag(urljoin(url, href))[0]
                        if link in seen or not link.startswith(("http://", "https://")):
                            continue
                        lhost = urlsplit(link).hostname or ""
                        if not lhost.endswith(".example"):
                            continue
                        seen.add(link)
                        if not todo[lhost] and lhost not in busy:
                            ready.append(lhost)
                        todo[lhost].append(link)
            if todo[host]:
                ready.append(host)
        start()
        if busy:
            multi.select(1.0)
    return {"pages": pages, "requests": requests, "seen": len(seen)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", action="append", required=True)
    p.add_argument("--resolve-file", type=Path, required=True)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--user-agent", default="bare-loop/1.0")
    p.add_argument("--stats-out", type=Path, required=True)
    p.add_argument("--warc", type=Path, help="also write each page's WARC records here")
    p.add_argument(
        "--joins",
        choices=JOINS,
        default="can_ada",
        help="how hrefs are resolved: can_ada (the page's URL parsed once, `base + href`; the "
        "faster) or urljoin (urllib.parse.urljoin + urldefrag + urlsplit)",
    )
    args = p.parse_args(argv)
    began = time.monotonic()
    mapping = connect_to(args.resolve_file)
    if args.warc is None:
        stats = crawl(args.seed, mapping, args.concurrency, args.user_agent, joins=args.joins)
    else:
        with args.warc.open("wb") as warc:
            stats = crawl(
                args.seed, mapping, args.concurrency, args.user_agent, warc, joins=args.joins
            )
    out = {"elapsed_s": time.monotonic() - began, "joins": args.joins, **stats}
    args.stats_out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

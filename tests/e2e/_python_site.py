"""A static site of N pages served by nginx on 127.0.0.1 for the Python API's end-to-end
tests: `/` links to p1.html … p{N-1}.html, each of those back to `/` (and, for a few, to a
missing page), every page with a title and a description."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from test_real_site import free_port, write_nginx_conf

from gossamer.testweb._nginx import NginxError, find_nginx


@dataclass(frozen=True, slots=True)
class Site:
    server: Path  # nginx's directory (`run_nginx(server)`)
    base: str  # http://127.0.0.1:PORT/
    access_log: Path  # "METHOD TARGET STATUS" a line

    def requests(self, since: int = 0) -> list[tuple[str, int]]:
        """(target, status) of every request logged from line `since` on."""
        if not self.access_log.exists():
            return []
        lines = self.access_log.read_text().splitlines()[since:]
        return [(target, int(status)) for _, target, status in map(str.split, lines)]

    def log_length(self) -> int:
        return len(self.access_log.read_text().splitlines()) if self.access_log.exists() else 0

    def pages(self, since: int = 0) -> list[str]:
        """The page targets requested from line `since` on (robots.txt left out), sorted."""
        return sorted(t for t, _ in self.requests(since) if t != "/robots.txt")


def python_site(tmp_path: Path, pages: int, *, broken: int = 0) -> Site:
    """`pages` pages (`/` and p1.html …); the first `broken` p-pages also link to a missing
    page (`/gone-K.html`, a 404). Skips the test when nginx is not installed."""
    try:
        find_nginx()
    except NginxError:
        pytest.skip("nginx is not installed")
    docroot = tmp_path / "www"
    docroot.mkdir()
    names = [f"p{k}.html" for k in range(1, pages)]
    links = "".join(f'<li><a href="{n}">{n}</a></li>' for n in names)
    (docroot / "index.html").write_text(
        "<!doctype html><html><head><title>Home</title>"
        '<meta name="description" content="the home page"></head>'
        f"<body><h1>Home</h1><ul>{links}</ul></body></html>"
    )
    for k, n in enumerate(names, start=1):
        gone = f'<a href="/gone-{k}.html">gone</a>' if k <= broken else ""
        (docroot / n).write_text(
            f"<!doctype html><html><head><title>Page {k}</title>"
            f'<meta name="description" content="page number {k}"></head>'
            f'<body><p class="price">{k}.99</p><a href="/">home</a>{gone}</body></html>'
        )
    port = free_port()
    access_log = write_nginx_conf(tmp_path / "nginx", docroot, port)
    return Site(tmp_path / "nginx", f"http://127.0.0.1:{port}/", access_log)

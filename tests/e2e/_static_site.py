"""A small static site served by nginx on 127.0.0.1, for the end-to-end tests that need a
real server at a real address (the helpers of test_real_site.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from test_real_site import free_port, write_nginx_conf

from gossamer.testweb._nginx import NginxError, find_nginx


@dataclass(frozen=True, slots=True)
class StaticSite:
    server: Path  # nginx's directory (`run_nginx(server)`)
    base: str  # http://127.0.0.1:PORT/
    access_log: Path  # "METHOD TARGET STATUS" a line


#: the body of every page of a site's identical group (`static_site(…, identical=N)`): the
#: same bytes under each URL, above the size a revisit record is written for
IDENTICAL_BODY = (
    "<html><head><title>the same page</title></head><body><a href=\"index.html\">home</a>"
    + "<p>These bytes are served under many URLs.</p>" * 40
    + "</body></html>"
)


def static_site(tmp_path: Path, pages: int, *, identical: int = 0) -> StaticSite:
    """`pages` pages on one host: index.html linking to p1.html … and each of those back to
    index.html (skips the test when nginx is not installed); with `identical`, index.html
    links that many more, d1.html …, whose bodies are byte-identical (IDENTICAL_BODY)."""
    try:
        find_nginx()
    except NginxError:
        pytest.skip("nginx is not installed")
    docroot = tmp_path / "www"
    docroot.mkdir()
    names = [f"p{k}.html" for k in range(1, pages)]
    same = [f"d{k}.html" for k in range(1, identical + 1)]
    (docroot / "index.html").write_text(
        "<html><body>"
        + "".join(f'<a href="{n}">{n}</a>' for n in names + same)
        + "</body></html>"
    )
    for n in names:
        (docroot / n).write_text(f'<html><body><a href="index.html">home</a> {n}</body></html>')
    for n in same:
        (docroot / n).write_text(IDENTICAL_BODY)
    port = free_port()
    access_log = write_nginx_conf(tmp_path / "nginx", docroot, port)
    return StaticSite(tmp_path / "nginx", f"http://127.0.0.1:{port}/", access_log)

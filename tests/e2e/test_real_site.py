"""A real static site on a real web server, crawled exactly as a user types it.

The test builds a small site in tmp_path — HTML pages linking relatively (`../a/b.html`,
`./x.html`, `sub/`), directories served by their `index.html`, a directory linked without its
slash (nginx answers 301), broken links (404), a file name with a space, a query string, links
to another port and another host, and non-HTML files (.pdf, .png, .css) — serves it with nginx
on 127.0.0.1:<free port>, and runs the installed `gossamer` command in a subprocess with the
flags a user would type: `gossamer crawl http://127.0.0.1:PORT/ -o DIR --allow-private`
(no `--scope`, `--allow`, `--resolve`, nor `--delay`). The site at the root is crawled exactly
so, with the default 1 s between requests (~15 s); the site under /manual/ with
GOSSAMER_DELAY=0.05 in the environment (~2 s), since nothing here depends on the delay (what is
fetched, once, and what is kept are the same at any delay).

What the site's own description says (resolved with the standard library's `urljoin`, not
with gossamer's resolver) is then compared with what the crawl did:
- nginx's access log: every URL reachable from the seed requested exactly once, robots.txt,
  and nothing else (no other path, no non-HTML file, no second request for any page);
- the crawl log: the same URLs, the broken links with status 404, the directory link 301;
- the link graph (DIR/graph/, every worker's part): exactly the site's links between URLs of
  the site that the crawl keeps (not the .pdf/.png links the type filter drops, not the links
  to another port or host), plus the 301's redirect edge.

On the code before the host-key fix, the seed's host was kept without its port while every
link was checked with it: the crawl fetched the seed alone and dropped every link as
`scope/out-of-scope`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import pytest

from gossamer.sinks.crawllog import read_crawl_log
from gossamer.sinks.graph import read_graph
from gossamer.testweb._nginx import find_nginx, run_nginx

pytestmark = pytest.mark.slow

#: HTML files of the site, path → the hrefs of its `<a>` links. `{root}` is the site's path on
#: the server ('/' or '/manual/'), for root-relative links. Every page also loads style.css
#: and an image, which are not links (a crawler must not fetch them).
PAGES: dict[str, list[str]] = {
    "index.html": [
        "guide/",
        "./about.html",
        "blog/2024/post-1.html",
        "files/manual.pdf",
        "img/logo.png",
        "missing.html",
        "http://127.0.0.1:{other_port}/elsewhere.html",
        "http://external.invalid/",
        "#top",
        "mailto:someone@example.org",
    ],
    "about.html": ["index.html", "{root}guide/install.html", "about.html?lang=en", "style.css"],
    "guide/index.html": [
        "../about.html",
        "./install.html",
        "install.html#step-2",
        "chapter%201.html",
        "../blog/",
        "../guide",
    ],
    "guide/install.html": ["./", "../../about.html", "missing-page.html", "../img/logo.png"],
    "guide/chapter 1.html": ["install.html", "../blog/2024/post-1.html"],
    "blog/index.html": ["2024/post-1.html", "2024/post-2.html", "../"],
    "blog/2024/post-1.html": ["post-2.html", "../../guide/", "../../nowhere/", "{root}"],
    "blog/2024/post-2.html": ["./post-1.html", "../../files/manual.pdf", "../index.html"],
}
#: Files that are not HTML (the crawl's default type filter skips links to them).
OTHER_FILES: dict[str, bytes] = {
    "files/manual.pdf": b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n",
    "img/logo.png": bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    ),
    "style.css": b"body { font-family: serif }\n",
}
#: Beside a site under /manual/: pages of the same server that the site does not link to.
OUTSIDE: dict[str, str] = {
    "index.html": "<html><body><a href='private/'>private</a></body></html>",
    "private/index.html": "<html><body>not linked from the manual</body></html>",
}

NON_HTML = (".pdf", ".png", ".css")


@dataclass(frozen=True)
class Site:
    """The site as built, and what nginx answers for a URL of it (`answer`)."""

    base: str  # http://127.0.0.1:PORT/ or http://127.0.0.1:PORT/manual/
    seed: str
    docroot: Path
    hrefs: dict[str, list[str]]  # file under docroot → hrefs of its <a> links

    def answer(self, url: str) -> tuple[int, list[str]]:
        """(status, targets) nginx gives for `url` of this server: 200 and the page's links
        (resolved against `url`, no fragment) for a file or a directory URL with its
        index.html, 301 and the Location for a directory without its slash, 404 else."""
        path = unquote(urlsplit(url).path)
        local = self.docroot / path.lstrip("/")
        if local.is_dir():
            if not (local / "index.html").is_file():
                return 404, []
            if not path.endswith("/"):
                return 301, [urlsplit(url)._replace(path=urlsplit(url).path + "/").geturl()]
            local = local / "index.html"
        if not local.is_file():
            return 404, []
        rel = local.relative_to(self.docroot).as_posix()
        hrefs = [h for h in self.hrefs.get(rel, []) if not h.startswith("mailto:")]
        return 200, [urldefrag(urljoin(url, h)).url for h in hrefs]

    def reachable(self) -> dict[str, tuple[int, list[str]]]:
        """Every URL a crawl from the seed requests (breadth first), with nginx's answer:
        pages, redirects and broken links; not non-HTML files, not other hosts or ports."""
        origin = _origin(self.seed)
        found = {self.seed: self.answer(self.seed)}
        queue = deque([self.seed])
        while queue:
            for t in found[queue.popleft()][1]:
                if _origin(t) == origin and not _non_html(t) and t not in found:
                    found[t] = self.answer(t)
                    queue.append(t)
        return found

    def edges(self) -> set[tuple[str, str, str]]:
        """(source, target, kind) of every link between crawled URLs, as the graph keeps them:
        no self-links, no links the crawl drops (non-HTML, other host or port)."""
        reached = self.reachable()
        out = set()
        for src, (status, targets) in reached.items():
            kind = "redirect" if status == 301 else "link"
            out |= {(src, t, kind) for t in targets if t != src and t in reached}
        return out


    def dropped(self) -> Counter[str]:
        """What the crawl's link routing counts as dropped: per fetched page, each distinct
        link target (not the page itself) to a non-HTML file or to another host or port."""
        origin = _origin(self.seed)
        out: Counter[str] = Counter()
        for src, (status, targets) in self.reachable().items():
            if status != 200:
                continue
            for t in set(targets) - {src}:
                if _origin(t) != origin:
                    out["scope/out-of-scope"] += 1
                elif _non_html(t):
                    out["scope/non-html"] += 1
        return out


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def _non_html(url: str) -> bool:
    return urlsplit(url).path.lower().endswith(NON_HTML)


def _page_html(title: str, hrefs: list[str], depth: int) -> str:
    up = "../" * depth
    anchors = "\n".join(f'  <li><a href="{h}">link {i}</a></li>' for i, h in enumerate(hrefs))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{title}</title>
  <link rel="stylesheet" href="{up}style.css">
</head>
<body id="top">
  <h1>{title}</h1>
  <img src="{up}img/logo.png" alt="logo">
  <ul>
{anchors}
  </ul>
</body>
</html>
"""


def build_site(docroot: Path, prefix: str, port: int, other_port: int) -> Site:
    """Write the site under `docroot`/`prefix` ('' or 'manual/'), and beside it, for a site
    under a path, pages of the same server the site does not link to."""
    hrefs: dict[str, list[str]] = {}
    for rel, template in PAGES.items():
        filled = [h.format(root=f"/{prefix}", other_port=other_port) for h in template]
        path = docroot / prefix / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_page_html(rel, filled, rel.count("/")), encoding="utf-8")
        hrefs[prefix + rel] = filled
    for rel, data in OTHER_FILES.items():
        path = docroot / prefix / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if prefix:
        for rel, text in OUTSIDE.items():
            path = docroot / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    base = f"http://127.0.0.1:{port}/{prefix}"
    # a site under a path is typed as its index page, as in the report
    seed = base + ("index.html" if prefix else "")
    return Site(base=base, seed=seed, docroot=docroot, hrefs=hrefs)


# ------------------------------------------------------------------ nginx
ACCESS_FORMAT = "$request_method $request_uri $status"


def write_nginx_conf(
    server_dir: Path,
    docroot: Path,
    port: int | Sequence[int],
    *,
    access_format: str = ACCESS_FORMAT,
    types: str = "",
    locations: str = "",
) -> Path:
    """nginx.conf (and the export.json `run_nginx` reads) in `server_dir`: serve `docroot` on
    127.0.0.1:`port` (or on each of several ports, the same files), directory URLs by their
    index.html, everything nginx writes inside `server_dir`; returns the access log's path.
    `types` (`text/plain txt;`) and `locations` (`location /f/ { … }`) are added to the types
    and server blocks."""
    (server_dir / "logs").mkdir(parents=True)
    (server_dir / "tmp").mkdir()
    access_log = server_dir / "logs" / "access.log"
    user = "user root;\n" if os.geteuid() == 0 else ""
    ports = [port] if isinstance(port, int) else list(port)
    listens = "".join(f"        listen 127.0.0.1:{p};\n" for p in ports)
    (server_dir / "nginx.conf").write_text(f"""\
{user}worker_processes 1;
pid {server_dir}/nginx.pid;
error_log {server_dir}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    types {{
        text/html html;
        text/css css;
        image/png png;
        application/pdf pdf;
        {types}
    }}
    default_type application/octet-stream;
    client_body_temp_path {server_dir}/tmp/body;
    proxy_temp_path {server_dir}/tmp/proxy;
    fastcgi_temp_path {server_dir}/tmp/fastcgi;
    uwsgi_temp_path {server_dir}/tmp/uwsgi;
    scgi_temp_path {server_dir}/tmp/scgi;
    log_format site '{access_format}';
    access_log {access_log} site;
    server {{
{listens}        server_name _;
        root {docroot};
        index index.html;
        {locations}
    }}
}}
""")
    (server_dir / "export.json").write_text(
        json.dumps({"port": ports[0], "access_log": str(access_log)})
    )
    return access_log


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def installed_gossamer() -> str:
    """The `gossamer` command the package installs (beside this Python)."""
    command = shutil.which("gossamer", path=str(Path(sys.executable).parent))
    assert command is not None, f"no gossamer command beside {sys.executable}"
    return command


def read_access_log(path: Path) -> Counter[tuple[str, str, int]]:
    line = re.compile(r"^(\S+) (\S+) (\d{3})$")
    out: Counter[tuple[str, str, int]] = Counter()
    for text in path.read_text().splitlines():
        m = line.match(text)
        assert m is not None, f"unexpected access log line {text!r}"
        out[(m.group(1), m.group(2), int(m.group(3)))] += 1
    return out


def _path_query(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


@pytest.mark.parametrize(
    ("prefix", "counts"),
    [
        ("", (15, 1, 3)),
        # under a path, `../../about.html` of guide/install.html leaves the manual for the
        # server's /about.html (absent: a fourth 404); the default --scope host follows it
        ("manual/", (16, 1, 4)),
    ],
    ids=["site-at-root", "site-under-manual"],
)
def test_crawl_a_real_site_as_a_user_types_it(
    tmp_path: Path, prefix: str, counts: tuple[int, int, int]
) -> None:
    find_nginx()
    port, other_port = free_port(), free_port()
    docroot = tmp_path / "www"
    site = build_site(docroot, prefix, port, other_port)
    expected = site.reachable()
    broken = {u for u, (status, _) in expected.items() if status == 404}
    redirects = {u for u, (status, _) in expected.items() if status == 301}
    # the site is what the test means it to be: a dozen pages, a redirect, broken links
    assert (len(expected), len(redirects), len(broken)) == counts, sorted(expected)
    server_dir = tmp_path / "nginx"
    access_log = write_nginx_conf(server_dir, docroot, port)
    out = tmp_path / "crawl"

    with run_nginx(server_dir):
        done = subprocess.run(
            [installed_gossamer(), "crawl", site.seed, "-o", str(out), "--allow-private"],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
            cwd=tmp_path,
            env={**os.environ, "GOSSAMER_DELAY": "0.05"} if prefix else None,
        )
    assert done.returncode == 0, done.stderr[-3000:]

    # nginx: every URL once, robots.txt, nothing else (run_nginx stopped nginx gracefully, so
    # its log is complete)
    requests = read_access_log(access_log)
    assert {m for m, _, _ in requests} == {"GET"}
    by_target = Counter({target: n for (_, target, _), n in requests.items()})
    robots = by_target.pop("/robots.txt", 0)
    assert robots == 1  # once per crawl, whatever the workers (the shared robots store)
    assert by_target == Counter(_path_query(u) for u in expected), done.stderr[-3000:]
    answered = {target: status for (_, target, status) in requests}
    assert answered == {_path_query(u): s for u, (s, _) in expected.items()} | {"/robots.txt": 404}

    # the crawl log: the same URLs, the broken links as 404, nothing from another host or port
    records = [
        r for p in sorted(out.glob("crawl*.log.jsonl")) for r in read_crawl_log(p, strict=True)
    ]
    robots_url = f"http://127.0.0.1:{port}/robots.txt"
    assert {r["url"] for r in records if r["url"].endswith("/robots.txt")} == {robots_url}
    fetched = Counter(r["url"] for r in records if r["url"] != robots_url)
    assert fetched == Counter(list(expected))
    status_of = {r["url"]: r["status"] for r in records}
    assert {u for u, s in status_of.items() if s == 404} == broken | {robots_url}
    assert {u for u, s in status_of.items() if s == 301} == redirects
    outcomes = {r["outcome"] for r in records if r["url"] in broken}
    assert outcomes == {"fetch/status/404"}

    # the links the crawl left out, counted under their reasons
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finished"] is True
    dropped = Counter(
        {k: v for k, v in stats["dropped"].items() if k in ("scope/non-html", "scope/out-of-scope")}
    )
    assert dropped == site.dropped()

    # the link graph: exactly the site's links between the URLs the crawl keeps
    graph = read_graph(out)
    got = {(graph.nodes[s], graph.nodes[d], kind) for s, d, kind in graph.edges}
    assert got == site.edges()

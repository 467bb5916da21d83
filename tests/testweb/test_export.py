"""`gossamer testweb export`: static files plus an nginx config that answer as the model does.

The files are compared with `respond()` directly, then a real nginx serves the export and a
plain HTTP client checks status, Content-Type and body of a sample of URLs against the model.
"""

from __future__ import annotations

import http.client
import json
import random
import subprocess
from pathlib import Path

import pytest

from gossamer.cli import main
from gossamer.testweb import HostFlag, WebModel, WebSpec
from gossamer.testweb._content import respond
from gossamer.testweb._export import ExportRefused, export_web
from gossamer.testweb._nginx import NginxError, check_config, find_nginx, run_nginx

# A clean web plus every switch an export reproduces statically.
STATIC = WebSpec(
    seed=34,
    hosts=24,
    pages_mean=20,
    overrides=(
        ("robots_disallow", 0.4),
        ("robots_agent_block", 0.2),
        ("robots_crawl_delay", 0.3),
        ("robots_sitemap", 0.5),
        ("robots_404", 0.3),
        ("charset_host", 0.5),
        ("invalid_utf8", 0.1),
        ("malformed_html", 0.2),
        ("base_href", 0.1),
        ("meta_robots", 0.1),
        ("nofollow_link", 0.1),
        ("link_forms", 0.6),
        ("junk_link", 0.05),
    ),
)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def model() -> WebModel:
    m = WebModel(STATIC)
    assert any(h.flags & HostFlag.SITEMAP and m.sitemap_parts(h.id) for h in m.hosts)
    assert any(m.robots_status(h.id) == "404" for h in m.hosts)
    assert any(h.charset != "utf-8" for h in m.hosts)
    return m


@pytest.fixture(scope="module")
def exported(model: WebModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export")
    summary = export_web(model, out, port=free_port(), workers=1)
    assert summary.pages == model.total_pages
    assert summary.skipped == {} and summary.degraded == {}
    return out


def all_urls(model: WebModel) -> list[tuple[int, str]]:
    """(host, target) of every resource a clean web serves with 200."""
    out = []
    for h in model.hosts:
        out += [(h.id, model.page_target(h.id, i)) for i in range(h.pages)]
        out.append((h.id, "/robots.txt"))
        if h.flags & HostFlag.SITEMAP:
            out.append((h.id, "/sitemap.xml"))
            out += [(h.id, f"/sitemap-{k}.xml.gz") for k in range(model.sitemap_parts(h.id))]
    return out


def test_files_are_byte_identical_to_respond(model: WebModel, exported: Path) -> None:
    written = {p for p in (exported / "sites").rglob("*") if p.is_file()}
    expected = set()
    for h, target in all_urls(model):
        resp = respond(model, model.resolve(h, target))
        name = model.hosts[h].name
        path = exported / "sites" / name / ("index.html" if target == "/" else target[1:])
        if resp.status == 404:  # robots.txt of a 404 host: no file, nginx answers 404
            assert not path.exists()
            continue
        assert resp.status == 200
        assert path.read_bytes() == resp.body, f"{name}{target}"
        expected.add(path)
    assert written == expected


def test_side_files(model: WebModel, exported: Path) -> None:
    manifest = json.loads((exported / "export.json").read_text())
    port = manifest["port"]
    assert WebSpec.from_json((exported / "web.json").read_text()) == STATIC
    resolve = (exported / "resolve.txt").read_text().splitlines()
    assert resolve == [f"{h.name}:80:{h.ip}:{port}" for h in model.hosts]
    hosts = (exported / "hosts.txt").read_text().splitlines()
    assert hosts == [f"{h.ip} {h.name}" for h in model.hosts]
    conf = (exported / "nginx.conf").read_text()
    for ip in ["127.0.0.1", *model.ips()]:
        assert f"listen {ip}:{port} " in conf
    assert "keepalive_requests 100000;" in conf
    assert f"access_log {exported}/logs/access.log gossamer;" in conf


def test_nginx_accepts_the_config(exported: Path) -> None:
    report = check_config(exported)
    assert "test is successful" in report
    assert "[warn]" not in report and "[alert]" not in report, report


def get(conn: http.client.HTTPConnection, host: str, target: str) -> tuple[int, str, bytes]:
    conn.request("GET", target, headers={"Host": host, "User-Agent": "export-test/1"})
    r = conn.getresponse()
    return r.status, r.getheader("Content-Type", ""), r.read()


def test_nginx_answers_as_the_model(model: WebModel, exported: Path) -> None:
    rng = random.Random(1)
    urls = all_urls(model)
    sample = rng.sample(urls, 150)
    # every host's robots.txt (200 or 404), every sitemap, and some URLs that do not exist
    sample += [(h.id, "/robots.txt") for h in model.hosts]
    sample += [u for u in urls if "sitemap" in u[1]]
    sample += [(0, t) for t in ("/news/", "/news", "/nope.html", "/sitemap-99.xml.gz", "/x.txt")]
    sample += [(0, "/news/page-999999.html"), (1, "/?q=1"), (1, "/robots.txt?x=1")]
    with run_nginx(exported) as ng:
        ips = [h.ip for h in model.hosts]
        conns = {ip: http.client.HTTPConnection(ip, ng.port, timeout=10) for ip in set(ips)}
        try:
            for h, target in sample:
                name = model.hosts[h].name
                want = respond(model, model.resolve(h, target))
                status, ctype, body = get(conns[ips[h]], name.upper(), target)
                assert status == want.status, f"{name}{target}"
                assert body == want.body, f"{name}{target}"
                assert ctype == dict(want.headers)["Content-Type"], f"{name}{target}"
            # an unknown host is a 404, like an unknown page
            status, _, body = get(conns[ips[0]], "www.unknown.example", "/")
            assert (status, body) == (404, b"<html><body>Not Found</body></html>\n")
        finally:
            for c in conns.values():
                c.close()
        assert ng.access_log is not None
    # the access log, flushed on nginx's graceful stop: one line per request, 12 fields
    lines = ng.access_log.read_text().splitlines()
    assert len(lines) == len(sample) + 1
    first = lines[0].split("\t")
    assert len(first) == 12
    h, target = sample[0]
    assert first[3] == model.hosts[h].ip
    assert first[4:7] == [model.hosts[h].name, "GET", target]
    assert first[9] == "export-test/1"


def test_refuses_a_web_that_needs_a_live_server(tmp_path: Path) -> None:
    model = WebModel(WebSpec(seed=2, hosts=10, pages_mean=5, profile="realistic"))
    with pytest.raises(ExportRefused, match=r"latency_ms=20.*--force") as info:
        export_web(model, tmp_path / "out", port=8080)
    assert "conditional_host=0.7" in str(info.value)
    assert "charset_host" not in str(info.value)  # exportable switches are not listed
    assert not (tmp_path / "out").exists()


def test_force_skips_what_nginx_cannot_serve(tmp_path: Path) -> None:
    model = WebModel(
        WebSpec(
            seed=3,
            hosts=30,
            pages_mean=20,
            profile="clean",
            overrides=(
                ("error_500", 0.1),
                ("query_url_host", 0.3),
                ("conditional_host", 0.5),
                ("redirect_link", 0.05),
            ),
        )
    )
    summary = export_web(model, tmp_path, port=8080, force=True)
    errors = [
        (h.id, i)
        for h in model.hosts
        if not h.flags & HostFlag.QUERY_URLS
        for i in range(h.pages)
        if model.plan(h.id, i).flags & 1
    ]
    query_pages = sum(h.pages - 1 for h in model.hosts if h.flags & HostFlag.QUERY_URLS)
    assert errors and query_pages
    assert summary.skipped == {
        "page answers 500": len(errors),
        "query-string page URL": query_pages,
    }
    conditional = sum(1 for h in model.hosts if h.flags & HostFlag.CONDITIONAL)
    redirects = sum(
        1
        for h in model.hosts
        for i in range(h.pages)
        if (i == 0 or not h.flags & HostFlag.QUERY_URLS) and not model.plan(h.id, i).flags & 1
        for link in model.plan(h.id, i).links
        if "/go/" in link.url
    )
    assert redirects
    assert summary.degraded == {
        "ETag/Last-Modified/304 not served (hosts)": conditional,
        "redirect links answer 404 (links)": redirects,
    }
    assert summary.pages == model.total_pages - len(errors) - query_pages
    h, i = errors[0]
    assert not (tmp_path / "sites" / model.hosts[h].name / model.page_target(h, i)[1:]).exists()


def files_under(root: Path) -> dict[Path, Path]:
    return {p.relative_to(root): p for p in root.rglob("*") if p.is_file()}


def test_parallel_export_writes_the_same_files(
    model: WebModel, exported: Path, tmp_path: Path
) -> None:
    summary = export_web(model, tmp_path, port=8080, jobs=2)
    assert summary.pages == model.total_pages
    mine = files_under(tmp_path / "sites")
    theirs = files_under(exported / "sites")
    assert mine.keys() == theirs.keys()
    assert all(mine[k].read_bytes() == theirs[k].read_bytes() for k in mine)


def test_out_dir_must_be_empty_or_an_export(model: WebModel, tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not empty"):
        export_web(model, tmp_path, port=8080)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_re_export_replaces_the_old_one(tmp_path: Path) -> None:
    big = WebModel(WebSpec(seed=9, hosts=6, pages_mean=10))
    small = WebModel(WebSpec(seed=9, hosts=2, pages_mean=10))
    export_web(big, tmp_path, port=8080)
    (tmp_path / "logs" / "access.log").write_text("old\n")
    export_web(small, tmp_path, port=8080)
    assert {p.name for p in (tmp_path / "sites").iterdir()} == {h.name for h in small.hosts}
    assert not (tmp_path / "logs" / "access.log").exists()


def test_run_nginx_reports_a_port_in_use(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        export_web(WebModel(WebSpec(hosts=2)), tmp_path, port=busy.getsockname()[1])
        with pytest.raises(NginxError, match="exited"), run_nginx(tmp_path):
            pass


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "web"
    code = main(
        ["testweb", "export", str(out), "--hosts", "3", "--pages-mean", "5", "--port", "18999"]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "pages/s" in text
    assert f"-c {out}/nginx.conf -p {out}/ -g 'daemon off;'" in text
    assert (out / "nginx.conf").exists()
    assert "listen 127.0.0.1:18999 " in (out / "nginx.conf").read_text()
    code = main(["testweb", "export", str(tmp_path / "a"), "--hosts", "3", "--no-access-log"])
    assert code == 0
    assert "access_log off;" in (tmp_path / "a" / "nginx.conf").read_text()


def test_cli_refuses_realistic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["testweb", "export", str(tmp_path), "--hosts", "3", "--profile", "realistic"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "cannot reproduce" in err and "--force" in err


def test_nginx_binary_is_installed() -> None:
    version = subprocess.run([find_nginx(), "-v"], capture_output=True, text=True, check=True)
    assert "nginx" in version.stderr

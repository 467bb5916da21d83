"""`-H/--header` and `--proxy` end to end: the real CLI against the simulated web, behind a
real nginx (whose access log records the custom headers) or through a real forward proxy
(tinyproxy, a Debian package scripts/setup.sh installs) on loopback."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gossamer.testweb import WebModel, WebSpec, serve_in_thread
from gossamer.testweb._export import export_web
from gossamer.testweb._nginx import run_nginx

USER_AGENT = "gossamer-test/0.1"
PROXY_USER, PROXY_PASSWORD = "crawler", "pr0xy-s3cret"
HEADERS = ("From: crawler-ops@example.org", "X-Crawl-Id: issue-16")
TIMEOUT = 120  # seconds a CLI run may take at most (a few seconds here)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gossamer(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )


def crawl_args(seed: str, out: Path, resolve_file: Path, *extra: str) -> list[str]:
    """A fast crawl of the simulated web from the command line (as _crawl_helpers does)."""
    return [
        "crawl", seed, "-o", str(out), "--scope", "all", "--resolve-file", str(resolve_file),
        "--allow-private", "--delay", "0", "--user-agent", USER_AGENT, "--workers", "1",
        "--concurrency", "16", "-q", *extra,
    ]  # fmt: skip


def audit_coverage(web_log: Path, out: Path) -> dict[str, Any]:
    """`gossamer testweb audit` of the crawl in `out` from the simulated web's log."""
    r = gossamer("testweb", "audit", "--log", str(web_log), "--crawl", str(out), "--json", "-")
    assert r.returncode == 0, r.stderr
    report: dict[str, Any] = json.loads(r.stdout)
    return report


def warc_request_heads(out: Path) -> dict[str, bytes]:
    """WARC-Target-URI → the request record's head, as recorded."""
    from warcio.archiveiterator import ArchiveIterator

    heads = {}
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f, no_record_parse=True):  # the block as stored
                if rec.rec_type == "request":
                    heads[rec.rec_headers.get_header("WARC-Target-URI")] = rec.raw_stream.read()
    return heads


def warc_response_heads(out: Path) -> list[bytes]:
    """The HTTP head of every WARC response record, as stored."""
    from warcio.archiveiterator import ArchiveIterator

    heads = []
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f, no_record_parse=True):
                if rec.rec_type == "response":
                    block = rec.raw_stream.read()
                    heads.append(block[: block.find(b"\r\n\r\n") + 4])
    return heads


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any proxy variable (and GOSSAMER_*), plus `extra`."""
    proxy_vars = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in proxy_vars and not k.startswith("GOSSAMER_")
    }
    env.update(extra)
    return env


# ------------------------------------------------------------------ tinyproxy
@dataclass
class Tinyproxy:
    port: int
    log: Path

    def connects(self) -> list[str]:
        """The HOST:PORT of every CONNECT the proxy was asked for, in order."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return re.findall(r"Request \(file descriptor \d+\): CONNECT (\S+) HTTP/1\.1", text)


@contextmanager
def tinyproxy(tmp: Path, *, auth: bool = True) -> Iterator[Tinyproxy]:
    """A real forward proxy on 127.0.0.1 (foreground, its own config and log), stopped on
    exit. With `auth` it asks for PROXY_USER / PROXY_PASSWORD (HTTP Basic)."""
    binary = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
    if not Path(binary).is_file():
        pytest.fail("tinyproxy is not installed: run ./scripts/setup.sh (it installs it)")
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = tmp / "tinyproxy.log"
    conf = tmp / "tinyproxy.conf"
    lines = [
        f"Port {port}",
        "Listen 127.0.0.1",
        "Timeout 30",
        "MaxClients 200",
        "Allow 127.0.0.1",
        "LogLevel Connect",
        f'LogFile "{log}"',
        f'PidFile "{tmp / "tinyproxy.pid"}"',
    ]
    if auth:
        lines.append(f"BasicAuth {PROXY_USER} {PROXY_PASSWORD}")
    conf.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(
        [binary, "-d", "-c", str(conf)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:  # until it accepts connections
            if proc.poll() is not None:
                pytest.fail(f"tinyproxy exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("tinyproxy did not listen within 15 s")
                time.sleep(0.02)
        yield Tinyproxy(port, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def no_file_has(root: Path, secret: str, *, except_names: tuple[str, ...] = ()) -> None:
    for path in root.rglob("*"):
        if path.is_file() and path.name not in except_names:
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            assert secret.encode() not in data, path


# ------------------------------------------------------------------ the tests
@pytest.mark.slow
def test_crawl_through_a_real_proxy_reaches_every_page(tmp_path: Path) -> None:
    spec = WebSpec(seed=16, hosts=25, pages_mean=8)
    web_log, out = tmp_path / "web.log", tmp_path / "crawl"
    with tinyproxy(tmp_path / "proxy") as proxy, serve_in_thread(spec, log_path=web_log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        url = f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{proxy.port}"
        # a dead proxy in the environment too: an explicit --proxy is what counts
        env = clean_env(http_proxy=f"http://127.0.0.1:{free_port()}")
        r = gossamer(*crawl_args(seed, out, resolve, "--proxy", url, *_h(HEADERS)), env=env)
        web.flush_log()
        assert r.returncode == 0, r.stderr
        connects = proxy.connects()
    report = audit_coverage(web_log, out)
    assert report["pages"]["coverage"] == 1.0, report["pages"]
    assert report["pages"]["overlap"] == 0.0, report["pages"]
    assert report["violation_count"] == 0, report["politeness"]  # per-IP politeness held
    # every host's requests went through the proxy, tunnelled to the address gossamer
    # resolved (the resolve file's HOST:PORT:IP:PORT)
    pinned = dict(line.split(":80:") for line in resolve.read_text().split())
    heads = warc_request_heads(out)
    fetched_hosts = {u.split("/")[2] for u in heads}
    assert len(fetched_hosts) >= 20
    assert {pinned[h] for h in fetched_hosts} == set(connects)
    # the requests inside the tunnels are recorded as sent, custom headers included
    assert heads and all(b"\r\nFrom: crawler-ops@example.org\r\n" in h for h in heads.values())
    assert all(h.startswith(b"HTTP/1.1 ") for h in warc_response_heads(out))  # the pages' own
    # the password is never printed, nor written anywhere but crawl.json (to resume with)
    assert PROXY_PASSWORD not in r.stdout + r.stderr
    no_file_has(out, PROXY_PASSWORD, except_names=("crawl.json",))
    assert json.loads((out / "crawl.json").read_text())["proxy"] == url
    report_out = gossamer("report", str(out), "--json", env=clean_env())
    assert report_out.returncode == 0 and PROXY_PASSWORD not in report_out.stdout
    assert f"{PROXY_USER}:****@" in report_out.stdout


def test_the_environment_proxy_only_with_proxy_env(tmp_path: Path) -> None:
    """http_proxy in the environment is not used unless asked for with --proxy env (it was
    used silently before: every connection a CONNECT through it)."""
    spec = WebSpec(seed=5, hosts=4, pages_mean=4)
    with tinyproxy(tmp_path / "proxy", auth=False) as proxy:
        env = clean_env(http_proxy=f"http://127.0.0.1:{proxy.port}")
        for run, extra in (("default", ()), ("env", ("--proxy", "env"))):
            web_log, out = tmp_path / f"web-{run}.log", tmp_path / f"crawl-{run}"
            with serve_in_thread(spec, log_path=web_log) as web:
                resolve = web.write_resolve_file(tmp_path / f"resolve-{run}.txt")
                before = len(proxy.connects())
                r = gossamer(*crawl_args(web.url(0, 0), out, resolve, *extra), env=env)
                web.flush_log()
                assert r.returncode == 0, r.stderr
                through_proxy = len(proxy.connects()) - before
            assert audit_coverage(web_log, out)["pages"]["coverage"] == 1.0
            if run == "default":
                assert through_proxy == 0
            else:
                assert through_proxy > 0
                # the proxy's "200 Connection established" is not taken for a page's head
                heads = warc_response_heads(out)
                assert heads and all(h.startswith(b"HTTP/1.1 ") for h in heads), heads[:3]
                assert not any(b"Connection established" in h for h in heads)


def _h(headers: tuple[str, ...]) -> list[str]:
    return [arg for h in headers for arg in ("-H", h)]


@pytest.fixture(scope="module")
def exported_web(tmp_path_factory: pytest.TempPathFactory) -> tuple[WebModel, Path]:
    """The simulated web exported for nginx, whose config gets a second access log with
    the custom headers of each request."""
    model = WebModel(
        WebSpec(seed=12, hosts=6, pages_mean=6, overrides=(("robots_sitemap", 1.0),))
    )
    out = tmp_path_factory.mktemp("export")
    export_web(model, out, port=free_port(), workers=1)
    conf = out / "nginx.conf"
    text = conf.read_text()
    marker = f"access_log {out / 'logs' / 'access.log'} gossamer;"
    assert marker in text, text
    conf.write_text(
        text.replace(
            marker,
            marker + "\n    log_format headers '$host\\t$request_uri\\t$http_from\\t"
            "$http_x_crawl_id\\t$http_user_agent';\n"
            f"    access_log {out / 'logs' / 'headers.log'} headers;",
        )
    )
    return model, out


def test_headers_reach_the_server_on_pages_robots_and_sitemaps(
    exported_web: tuple[WebModel, Path], tmp_path: Path
) -> None:
    model, export = exported_web
    out = tmp_path / "crawl"
    with run_nginx(export):
        r = gossamer(
            *crawl_args(model.page_url(0, 0), out, export / "resolve.txt", "--sitemaps"),
            *_h(HEADERS),
            env=clean_env(),
        )
        assert r.returncode == 0, r.stderr
    lines = [x.split("\t") for x in (export / "logs" / "headers.log").read_text().splitlines()]
    targets = [t for _, t, *_ in lines]
    assert "/robots.txt" in targets and any("sitemap" in t for t in targets)
    assert sum(1 for t in targets if t.endswith(".html") or t.endswith("/")) > 6
    for host, target, sent_from, crawl_id, agent in lines:
        assert (sent_from, crawl_id, agent) == (
            "crawler-ops@example.org",
            "issue-16",
            USER_AGENT,
        ), f"{host}{target}"
    heads = warc_request_heads(out)
    robots = [h for u, h in heads.items() if u.endswith("/robots.txt")]
    assert robots and all(b"\r\nX-Crawl-Id: issue-16\r\n" in h for h in heads.values())


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-H", "Host: other.example"], "header Host cannot be set with -H"),
        (["-H", "User-Agent: x"], "set it with --user-agent"),
        (["-H", "X-Bad Name: 1"], "is not a valid header name"),
        (["-H", "X-A: 1\r\nX-B: 2"], "line break"),
        (["-H", "no colon"], "has no colon"),
        (["--proxy", f"socks5://u:{PROXY_PASSWORD}@h:1080"], "expected an http:// or https://"),
        (["--proxy", f"http://u:{PROXY_PASSWORD}@h:70000"], "not a valid URL"),
    ],
)
def test_bad_header_or_proxy_is_one_clear_error(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "crawl"
    r = gossamer("crawl", "http://www.example.org/", "-o", str(out), *args, env=clean_env())
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert PROXY_PASSWORD not in r.stderr + r.stdout
    assert not out.exists()


def test_a_dead_proxy_fails_at_start(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    dead = f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{free_port()}"
    started = time.monotonic()
    r = gossamer("crawl", "http://www.example.org/", "-o", str(out), "--proxy", dead,
                 env=clean_env())  # fmt: skip
    assert time.monotonic() - started < 30
    assert r.returncode == 69, r.stderr  # Exit.UNAVAILABLE
    assert r.stderr.count("\n") == 1 and "cannot be reached" in r.stderr
    assert f"{PROXY_USER}:****@127.0.0.1" in r.stderr and PROXY_PASSWORD not in r.stderr
    assert not out.exists()


def test_resuming_a_crawl_whose_proxy_is_dead_fails_at_start(tmp_path: Path) -> None:
    """--resume takes the proxy in crawl.json; dead, the resume stops before touching the
    directory."""
    from gossamer.config import load_settings

    out = tmp_path / "crawl"
    out.mkdir()
    dead = f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{free_port()}"
    settings = load_settings({"seeds": ["http://www.example.org/"], "output": out, "proxy": dead})
    (out / "crawl.json").write_text(json.dumps(settings.manifest()))
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    r = gossamer("crawl", "--resume", str(out), env=clean_env())
    assert r.returncode == 69, r.stderr
    assert "cannot be reached" in r.stderr and PROXY_PASSWORD not in r.stderr
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_a_resume_probes_the_new_proxy_it_is_given(tmp_path: Path) -> None:
    """--proxy is a setting a resume takes: the proxy probed at start is the new one (the
    stored one, no proxy, is not the one the run would use); dead, nothing is touched."""
    from gossamer.config import load_settings

    out = tmp_path / "crawl"
    out.mkdir()
    settings = load_settings({"seeds": ["http://www.example.org/"], "output": out})
    (out / "crawl.json").write_text(json.dumps(settings.manifest()))
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    dead = f"http://127.0.0.1:{free_port()}"
    r = gossamer("crawl", "--resume", str(out), "--proxy", dead, env=clean_env())
    assert r.returncode == 69, r.stderr
    assert r.stderr.count("\n") == 1 and "cannot be reached" in r.stderr
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_crawl_json_with_a_proxy_password_is_private_and_a_resume_uses_it(
    tmp_path: Path,
) -> None:
    """crawl.json keeps the proxy URL, password included, for --resume: so it is readable by
    its owner alone (0600, from the moment it is written), and a resume given no --proxy
    fetches through the stored one."""
    spec = WebSpec(seed=17, hosts=3, pages_mean=6)
    out = tmp_path / "crawl"
    old_umask = os.umask(0o022)  # what a shell usually has: files 0644 unless made otherwise
    try:
        with tinyproxy(tmp_path / "proxy") as proxy, serve_in_thread(spec) as web:
            resolve = web.write_resolve_file(tmp_path / "resolve.txt")
            url = f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{proxy.port}"
            first = gossamer(
                *crawl_args(web.url(0, 0), out, resolve, "--proxy", url, "--max-pages", "3"),
                env=clean_env(),
            )
            assert first.returncode == 0, first.stderr
            manifest = out / "crawl.json"
            assert manifest.stat().st_mode & 0o777 == 0o600
            before = len(proxy.connects())
            assert before > 0
            resumed = gossamer(
                "crawl", "--resume", str(out), "--max-pages", "1000", "-q", env=clean_env()
            )
            assert resumed.returncode == 0, resumed.stderr
            assert len(proxy.connects()) > before  # through the stored proxy, its password
        assert json.loads(manifest.read_text())["max_pages"] == 1000  # rewritten by the resume
        assert manifest.stat().st_mode & 0o777 == 0o600
        assert PROXY_PASSWORD not in first.stderr + resumed.stderr
    finally:
        os.umask(old_umask)

"""Starting and stopping a simulated web: the subprocess API, the CLI, determinism across
processes."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from _testweb_http import get, spec_with, wait_for

from gossamer.cli import main
from gossamer.testweb import WebSpec, serve_in_thread, serve_subprocess

# realistic content, but nothing that depends on time or makes a client wait
DETERMINISM_SPEC = WebSpec(
    seed=9,
    hosts=80,
    pages_mean=30,
    profile="realistic",
    overrides=tuple(
        (name, 0.0)
        for name in (
            "latency_ms",
            "dead_host",
            "rate_limit_host",
            "robots_timeout",
            "hang_page",
            "reset_always",
            "reset_once",
            "slow_first_byte",
            "trickle",
            "huge_pages",
        )
    ),
)


def _sample_urls(spec: WebSpec, count: int = 200) -> list[str]:
    from gossamer.testweb import model_for

    model = model_for(spec)
    rng = random.Random(1)
    urls = {f"http://{h.name}/robots.txt" for h in model.hosts[:10]}
    for _ in range(40):
        h = rng.randrange(len(model.hosts))
        plan = model.plan(h, rng.randrange(model.hosts[h].pages))
        urls.add(model.page_url(h, plan.page))
        urls.update(link.url for link in plan.links[:6] if link.url)
    return sorted(urls)[:count]


def _fetch_all(web: object, urls: list[str]) -> list[tuple[int, list[tuple[str, str]], bytes]]:
    out = []
    for url in urls:
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        r = get(web, parts.hostname or "", target, headers={"Accept-Encoding": "gzip"})  # type: ignore[arg-type]
        headers = [(k, v) for k, v in r.headers if k != "Date"]
        out.append((r.status, headers, r.body))
    return out


@pytest.mark.slow
def test_two_servers_serve_byte_identical_answers() -> None:
    urls = _sample_urls(DETERMINISM_SPEC)
    assert len(urls) == 200
    with serve_in_thread(DETERMINISM_SPEC) as a:
        first = _fetch_all(a, urls)
    with serve_subprocess(DETERMINISM_SPEC) as b:
        second = _fetch_all(b, urls)
    assert len({s for s, _, _ in first}) > 2  # not only 200s: redirects, 404s, …
    for url, x, y in zip(urls, first, second, strict=True):
        assert x == y, url


def test_serve_subprocess_runs_and_is_stopped_on_exit(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    with serve_subprocess(spec_with(), log_path=log) as web:
        pid, port = web.pid, web.port
        host = web.model.hosts[0]
        assert get(web, host.name, "/").status == 200
        assert web.status()["pid"] == pid
        web.flush_log()
        assert len(log.read_text().splitlines()) == 2
    with pytest.raises(ProcessLookupError):
        _signal(pid, 0)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host.ip, port), timeout=5).close()


def test_serve_subprocess_stops_even_when_the_block_fails(tmp_path: Path) -> None:
    with pytest.raises(KeyError), serve_subprocess(spec_with()) as web:
        pid = web.pid
        raise KeyError("boom")
    with pytest.raises(ProcessLookupError):
        _signal(pid, 0)


def test_serve_subprocess_reports_a_child_that_cannot_start() -> None:
    with serve_in_thread(spec_with()) as busy:
        taken = busy.port
        with (
            pytest.raises(RuntimeError, match="cannot listen"),
            serve_subprocess(spec_with(), port=taken),
        ):
            pass


def test_serve_in_thread_raises_when_the_port_is_taken() -> None:
    with serve_in_thread(spec_with()) as busy, pytest.raises(OSError):  # noqa: SIM117
        with serve_in_thread(spec_with(), port=busy.port):
            pass


def _signal(pid: int, sig: int) -> None:
    import os

    os.kill(pid, sig)


def test_cli_serve_writes_side_files_and_stops_on_sigterm(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    cmd = [
        sys.executable,
        "-m",
        "gossamer",
        "testweb",
        "serve",
        "--hosts",
        "30",
        "--seed",
        "4",
        "--port",
        "0",
        "--log",
        str(tmp_path / "web.log"),
        "--spec-out",
        str(tmp_path / "spec.json"),
        "--resolve-out",
        str(tmp_path / "resolve.txt"),
        "--hosts-out",
        str(tmp_path / "hosts.txt"),
        "--ready-file",
        str(ready),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(ready.exists, timeout=30)
        port = json.loads(ready.read_text())["port"]
        name, _, ip, p = (tmp_path / "resolve.txt").read_text().splitlines()[0].rsplit(":", 3)
        assert int(p) == port
        with socket.create_connection((ip, port), timeout=10) as s:
            s.sendall(f"GET / HTTP/1.1\r\nHost: {name.split(':')[0]}\r\n\r\n".encode())
            assert s.recv(100).startswith(b"HTTP/1.1 200 OK")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert b"--connect-to" in out
    spec = WebSpec.from_json((tmp_path / "spec.json").read_text())
    assert (spec.hosts, spec.seed) == (30, 4)
    assert (tmp_path / "hosts.txt").read_text().startswith("127.1.0.1 ")
    log = (tmp_path / "web.log").read_text().splitlines()
    assert len(log) == 2 and log[1].split("\t")[6:8] == ["/", "200"]


def test_cli_serve_duration() -> None:
    serve = [sys.executable, "-m", "gossamer", "testweb", "serve", "--hosts", "5", "--port", "0"]
    code = subprocess.call([*serve, "--duration", "0.2", "--quiet"], timeout=30)
    assert code == 0


def test_cli_info_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["testweb", "info", "--hosts", "50", "--profile", "realistic", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["hosts"] == 50
    assert d["pages"] == sum(h.pages for h in _model(d))
    assert d["site_pages"]["min"] <= d["site_pages"]["p50"] <= d["site_pages"]["max"]
    assert set(d["host_flags"]) >= {"DEAD", "RATE_LIMIT", "GZIP"}
    assert main(["testweb", "info", "--hosts", "50"]) == 0
    assert "hosts per flag" in capsys.readouterr().out


def _model(d: dict[str, object]) -> list:  # type: ignore[type-arg]
    from gossamer.testweb import model_for

    return model_for(WebSpec.from_dict(d["spec"])).hosts  # type: ignore[arg-type]


def test_cli_serve_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (["--processes", "0"], ["--port", "70000"], ["--bind-ip", "localhost"]):
        with pytest.raises(SystemExit) as exc:
            main(["testweb", "serve", "--hosts", "5", *bad])
        assert exc.value.code == 2
    with contextlib.suppress(Exception):
        capsys.readouterr()

"""The dashboard's server (gossamer.dashboard) through Starlette's test client: the embedded
source over a crawl directory's files, /api/status, /metrics, the token and Host checks, the
stop request's cross-site protection (with a real process sent SIGTERM), and a Redis URL's
password never reaching the page."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from gossamer.dashboard import ClusterSource, EmbeddedSource, SourceError, make_app
from gossamer.dashboard._app import required_token

LOCAL = "http://127.0.0.1:8700"


def _log_line(url: str, status: int | None, nbytes: int, **extra: Any) -> str:
    rec = {"time": "2026-11-26T05:00:00.000000Z", "url": url, "status": status,
           "bytes": nbytes, "depth": 0, "outcome": "ok" if status == 200 else "fetch/error/x",
           **extra}  # fmt: skip
    return json.dumps(rec) + "\n"


def make_crawl_dir(tmp_path: Path, *, ended: bool = True, pid: int | None = None) -> Path:
    """A crawl directory as `gossamer crawl` leaves it: 3 pages (one an error), one run."""
    out = tmp_path / "crawl"
    (out / "graph").mkdir(parents=True)
    (out / "crawl.json").write_text(json.dumps({"seeds": ["http://a.test/"], "max_pages": 50}))
    runs = [{"event": "start", "run": 1, "time": time.time() - 10, "resume": False, "workers": 1}]
    if ended:
        stats = {"ended": "complete", "finished": True}
        runs.append({"event": "end", "run": 1, "time": time.time(), "exit": 0, "stats": stats})
        (out / "stats.json").write_text(json.dumps(stats))
    (out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    (out / "lock").write_text(f"{pid if pid is not None else 999_999_999}\n")
    (out / "crawl.log.jsonl").write_text(
        _log_line("http://a.test/", 200, 1000)
        + _log_line("http://a.test/b", 200, 500)
        + _log_line("http://a.test/c", None, 0, error="timeout")
    )
    (out / "graph" / "stats.json").write_text(
        json.dumps({"nodes": 2, "edges": 1, "scc_count": 2, "dangling": 1, "final": True})
    )
    return out


def test_embedded_snapshot_counts_the_crawl_log_and_reads_the_graph(tmp_path: Path) -> None:
    out = make_crawl_dir(tmp_path)
    s = EmbeddedSource(out).snapshot()
    assert s["crawl"]["state"] == "ended" and s["crawl"]["end_reason"] == "complete"
    assert s["crawl"]["max_pages"] == 50 and s["crawl"]["seeds"] == ["http://a.test/"]
    t = s["totals"]
    assert (t["pages"], t["requests"], t["bytes"], t["errors"]) == (2, 3, 1500, 1)
    assert t["statuses"] == {"200": 2}
    assert s["graph"]["nodes"] == 2 and s["graph"]["final"] is True
    assert s["frontier"] is None  # no frontier.sqlite in this directory


def test_the_log_tail_reads_only_new_whole_lines(tmp_path: Path) -> None:
    out = make_crawl_dir(tmp_path)
    source = EmbeddedSource(out)
    assert source.snapshot()["totals"]["pages"] == 2
    line = _log_line("http://a.test/d", 200, 7)
    with (out / "crawl.log.jsonl").open("a") as f:
        f.write(line[:20])  # a write in progress: not counted yet
        f.flush()
        assert source.snapshot()["totals"]["pages"] == 2
        f.write(line[20:])
    assert source.snapshot()["totals"]["bytes"] == 1507
    (out / "crawl.log.jsonl").write_text(_log_line("http://a.test/", 200, 1))  # replaced
    assert source.snapshot()["totals"]["requests"] == 1


def test_the_log_is_read_in_chunks_that_split_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gossamer.dashboard import _sources

    out = make_crawl_dir(tmp_path)
    whole = EmbeddedSource(out).snapshot()["totals"]
    monkeypatch.setattr(_sources, "_CHUNK", 7)  # every line split across chunks
    assert EmbeddedSource(out).snapshot()["totals"] == whole


def test_a_directory_that_is_no_crawl_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SourceError, match="not a crawl directory"):
        EmbeddedSource(tmp_path)
    with pytest.raises(SourceError, match="is not a directory"):
        EmbeddedSource(tmp_path / "notes.txt")


def test_status_and_metrics(tmp_path: Path) -> None:
    client = TestClient(make_app(EmbeddedSource(make_crawl_dir(tmp_path))), base_url=LOCAL)
    status = client.get("/api/status").json()
    assert status["totals"]["pages"] == 2
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(r.text)
        for s in fam.samples
    }
    assert samples[("gossamer_pages_total", (("crawl", "crawl"),))] == 2
    assert samples[("gossamer_body_bytes_total", (("crawl", "crawl"),))] == 1500
    assert samples[("gossamer_responses_total", (("crawl", "crawl"), ("status", "200")))] == 2
    assert samples[("gossamer_graph_nodes", (("crawl", "crawl"),))] == 2
    machine = status["workers"][0]["machine"]
    labels = (("crawl", "crawl"), ("machine", machine), ("worker", "main"))
    key = ("gossamer_worker_pages_total", labels)
    assert samples[key] == 2
    # the collector lives in the app's own registry, not prometheus-client's global one
    assert not any(m.name.startswith("gossamer") for m in REGISTRY.collect())


#: the page's other files: its CSS and the vendored chart library
STATIC = {
    "/dashboard.css": "text/css",
    "/vendor/uPlot.iife.min.js": "text/javascript",
    "/vendor/uPlot.min.css": "text/css",
}


def test_the_page_and_its_files_are_served_from_the_package(tmp_path: Path) -> None:
    client = TestClient(make_app(EmbeddedSource(make_crawl_dir(tmp_path))), base_url=LOCAL)
    page = client.get("/").text
    for path, media_type in STATIC.items():
        assert f'"{path}"' in page, path  # the page names each (no CDN: all from here)
        r = client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith(media_type), path
        assert len(r.content) > 1000, path
    uplot = client.get("/vendor/uPlot.iife.min.js").text
    assert uplot.startswith("/*! https://github.com/leeoniya/uPlot (v1.6.32) */")
    assert "http" not in "".join(
        line for line in page.splitlines() if "<script" in line or "<link" in line
    )


def test_loopback_without_token_answers_loopback_host_names_only(tmp_path: Path) -> None:
    app = make_app(EmbeddedSource(make_crawl_dir(tmp_path)))
    for base in (LOCAL, "http://localhost:8700", "http://[::1]:8700", "http://[::1]"):
        assert TestClient(app, base_url=base).get("/api/status").status_code == 200
    rebound = TestClient(app, base_url="http://evil.example:8700")  # DNS rebinding
    for path in ("/", "/api/status", "/metrics", "/events", "/dashboard.js", *STATIC):
        assert rebound.get(path).status_code == 403, path


def test_a_token_is_required_on_every_request(tmp_path: Path) -> None:
    app = make_app(EmbeddedSource(make_crawl_dir(tmp_path)), token="s3cret")
    client = TestClient(app, base_url="http://192.0.2.7:8700")
    for path in ("/", "/api/status", "/metrics", "/events", "/dashboard.js", *STATIC):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"X-Gossamer-Token": "wrong"}).status_code == 401, path
    assert client.post("/api/stop").status_code == 401
    assert client.get("/api/status", headers={"X-Gossamer-Token": "s3cret"}).status_code == 200
    page = client.get("/?token=s3cret")  # the first load sets the cookie the page then uses
    assert page.status_code == 200 and "gossamer_dashboard_token" in page.headers["set-cookie"]
    assert "httponly" in page.headers["set-cookie"].lower()
    assert client.get("/api/status").status_code == 200  # by the cookie


def test_a_token_is_generated_for_any_address_but_loopback() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert required_token(host, None) == (None, False)
    assert required_token("127.0.0.1", "given") == ("given", False)
    assert required_token("0.0.0.0", "given") == ("given", False)
    for host in ("0.0.0.0", "192.0.2.7", "::", "dashboard.example"):
        token, generated = required_token(host, None)
        assert generated and token is not None and len(token) >= 24
    assert required_token("0.0.0.0", None) != required_token("0.0.0.0", None)


def _sleeper() -> subprocess.Popen[bytes]:
    """A process whose command line names gossamer (as a crawl's does), to be stopped."""
    return subprocess.Popen([sys.executable, "-c", "import time  # gossamer\ntime.sleep(60)"])


def test_stop_is_a_same_origin_post_with_the_csrf_token(tmp_path: Path) -> None:
    proc = _sleeper()
    try:
        out = make_crawl_dir(tmp_path, ended=False, pid=proc.pid)
        app = make_app(EmbeddedSource(out))
        client = TestClient(app, base_url=LOCAL)
        assert client.get("/api/status").json()["crawl"]["state"] == "running"
        csrf = app.state.csrf
        page = client.get("/").text
        assert f'content="{csrf}"' in page
        good = {"Origin": LOCAL, "X-Gossamer-CSRF": csrf}
        assert client.get("/api/stop").status_code == 405
        assert client.post("/api/stop", headers={"X-Gossamer-CSRF": csrf}).status_code == 403
        bad_origin = {**good, "Origin": "http://evil.example"}
        assert client.post("/api/stop", headers=bad_origin).status_code == 403
        assert client.post("/api/stop", headers={"Origin": LOCAL}).status_code == 403
        wrong = {**good, "X-Gossamer-CSRF": "guess"}
        assert client.post("/api/stop", headers=wrong).status_code == 403
        assert proc.poll() is None  # none of those reached the process
        r = client.post("/api/stop", headers=good)
        assert r.status_code == 200, r.text
        assert proc.wait(timeout=10) == -signal.SIGTERM
        assert client.post("/api/stop", headers=good).status_code == 409  # nothing runs
    finally:
        proc.kill()
        proc.wait()


def test_a_redis_password_never_reaches_the_page(redis_password_url: str, tmp_path: Path) -> None:
    password = redis_password_url.split("@")[0].rsplit(":", 1)[1]
    assert len(password) > 8
    done = subprocess.run(
        [sys.executable, "-m", "gossamer", "crawl", "--redis", redis_password_url,
         "http://a.test/", "--workers", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    source = ClusterSource(redis_password_url, None)
    try:
        client = TestClient(make_app(source), base_url=LOCAL)
        status = client.get("/api/status")
        assert status.json()["crawl"]["state"] == "running"
        assert status.json()["source"]["redis"].startswith("redis://:***@127.0.0.1:")
        bodies = [status.text, client.get("/metrics").text, client.get("/").text]
        with client.stream("GET", "/events") as events:
            bodies.append(next(events.iter_lines()))
        for body in bodies:
            assert password not in body and "pw%2F" not in body
    finally:
        source.close()

"""The dashboard's Setup and control requests (POST /api/start, /api/resume, /api/scale)
through Starlette's test client: each refusal (the command line's own message for a bad
setting, with the form's labels, 409 for a request the crawl's state does not allow, 403
cross-site or without the CSRF token), the form's first values (the settings model's defaults
and the dashboard's GOSSAMER_* environment), the worker table and `control` read from a crawl
directory's heartbeats, good requests that start, stop and resume a real crawl of the
simulated web and refuse to scale a one-process crawl, and a crawl that fetched no page (its
addresses private) said in the form's words and started again in its directory. Scaling a
running pool: tests/e2e/test_dashboard_control_e2e.py."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from gossamer.config import CrawlSettings
from gossamer.dashboard import ClusterSource, EmbeddedSource, make_app
from gossamer.dashboard._control import _error_line, start_log
from gossamer.dashboard._setup import FIELDS, form_words
from gossamer.engine.heartbeat import write_beat
from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread
from gossamer.urls import url_password

LOCAL = "http://127.0.0.1:8700"


class Page:
    """The dashboard's app as its page talks to it: same-origin JSON POSTs with the CSRF
    token."""

    def __init__(self, source: Any) -> None:
        self.app = make_app(source)
        self.client = TestClient(self.app, base_url=LOCAL)
        self.headers = {"Origin": LOCAL, "X-Gossamer-CSRF": self.app.state.csrf}

    def post(self, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        r = self.client.post(path, json=body, headers=self.headers)
        return r.status_code, r.json()

    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = self.client.get("/api/status").json()
        return data


def cli_error(*args: str) -> str:
    """What `gossamer crawl ARGS` prints as its error, without `gossamer: error: `."""
    done = subprocess.run(
        [sys.executable, "-m", "gossamer", "crawl", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    return _error_line(done.stderr)


def test_a_new_directory_is_a_crawl_not_started_and_can_be_started(tmp_path: Path) -> None:
    page = Page(EmbeddedSource(tmp_path / "new"))
    s = page.status()
    assert s["crawl"]["state"] == "not started" and s["workers"] == []
    assert s["control"] == {"workers": None, "can_start": True, "can_resume": False,
                            "can_stop": False, "can_scale": False, "max_workers": 64}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "cli", "words"),
    [
        ({"seeds": ["notaurl"], "workers": 2}, ("notaurl",),
         "invalid seed URL 'notaurl': no http:// or https://"),
        ({"seeds": [], "workers": 1}, (), "no seed URL: give one or more"),
        ({"seeds": ["http://a.test/"], "scope": "planet"}, ("http://a.test/", "--scope", "planet"),
         "Scope planet: expected one of host, domain, all"),
        ({"seeds": ["http://a.test/"], "partition": "modulo"}, ("http://a.test/", "--partition",
                                                                "modulo"), "Partition is for"),
        ({"seeds": ["http://a.test/"], "delay": -1, "max_depth": -1},
         ("http://a.test/", "--delay", "-1.0", "--max-depth", "-1"),
         "Max depth -1: must be at least 0, or none (no limit); "
         "Delay (s) -1: must be at least 0"),
        ({"seeds": ["--proxy=http://127.0.0.1:9/"]}, ("--", "--proxy=http://127.0.0.1:9/"),
         "--proxy"),
    ],
)  # fmt: skip
def test_start_refuses_what_the_command_line_refuses_with_its_message(
    tmp_path: Path, body: dict[str, Any], cli: tuple[str, ...], words: str
) -> None:
    """The command line's refusal, with the form's labels for its flags and settings."""
    out = tmp_path / "new"
    page = Page(EmbeddedSource(out))
    code, answer = page.post("/api/start", body)
    expected = form_words(cli_error(*cli, "-o", str(tmp_path / "cli")))
    assert code == 400, answer
    assert answer == {"error": expected.replace(str(tmp_path / "cli"), str(out))}
    assert words in answer["error"]
    assert "\n" not in answer["error"]
    assert not out.exists()  # nothing was started
    assert start_log(out).is_file()  # the command's output, beside the directory


def _form_defaults(page: Page) -> dict[str, Any]:
    """The form's first values, as the page is served them."""
    html = page.client.get("/").text
    m = re.search(r'<script type="application/json" id="setup-defaults">(.*?)</script>', html)
    assert m, "no setup defaults in the page"
    data: dict[str, Any] = json.loads(m.group(1))
    return data


def test_the_form_shows_the_defaults_a_crawl_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("GOSSAMER_"):
            monkeypatch.delenv(name)
    model = CrawlSettings.model_validate({})  # the settings model's own defaults
    setup = _form_defaults(Page(EmbeddedSource(tmp_path / "new")))
    assert setup["values"] == {
        "allow_private": model.fetch.allow_private, "scope": model.scope,
        "delay": model.politeness.delay, "max_depth": model.max_depth,
        "max_pages": model.max_pages, "workers": min(model.effective_workers(), 64),
    }  # fmt: skip
    assert setup["values"]["max_depth"] == 20 and setup["from_environment"] == []
    assert setup["labels"] == FIELDS
    # the dashboard's environment, which the started command inherits, is what a crawl gets
    monkeypatch.setenv("GOSSAMER_ALLOW_PRIVATE", "true")
    monkeypatch.setenv("GOSSAMER_MAX_DEPTH", "none")
    setup = _form_defaults(Page(EmbeddedSource(tmp_path / "new")))
    assert setup["values"]["allow_private"] is True and setup["values"]["max_depth"] is None
    assert setup["from_environment"] == ["allow_private", "max_depth"]
    # every field of the form is labelled with its name in the form's words
    html = Page(EmbeddedSource(tmp_path / "new")).client.get("/").text
    for name, label in FIELDS.items():
        element = {"seeds": "seeds", "partition": "partition", "machines": "machine-list"}.get(
            name, name.replace("_", "-")
        )
        if name == "seeds":
            assert f"<legend>{label}</legend>" in html
        else:
            assert f'<label for="{element}"' in html and f">{label}</label>" in html, label


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"seeds": ["http://a.test/"], "workers": 0}, "workers: give a whole number from 1 to 64"),
        ({"seeds": ["http://a.test/"], "workers": 65}, "workers: give a whole number from 1"),
        ({"seeds": ["http://a.test/"], "workers": "2"}, "workers: give a whole number"),
        ({"seeds": "http://a.test/"}, "seeds: give a list of URLs"),
        ({"seeds": ["http://a.test/"], "proxy": "x"}, "unknown setting 'proxy'"),
        ({"seeds": ["http://a.test/"], "max_pages": 1.5}, "max_pages: give a whole number"),
        ({"seeds": ["http://a.test/"], "max_depth": "lots"}, "max_depth: give a whole number, "
                                                             "'none' or null"),
        ({"seeds": ["http://a.test/"], "allow_private": "yes"}, "allow_private: give true, "),
        ({"seeds": ["http://a.test/"], "delay": "fast"}, "delay: give a number of seconds"),
        # the machine list: checked as --machines FILE is, and only for a cluster crawl
        ({"seeds": ["http://a.test/"], "machines": "a\nb cores=2"},
         "Machines, line 2: 'cores=2': expected workers=N or out=DIR after the destination"),
        ({"seeds": ["http://a.test/"], "machines": ["a"]}, "machines: give a machine list's "),
        ({"seeds": ["http://a.test/"], "machines": "a.example\n"},
         "Machines: workers on other machines are for a cluster crawl"),
    ],
)
def test_start_refuses_a_bad_body(tmp_path: Path, body: dict[str, Any], error: str) -> None:
    out = tmp_path / "new"
    code, answer = Page(EmbeddedSource(out)).post("/api/start", body)
    assert code == 400 and answer["error"].startswith(error), answer
    assert not start_log(out).exists()  # refused before any command ran


def test_control_posts_are_same_origin_json_with_the_csrf_token(tmp_path: Path) -> None:
    out = tmp_path / "new"
    page = Page(EmbeddedSource(out))
    body = {"seeds": ["http://a.test/"], "workers": 1}
    for path in ("/api/start", "/api/resume", "/api/scale"):
        assert page.client.get(path).status_code == 405
        no_csrf = page.client.post(path, json=body, headers={"Origin": LOCAL})
        assert no_csrf.status_code == 403 and "CSRF" in no_csrf.json()["error"]
        cross = {**page.headers, "Origin": "http://evil.example"}
        cross_site = page.client.post(path, json=body, headers=cross)
        assert cross_site.status_code == 403 and "cross-site" in cross_site.json()["error"]
        form = page.client.post(path, content=b"seeds=x", headers=page.headers)
        assert form.status_code == 400 and form.json()["error"] == "the body must be a JSON object"
    assert not out.exists() and not start_log(out).exists()  # none of those ran anything


def _sleeper() -> subprocess.Popen[bytes]:
    """A process whose command line names gossamer (as a crawl's does)."""
    return subprocess.Popen([sys.executable, "-c", "import time  # gossamer\ntime.sleep(60)"])


def _crawl_dir(tmp_path: Path, *, pid: int | None, ended: str | None) -> Path:
    out = tmp_path / "crawl"
    out.mkdir()
    (out / "crawl.json").write_text(json.dumps({"seeds": ["http://a.test/"], "workers": 2}))
    runs = [{"event": "start", "run": 1, "time": time.time() - 10, "workers": 2}]
    if ended is not None:
        stats = {"ended": ended, "finished": ended == "complete"}
        runs.append({"event": "end", "run": 1, "time": time.time(), "exit": 0, "stats": stats})
        (out / "stats.json").write_text(json.dumps(stats))
    (out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    (out / "lock").write_text(f"{pid if pid is not None else 999_999_999}\n")
    return out


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = _sleeper()
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_running_crawl_cannot_be_started_or_resumed(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    out = _crawl_dir(tmp_path, pid=sleeper.pid, ended=None)
    page = Page(EmbeddedSource(out))
    s = page.status()
    assert s["crawl"]["state"] == "running"
    assert s["control"]["can_stop"] and not s["control"]["can_start"]
    assert not s["control"]["can_scale"]  # one process: no control.json of a pool
    code, answer = page.post("/api/start", {"seeds": ["http://a.test/"]})
    assert (code, answer) == (409, {"error": f"a crawl is running in {out}"})
    code, answer = page.post("/api/resume", {})
    assert code == 409 and answer["error"] == f"the crawl in {out} is running: nothing to resume"
    code, answer = page.post("/api/scale", {"workers": 3})
    assert code == 409 and "runs in one process (--workers 1)" in answer["error"]
    assert sleeper.poll() is None  # nothing was sent to it


def test_an_ended_crawl_cannot_be_scaled_nor_a_complete_one_resumed(tmp_path: Path) -> None:
    out = _crawl_dir(tmp_path, pid=None, ended="complete")
    page = Page(EmbeddedSource(out))
    control = page.status()["control"]
    assert not control["can_scale"] and not control["can_resume"] and not control["can_start"]
    code, answer = page.post("/api/scale", {"workers": 3})
    assert (code, answer) == (409, {"error": f"no crawl is running in {out}"})
    for bad in (0, 65, None, "3"):
        code, answer = page.post("/api/scale", {"workers": bad})
        assert code == 400, answer
    code, answer = page.post("/api/resume", {})
    assert code == 409 and "is ended (complete): nothing to resume" in answer["error"]
    code, answer = page.post("/api/start", {"seeds": ["http://a.test/"]})
    assert code == 409 and "already holds a crawl (ended)" in answer["error"]
    assert page.post("/api/resume", {"workers": 0})[0] == 400


def test_the_worker_table_reads_the_heartbeats(tmp_path: Path, sleeper: subprocess.Popen[bytes]
                                               ) -> None:  # fmt: skip
    out = _crawl_dir(tmp_path, pid=sleeper.pid, ended=None)
    (out / "workers").mkdir()
    now = time.time()
    for k, state in enumerate(["running", "running", "stopping"]):
        write_beat(out / "workers" / f"w{k}.json", {
            "id": f"w{k}", "pid": 1000 + k, "state": state, "hosts": [f"h{k}.test"],
            "pages": 10 * k, "pages_per_s": 1.5, "requests": 11 * k, "errors": k,
            "started": now - 5, "last_heartbeat": now - 1})  # fmt: skip
    (out / "workers" / ".w9.json.tmp").write_text("{torn")  # a beat being written
    (out / "control.json").write_text(json.dumps({"pid": sleeper.pid, "workers": 2}))
    s = Page(EmbeddedSource(out)).status()
    rows = s["workers"]
    assert [r["id"] for r in rows] == ["w0", "w1", "w2"]
    assert [r["state"] for r in rows] == ["running", "running", "stopping"]
    assert rows[1]["hosts"] == ["h1.test"] and rows[2]["pages"] == 20 and rows[2]["errors"] == 2
    assert set(rows[0]) >= {"id", "machine", "pid", "state", "hosts", "pages", "pages_per_s",
                            "errors", "last_heartbeat", "beat_age_s"}  # fmt: skip
    assert 0.5 <= rows[0]["beat_age_s"] < 60
    assert s["totals"]["workers"] == 3
    assert s["control"]["can_scale"] and s["control"]["workers"] == 2
    sleeper.kill()
    sleeper.wait()
    s = Page(EmbeddedSource(out)).status()  # killed: its last beats are no running workers
    assert s["crawl"]["state"] == "killed"
    assert {r["state"] for r in s["workers"]} == {"exited"} and s["totals"]["workers"] == 0
    assert s["control"]["can_resume"] and not s["control"]["can_scale"]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.05)
    return value


@pytest.mark.slow
def test_start_stop_resume_a_real_crawl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = WebSpec(seed=9, hosts=100, pages_mean=150, profile="clean")  # outlasts the test
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        # the started command inherits the dashboard's environment: GOSSAMER_* settings apply
        monkeypatch.setenv("GOSSAMER_RESOLVE_FILE", str(resolve))
        monkeypatch.setenv("GOSSAMER_ALLOW_PRIVATE", "true")
        out = tmp_path / "crawl"
        page = Page(EmbeddedSource(out))
        code, answer = page.post("/api/start", {"seeds": [web.url(0, 0)], "workers": 1,
                                                "scope": "all", "delay": 0, "max_pages": None})
        assert code == 200 and answer["ok"], answer
        pid = page.status()["crawl"]["pid"]
        assert f"started: pid {pid}" in answer["message"]
        try:
            s = wait_for("a page and a beat", lambda: (s := page.status())["totals"]["pages"] > 0
                         and s["workers"] and s["workers"][0]["pages"] > 0 and s)  # fmt: skip
            assert s["crawl"]["state"] == "running" and s["crawl"]["seeds"] == [web.url(0, 0)]
            assert [(w["id"], w["pid"]) for w in s["workers"]] == [("main", pid)]
            assert os.getsid(pid) == pid  # its own session: the dashboard's end is not its end
            code, answer = page.post("/api/start", {"seeds": [web.url(0, 0)]})
            assert code == 409
            assert page.post("/api/stop", {})[0] == 200
            s = wait_for("the end", lambda: (s := page.status())["crawl"]["state"] == "ended"
                         and s)  # fmt: skip
            assert s["crawl"]["end_reason"] == "SIGTERM" and s["control"]["can_resume"]
            code, answer = page.post("/api/resume", {"workers": 2})
            assert code == 200 and answer["message"].startswith("resumed: pid "), answer
            s = wait_for("two workers", lambda: (s := page.status())["control"]["can_scale"]
                         and len(s["workers"]) == 2 and s)  # fmt: skip
            assert [w["id"] for w in s["workers"]] == ["w0", "w1"]
            assert s["crawl"]["runs"] == 2 and s["control"]["workers"] == 2
            assert page.post("/api/stop", {})[0] == 200
            wait_for("the end", lambda: page.status()["crawl"]["state"] == "ended")
        finally:
            for w in page.status()["workers"]:
                if w["state"] != "exited" and w["pid"]:
                    os.kill(w["pid"], 9)
            crawl_pid = EmbeddedSource(out).lock_pid()
            if crawl_pid is not None:
                try:
                    os.kill(crawl_pid, 9)
                except ProcessLookupError:
                    pass


@pytest.mark.slow
def test_a_crawl_that_fetched_nothing_says_why_and_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started without Allow private addresses, a crawl of the simulated web (loopback
    addresses) fetches nothing: the status says why in the form's words and lets it start
    again; a start refused by the command line keeps the old crawl; a good one replaces it."""
    for name in list(os.environ):
        if name.startswith("GOSSAMER_"):
            monkeypatch.delenv(name)
    with serve_in_thread(WebSpec(seed=4, hosts=3, pages_mean=10, profile="clean")) as web:
        monkeypatch.setenv("GOSSAMER_RESOLVE_FILE", str(web.write_resolve_file(tmp_path / "r")))
        out = tmp_path / "crawl"
        page = Page(EmbeddedSource(out))
        body = {"seeds": [web.url(0, 0)], "workers": 1, "delay": 0, "scope": "all",
                "max_pages": 5, "max_depth": "none"}  # fmt: skip
        code, answer = page.post("/api/start", body)
        # started (and soon ended), or ended before its start was seen: the same words
        assert code in (200, 400), answer
        s = wait_for("the end", lambda: (s := page.status())["crawl"]["state"] == "ended" and s)
        problem = s["crawl"]["problem"]
        assert problem["kind"] == "fetch/error/blocked-address"
        assert problem["field"] == "allow_private"
        assert problem["message"].startswith("No page was fetched. The seeds resolve to "
                                             "loopback/private addresses")  # fmt: skip
        assert problem["message"].endswith(": tick Allow private addresses and start again.")
        assert "--allow-private" not in problem["message"]
        if code == 400:
            assert answer["error"] == problem["message"]
        assert s["totals"]["pages"] == 0 and s["crawl"]["end_reason"] == "complete"
        assert s["control"]["can_start"] and not s["control"]["can_resume"]
        # a start the command line refuses: the crawl that fetched nothing stays
        code, answer = page.post("/api/start", {**body, "seeds": ["notaurl"]})
        assert code == 400 and "invalid seed URL 'notaurl'" in answer["error"]
        assert json.loads((out / "crawl.json").read_text())["seeds"] == [web.url(0, 0)]
        assert page.status()["crawl"]["problem"] == problem
        # with the box ticked: started again in the same directory, and crawled
        code, answer = page.post("/api/start", {**body, "allow_private": True})
        assert code == 200 and answer["message"].startswith("started: pid "), answer
        s = wait_for("the new crawl's end", lambda: (s := page.status())["crawl"]["state"]
                     == "ended" and s["totals"]["pages"] and s)  # fmt: skip
        assert s["crawl"]["end_reason"] == "max-pages" and s["totals"]["pages"] == 5
        assert s["crawl"]["problem"] is None and s["crawl"]["runs"] == 1
        stored = json.loads((out / "crawl.json").read_text())
        assert stored["allow_private"] is True and stored["max_depth"] is None


def test_a_cluster_dashboard_before_any_crawl(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where the started command's log goes: gossamer-worker/
    source = ClusterSource(redis_url, None)
    try:
        page = Page(source)
        s = page.status()
        assert s["crawl"]["state"] == "not started" and s["workers"] == []
        assert s["control"]["can_start"] and not s["control"]["can_scale"]
        code, answer = page.post("/api/resume", {})
        assert code == 409 and re.fullmatch(
            r"no crawl in redis://127\.0\.0\.1:\d+/0 yet: start one", answer["error"]
        ), answer
        code, answer = page.post("/api/scale", {"workers": 2})
        assert code == 409 and "no crawl in redis://127.0.0.1:" in answer["error"]
        assert page.post("/api/stop", {})[0] == 409
        code, answer = page.post("/api/start", {"seeds": ["notaurl"], "workers": 1})
        assert code == 400
        assert answer["error"] == form_words(
            cli_error("--redis", redis_url, "notaurl", "--workers", "0")
        )
        assert page.status()["crawl"]["state"] == "not started"  # nothing was created
        (log,) = (tmp_path / "gossamer-worker").glob("crawl-*.dashboard.log")
        assert "notaurl" in log.read_text()
    finally:
        source.close()


def _cmdlines() -> dict[int, bytes]:
    """Every process's command line, as `ps` shows them to any user of the machine."""
    out = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                out[int(proc.name)] = (proc / "cmdline").read_bytes()
            except OSError:
                pass  # gone meanwhile
    return out


def _exists(pid: int) -> bool:
    """The process is running, or a zombie nobody reaped."""
    return (Path("/proc") / str(pid)).exists()


@pytest.mark.slow
def test_a_cluster_crawl_started_and_scaled_from_the_dashboard_keeps_the_password_out_of_ps(
    redis_password_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard's cluster start runs `gossamer crawl --redis URL` with the URL's password
    in $REDISCLI_AUTH, not on the command line; the crawl and its workers connect with it.
    A worker started by a scale is reaped when it exits (no zombie until the next scale)."""
    password = url_password(redis_password_url)
    assert password
    monkeypatch.chdir(tmp_path)
    spec = WebSpec(seed=9, hosts=100, pages_mean=150, profile="clean")  # outlasts the test
    with serve_in_thread(spec) as web:
        monkeypatch.setenv("GOSSAMER_RESOLVE_FILE", str(web.write_resolve_file(tmp_path / "r")))
        monkeypatch.setenv("GOSSAMER_ALLOW_PRIVATE", "true")
        source = ClusterSource(redis_password_url, None)
        page = Page(source)
        started: list[int] = []
        try:
            code, answer = page.post("/api/start", {"seeds": [web.url(0, 0)], "workers": 1,
                                                    "scope": "all", "delay": 0})  # fmt: skip
            assert code == 200 and answer["ok"], answer
            s = wait_for("a page", lambda: (s := page.status())["totals"]["pages"] > 0 and s)
            started = [w["pid"] for w in s["workers"]]
            # `crawl --redis` ran for a moment with the URL in its argv: the URL it gave its
            # worker (GOSSAMER_REDIS) shows that it had no password, and the worker connected
            environ = dict(
                v.split(b"=", 1)
                for v in (Path("/proc") / str(started[0]) / "environ").read_bytes().split(b"\0")
                if b"=" in v
            )  # fmt: skip
            assert environ[b"REDISCLI_AUTH"] == password.encode()
            assert password.encode() not in environ[b"GOSSAMER_REDIS"]
            code, answer = page.post("/api/scale", {"workers": 2})
            assert code == 200, answer
            s = wait_for("two workers", lambda: len((s := page.status())["workers"]) == 2 and s)
            started = [w["pid"] for w in s["workers"]]
            for pid, line in _cmdlines().items():
                assert password.encode() not in line, (pid, line)
            assert page.post("/api/stop", {})[0] == 200
            wait_for("the end", lambda: page.status()["crawl"]["state"] == "stopped")
            # the scaled worker is the dashboard's (this process's) child: reaped, not a zombie
            wait_for("the workers reaped", lambda: not any(map(_exists, started)))
        finally:
            for pid in started:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            source.close()


#: the user agent of the resumed cluster crawl's requests, which its audit reads
RESUME_UA = "gossamer-dashboard-resume-test/0.1"


@pytest.mark.slow
def test_a_stopped_cluster_crawl_is_resumed_from_the_dashboard(
    redis_password_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster crawl started from the dashboard (one local worker) and stopped once it has
    pages is resumed through POST /api/resume: `crawl --resume --redis URL --crawl ID
    --workers 2 --detach -o DIR` (the password in the environment, never in argv), its new
    workers beside the first in the start's directory; it runs to the end: every page of
    the simulated web crawled, none twice, politely. `control.can_resume` is true only for
    the stopped crawl; a resume of the running and of the finished crawl is refused (409)
    saying why."""
    password = url_password(redis_password_url)
    assert password
    monkeypatch.chdir(tmp_path)
    delay = 0.1  # seconds between two requests to a host: the crawl outlasts its stop
    log = tmp_path / "web.log"
    with serve_in_thread(WebSpec(seed=12, hosts=30, pages_mean=20), log_path=log) as web:
        seed = web.url(0, 0)
        monkeypatch.setenv("GOSSAMER_RESOLVE_FILE", str(web.write_resolve_file(tmp_path / "r")))
        monkeypatch.setenv("GOSSAMER_ALLOW_PRIVATE", "true")
        monkeypatch.setenv("GOSSAMER_USER_AGENT", RESUME_UA)
        monkeypatch.delenv("GOSSAMER_LIVE_GRAPH", raising=False)
        source = ClusterSource(redis_password_url, None)
        page = Page(source)
        try:
            code, answer = page.post("/api/start", {"seeds": [seed], "workers": 1,
                                                    "scope": "all", "delay": delay})  # fmt: skip
            assert code == 200, answer
            crawl_id = answer["message"].split()[2]
            s = wait_for("a page", lambda: (s := page.status())["totals"]["pages"] > 0 and s)
            assert s["crawl"]["state"] == "running" and not s["control"]["can_resume"]
            code, answer = page.post("/api/resume", {})
            assert (code, answer["error"]) == (409, f"crawl {crawl_id} is running: nothing "
                                               "to resume (scale its workers to add some)")
            assert page.post("/api/stop", {})[0] == 200
            s = wait_for("the stop", lambda: (s := page.status())["crawl"]["state"] == "stopped"
                         and s, timeout=60)  # fmt: skip
            assert s["frontier"]["queued"] > 100, "nearly over at the stop: the test shows little"
            assert s["control"]["can_resume"] and s["control"]["can_start"]
            done_at_stop = s["frontier"]["done"]

            code, answer = page.post("/api/resume", {"workers": 2})
            assert code == 200, answer
            (out,) = (tmp_path / "gossamer-worker").glob("crawl-*[0-9]")  # the start's -o
            assert answer["message"] == (
                f"resumed crawl {crawl_id} with 2 local workers and its live graph "
                f"(`gossamer graph follow`); outputs in {out}, "
                f"log {start_log(out)}"
            )
            s = page.status()
            assert s["crawl"]["id"] == crawl_id and s["crawl"]["state"] == "running"
            assert not s["control"]["can_resume"] and s["frontier"]["done"] >= done_at_stop

            def live_workers() -> int:
                return sum(w["state"] not in ("dead", "stopped") for w in page.status()["workers"])

            wait_for("the resumed workers", lambda: live_workers() == 2)
            for pid, line in _cmdlines().items():  # the resume's workers, running now
                assert password.encode() not in line, (pid, line)
            s = wait_for("the end", lambda: (s := page.status())["crawl"]["state"] == "finished"
                         and s, timeout=180)  # fmt: skip
            assert not s["control"]["can_resume"]
            code, answer = page.post("/api/resume", {})
            assert (code, answer["error"]) == (409, f"crawl {crawl_id} is finished: nothing "
                                               "to resume")
            assert [w["id"] for w in s["workers"]] == ["w1", "w2", "w3"]
        finally:
            for w in page.status()["workers"]:
                if w["pid"] and w["state"] not in ("dead", "stopped"):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(w["pid"], 9)
            source.close()
        web.flush_log()
        rules = TruthRules(seeds=(seed,), scope="all", user_agent=RESUME_UA)
        truth = compute_truth(web.model, rules)
        report = audit(web.model, read_logs([log]).records, rules, truth=truth,
                       min_delay=delay, tolerance_s=0.01)  # fmt: skip
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    assert s["frontier"]["done"] == len(truth.required)
    assert sorted(p.name for p in out.glob("w*")) == ["w1", "w2", "w3"]

"""The dashboard's Setup and control end to end: a real `gossamer dashboard` process starts
a crawl of the simulated web from POST /api/start (as the page sends it), scales its workers
2 → 3 → 1 through POST /api/scale while it runs, and the crawl is then audited — every page
of the truth, none fetched twice, politeness kept. Once for an embedded crawl (a fork pool in
a directory that did not exist when the dashboard started) and once for a cluster crawl on
a real redis-server (a Redis with no crawl yet; its local workers started and stopped)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _crawl_helpers import USER_AGENT
from test_dashboard_e2e import dashboard, events

from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread

#: seconds between two requests to a host: the crawl lasts long enough to be scaled twice
DELAY = 0.05
# the scaling test's delay: its biggest host (91 pages) then takes >= 13.7 s, longer than
# starting, scaling to 3 and back to 1 takes on a loaded machine (at 0.05 s the crawl was
# over, all three workers still listed, before the scale-down was seen: 6.7 s)
SCALE_DELAY = 0.15
#: 365 pages, 91 on its largest host: scaled 2 -> 3 -> 1 about 3 s in, then ended by the last
#: worker some seconds later (tests/e2e/test_crawl_scale.py)
SPEC = WebSpec(seed=5, hosts=40, pages_mean=12)


def crawl_env(resolve: Path) -> dict[str, str]:
    """The dashboard's environment, which the commands it starts inherit: the settings the
    form has no field for (GOSSAMER_*), to crawl the simulated web on loopback."""
    return {
        **os.environ,
        "GOSSAMER_RESOLVE_FILE": str(resolve),
        "GOSSAMER_ALLOW_PRIVATE": "true",
        "GOSSAMER_USER_AGENT": USER_AGENT,
        "GOSSAMER_CONCURRENCY": "2",
        # a lease lasts 10 min: hosts a retired worker held until its lease ended would hold
        # the crawl past the test's bound
        "GOSSAMER_LEASE_TTL": "600",
    }


class Page:
    """POSTs as the page sends them: JSON, same origin, the CSRF token of its <meta>."""

    def __init__(self, base: str) -> None:
        self.base = base
        html = httpx2.get(f"{base}/", timeout=10).text
        csrf = re.search(r'name="gossamer-csrf" content="([^"]+)"', html)
        assert csrf, html
        self.headers = {"Origin": base, "X-Gossamer-CSRF": csrf.group(1)}

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = httpx2.post(f"{self.base}{path}", json=body, headers=self.headers, timeout=60)
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        assert answer["ok"] is True
        return answer


def live(s: dict[str, Any]) -> list[str]:
    return [w["id"] for w in s["workers"] if w["state"] not in ("exited", "stopped", "dead",
                                                                 "stopping")]  # fmt: skip


def audit_crawl(web: Any, log: Path, seed: str, delay: float = DELAY) -> Any:
    web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT)
    truth = compute_truth(web.model, rules)
    # the server's timestamps, taken in this process's thread, drift by up to 6 ms from the
    # crawler's clock (tests/e2e/test_crawl_scale.py): 10 ms of tolerance, not 5
    report = audit(web.model, read_logs([log]).records, rules, truth=truth, min_delay=delay,
                   tolerance_s=0.01)  # fmt: skip
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    return truth


@pytest.mark.slow
def test_start_and_scale_an_embedded_pool_from_the_dashboard(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"  # does not exist yet: the crawl is started there
    with serve_in_thread(SPEC, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        with dashboard(str(out), env=crawl_env(resolve)) as base, events(base) as stream:
            _, s = stream.next()
            assert s["crawl"]["state"] == "not started" and s["control"]["can_start"]
            page = Page(base)
            answer = page.post("/api/start", {"seeds": [seed], "workers": 2, "scope": "all",
                                              "delay": SCALE_DELAY, "max_pages": None})  # fmt: skip
            assert answer["message"].startswith("started: pid ")
            _, s = stream.until("w0 and w1 crawling", lambda s: live(s) == ["w0", "w1"])
            assert s["crawl"]["state"] == "running" and s["control"]["can_scale"]
            assert s["control"]["workers"] == 2 and s["crawl"]["seeds"] == [seed]
            r = httpx2.post(f"{base}/api/start", json={"seeds": [seed]}, headers=page.headers,
                            timeout=30)  # fmt: skip
            assert r.status_code == 409 and r.json()["error"] == f"a crawl is running in {out}"
            assert "for 3 workers (it had 2)" in page.post("/api/scale", {"workers": 3})["message"]
            _, s = stream.until("w2 crawling", lambda s: any(
                w["id"] == "w2" and w["pages"] > 0 for w in s["workers"]))  # fmt: skip
            assert live(s) == ["w0", "w1", "w2"] and s["control"]["workers"] == 3
            assert s["totals"]["workers"] == 3
            page.post("/api/scale", {"workers": 1})
            # the highest-numbered leave once their batches are done; the table follows
            _, s = stream.until("w0 alone", lambda s: [w["id"] for w in s["workers"]] == ["w0"])
            # running on, or already ended by w0 itself (a small web): never by the retired
            # workers' exits (then the end reason and the pages below would say so)
            assert s["crawl"]["state"] == "running" or s["crawl"]["end_reason"] == "complete", s
            # (an event comes when the status changes: one that says "ended" already is the end)
            end = s if s["crawl"]["state"] == "ended" else stream.until(
                "the end", lambda s: s["crawl"]["state"] == "ended", timeout=120)[1]  # fmt: skip
            assert end["crawl"]["end_reason"] == "complete", end
            assert not end["control"]["can_scale"] and not end["control"]["can_resume"]
        truth = audit_crawl(web, log, seed, SCALE_DELAY)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["workers"] == 3 and stats["workers_retired"] == ["w1", "w2"]
    assert stats["pages"] == len(truth.required) and min(stats["pages_per_worker"]) > 0
    assert (tmp_path / "crawl.dashboard.log").is_file()  # the crawl's output, beside it


@pytest.mark.slow
def test_start_and_scale_a_cluster_crawl_from_the_dashboard(
    tmp_path: Path, redis_url: str
) -> None:
    log = tmp_path / "web.log"
    with serve_in_thread(SPEC, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        with (
            dashboard("--redis", redis_url, env=crawl_env(resolve), cwd=tmp_path) as base,
            events(base) as stream,
        ):
            _, s = stream.next()
            assert s["crawl"]["state"] == "not started" and s["control"]["can_start"]
            page = Page(base)
            answer = page.post("/api/start", {
                "seeds": [seed], "workers": 2, "scope": "all", "delay": SCALE_DELAY,
                "partition": "dynamic",
            })  # fmt: skip
            crawl_id = answer["message"].split()[2]
            _, s = stream.until("two workers crawling", lambda s: s["crawl"]["id"] == crawl_id
                                and sum(w["pages"] > 0 for w in s["workers"]) == 2)  # fmt: skip
            assert s["crawl"]["state"] == "running" and s["control"]["can_scale"]
            assert s["crawl"]["partition"] == "dynamic"
            r = httpx2.post(f"{base}/api/resume", json={}, headers=page.headers, timeout=30)
            assert r.status_code == 409
            assert r.json()["error"] == (f"crawl {crawl_id} is running: nothing to resume "
                                         "(scale its workers to add some)")
            r = httpx2.post(f"{base}/api/start", json={"seeds": [seed]}, headers=page.headers,
                            timeout=30)  # fmt: skip
            assert r.status_code == 409
            assert r.json()["error"] == f"crawl {crawl_id} is running: stop it first"
            assert "2 -> 3 workers" in page.post("/api/scale", {"workers": 3})["message"]
            _, s = stream.until("three workers crawling", lambda s: sum(
                1 for w in s["workers"] if w["pages"] > 0) == 3)  # fmt: skip
            assert s["control"]["workers"] == 3
            assert "3 -> 1 workers" in page.post("/api/scale", {"workers": 1})["message"]
            _, s = stream.until("one live worker", lambda s: len(live(s)) == 1)
            assert s["crawl"]["state"] == "running"
            _, end = stream.until("the end", lambda s: s["crawl"]["state"] == "finished",
                                  timeout=120)  # fmt: skip
            assert not end["control"]["can_scale"] and end["control"]["can_start"]
            assert end["totals"]["pages"] == sum(w["pages"] for w in end["workers"])
            r = httpx2.post(f"{base}/api/scale", json={"workers": 2}, headers=page.headers,
                            timeout=30)  # fmt: skip
            assert r.status_code == 409 and r.json()["error"] == f"crawl {crawl_id} is finished"
        truth = audit_crawl(web, log, seed, SCALE_DELAY)
        assert end["totals"]["pages"] == len(truth.required)
    (outputs,) = (tmp_path / "gossamer-worker").glob("crawl-*[0-9]")
    assert sorted(p.name for p in outputs.glob("w*")) == ["w1", "w2", "w3"]

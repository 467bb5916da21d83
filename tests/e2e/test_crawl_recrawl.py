"""`gossamer crawl --recrawl OLD_DIR`: a re-crawl with conditional GETs against the simulated
web, after its content epoch changed some pages, judged by the server's audit log."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from _crawl_helpers import USER_AGENT, crawl_settings
from _static_site import static_site
from test_real_site import installed_gossamer
from warcio.archiveiterator import ArchiveIterator

from gossamer.runner.run import run_crawl
from gossamer.sinks import read_crawl_log, read_graph
from gossamer.testweb import (
    Kind,
    PageFlag,
    TruthRules,
    WebSpec,
    audit,
    compute_truth,
    read_logs,
    serve_in_thread,
)
from gossamer.testweb._nginx import run_nginx

BIN = Path(sys.executable).parent


def _warc_records(out: Path) -> list[tuple[str, str, dict[str, str], int | None]]:
    """(type, target URI, WARC headers, HTTP status) of every response and revisit record."""
    records = []
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    headers = dict(rec.rec_headers.headers)
                    status = rec.http_headers.get_statuscode() if rec.http_headers else None
                    records.append(
                        (
                            rec.rec_type,
                            headers["WARC-Target-URI"],
                            headers,
                            int(status) if status else None,
                        )
                    )
    return records


def _check_warcs(out: Path) -> None:
    files = sorted((out / "warc").glob("*.warc.gz"))
    assert files
    res = subprocess.run(
        [str(BIN / "warcio"), "check", *map(str, files)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    if (BIN / "fastwarc").exists():
        for f in files:
            res = subprocess.run(
                [str(BIN / "fastwarc"), "check", "--verify-payloads", "--quiet", str(f)],
                capture_output=True,
                text=True,
            )
            assert res.returncode == 0, res.stdout + res.stderr


def test_recrawl_sends_conditional_gets_and_reaches_everything(tmp_path: Path) -> None:
    spec = WebSpec(
        seed=11,
        hosts=15,
        pages_mean=10,
        overrides=(("conditional_host", 1.0), ("changing", 0.3)),
    )
    log = tmp_path / "web.log"
    old, new = tmp_path / "old", tmp_path / "new"
    with serve_in_thread(spec, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        assert run_crawl(crawl_settings(tmp_path, old, [seed], workers=1)) == 0
        web.flush_log()
        time.sleep(0.01)
        switch_us = time.time_ns() // 1000
        web.set_epoch(1)  # the `changing` pages change
        # no seed given: the old crawl's seeds; two workers (the pool path)
        settings = crawl_settings(tmp_path, new, [], workers=2, recrawl=old)
        assert settings.recrawl == old.absolute() and settings.seeds == [seed]
        assert run_crawl(settings) == 0
        web.flush_log()
    model = web.model
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT)
    truth = compute_truth(model, rules)
    assert len({u.split("/")[2] for u in truth.required}) >= 10

    # the first crawl logged every page's validators
    old_log = [r for r in read_crawl_log(old / "crawl.log.jsonl") if r["depth"] is not None]
    assert old_log and all(r["status"] == 200 for r in old_log)
    assert all(r["etag"].startswith('"') and r["last_modified"] for r in old_log)

    def changing(url: str) -> bool:
        name, _, target = url.partition("//")[2].partition("/")
        host = model.host_by_name(name)
        assert host is not None
        res = model.resolve(host.id, "/" + target)
        assert res.kind is Kind.PAGE
        return bool(model.page_flags(host.id, res.a) & PageFlag.CHANGING)

    changed = {u for u in truth.required if changing(u)}
    assert changed and len(changed) < len(truth.required)

    # the re-crawl: one line per page, 304 for the unchanged, 200 for the changed
    new_log = [r for r in read_crawl_log(new / "crawl.log.jsonl") if r["depth"] is not None]
    by_url = {r["url"]: r for r in new_log}
    assert len(new_log) == len(by_url) == len(truth.required)
    assert set(by_url) == set(truth.required)
    for url, r in by_url.items():
        if url in changed:
            assert (r["status"], r["outcome"]) == (200, "ok"), r
        else:
            assert (r["status"], r["outcome"]) == (304, "ok/not-modified"), r
            assert r["bytes"] == 0
        assert r["etag"] and r["last_modified"], r  # kept for the next re-crawl

    # the server saw conditional requests for every page, and its audit of the re-crawl
    # alone: full coverage, no page fetched twice, polite
    records = [r for r in read_logs([log]).records if r.start_us >= switch_us]
    pages = [r for r in records if r.method == "GET" and not r.target.endswith("robots.txt")]
    assert len(pages) == len(truth.required)
    assert all(r.inm.startswith('"') and r.ims for r in pages)
    assert sum(r.status == 304 for r in pages) == len(truth.required) - len(changed)
    report = audit(model, records, rules, truth=truth)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.ok, report.format_table()

    # links of 304 pages came from the old graph: the new graph is the whole truth
    ours = {e for e in read_graph(new).url_edges() if e[1] in truth.required}
    assert ours == {(a, b, k) for a, b, k in truth.edges}

    # WARC: 304s are revisit records (server-not-modified), the changed pages responses
    _check_warcs(new)
    recs = [r for r in _warc_records(new) if not r[1].endswith("/robots.txt")]
    assert len(recs) == len(truth.required)
    old_times = {r["url"]: r["time"] for r in old_log}
    for kind, uri, headers, status in recs:
        if uri in changed:
            assert (kind, status) == ("response", 200)
        else:
            assert (kind, status) == ("revisit", 304)
            assert headers["WARC-Profile"].endswith("/revisit/server-not-modified")
            assert headers["WARC-Refers-To-Target-URI"] == uri
            assert headers["WARC-Refers-To-Date"] == old_times[uri]
    stats = json.loads((new / "stats.json").read_text())
    assert stats["finished"] and stats["pages"] == len(truth.required)
    assert json.loads((new / "crawl.json").read_text())["recrawl"] == str(old.absolute())


def test_a_recrawl_keeps_the_old_crawls_settings_and_flags_given_now_win(
    tmp_path: Path,
) -> None:
    """`gossamer crawl --recrawl OLD -o NEW` of a site on 127.0.0.1 (nginx), without
    repeating the old crawl's `--allow-private`: the re-crawl takes it (and the old crawl's
    user agent and depth limit) from OLD's crawl.json and fetches every page again, where it
    once refused the loopback address for robots.txt and dropped every URL as
    `robots/disallowed`. A flag given now wins over the old crawl's value."""
    site = static_site(tmp_path, 6)  # index.html, p1–p5
    seed, access_log = site.base, site.access_log
    old, new = tmp_path / "old", tmp_path / "new"

    def gossamer(*args: str) -> None:
        done = subprocess.run(
            [installed_gossamer(), "crawl", "-q", "--workers", "1", "--delay", "0", *args],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]

    with run_nginx(site.server):
        gossamer(seed, "-o", str(old), "--allow-private", "--user-agent", "oldbot/1",
                 "--max-depth", "3")  # fmt: skip
        first = [line.split() for line in access_log.read_text().splitlines()]
        # --delay is no setting a re-crawl takes (given again: 0); --user-agent given now wins
        gossamer("--recrawl", str(old), "-o", str(new), "--user-agent", "newbot/2")
        again = [line.split() for line in access_log.read_text().splitlines()][len(first) :]
    stored = json.loads((new / "crawl.json").read_text())
    assert (stored["seeds"], stored["allow_private"], stored["max_depth"]) == ([seed], True, 3)
    assert stored["user_agent"] == "newbot/2"
    stats = json.loads((new / "stats.json").read_text())
    assert stats["dropped"] == {}, stats["dropped"]
    assert stats["pages"] == json.loads((old / "stats.json").read_text())["pages"] == 7
    # every page asked for again (/, /index.html, p1–p5), each answered: nginx answers the
    # conditional GETs of unchanged files 304
    pages = sorted(target for _, target, _ in first if target != "/robots.txt")
    assert sorted(target for _, target, _ in again if target != "/robots.txt") == pages
    assert {status for _, target, status in again if target != "/robots.txt"} == {"304"}

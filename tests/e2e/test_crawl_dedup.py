"""Identical payloads written once (issue 34), end to end with the real CLI against nginx: a
site whose 20 pages d1…d20 are byte-identical under different URLs. The WARC holds one
response and 19 identical-payload-digest revisits referring to it (one crawl process, a pool
of two workers over two hosts of the same bytes, a crawl SIGKILLed and resumed), the crawl log
and `gossamer report` say so, the CDXJ index equals cdxj-indexer's, and pywb replays every
page; --no-dedup-payloads stores all 20 whole."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _pywb import get, pywb_serving
from _static_site import IDENTICAL_BODY, static_site
from test_real_site import installed_gossamer
from warcio.archiveiterator import ArchiveIterator

from gossamer.config import load_settings
from gossamer.report.crawl import crawl_report, print_report
from gossamer.runner.run import run_crawl
from gossamer.sinks import read_crawl_log
from gossamer.testweb._nginx import run_nginx

BIN = Path(sys.executable).parent
PAYLOAD = IDENTICAL_BODY.encode()
SHA1 = hashlib.sha1(PAYLOAD).digest()
DIGEST = "sha1:" + base64.b32encode(SHA1).decode()
PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


def crawl(out: Path, seeds: list[str], **flags: object) -> None:
    """A crawl in this process (a pool's workers forked), as `gossamer crawl` runs it."""
    settings = load_settings(
        {"seeds": seeds, "output": out, "allow_private": True, "delay": 0.0, **flags}
    )
    assert run_crawl(settings) == 0


def records(out: Path) -> list[dict[str, Any]]:
    """Every response and revisit record of the crawl's WARC files, in file order."""
    found = []
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type not in ("response", "revisit"):
                    continue
                h = rec.rec_headers
                date = h.get_header("WARC-Date")
                found.append({
                    "type": rec.rec_type,
                    "file": path.name,
                    "uri": h.get_header("WARC-Target-URI"),
                    "date": date,
                    "timestamp": "".join(c for c in date[:19] if c.isdigit()),
                    "headers": dict(h.headers),
                    "status": rec.http_headers.get_statuscode(),
                    "payload": rec.content_stream().read(),
                })  # fmt: skip
    return found


def same_payload(recs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(responses, revisits) of the identical pages d1…d20."""
    group = [r for r in recs if "/d" in r["uri"]]
    responses = [r for r in group if r["type"] == "response"]
    revisits = [r for r in group if r["type"] == "revisit"]
    return responses, revisits


def check_one_response(out: Path, copies: int, *, again: bool = False) -> dict[str, Any]:
    """The identical pages: one response, `copies - 1` revisits referring to it (`again`:
    or more, a page fetched again after a kill), each page logged with its duplicate status.
    The response."""
    responses, revisits = same_payload(records(out))
    assert len(responses) == 1, [r["uri"] for r in responses]
    first = responses[0]
    assert first["payload"] == PAYLOAD
    assert first["headers"]["WARC-Payload-Digest"] == DIGEST
    assert len(revisits) >= copies - 1 if again else len(revisits) == copies - 1
    assert len({r["uri"] for r in revisits} | {first["uri"]}) == copies
    for r in revisits:
        h = r["headers"]
        assert h["WARC-Profile"] == PROFILE
        assert h["WARC-Refers-To-Target-URI"] == first["uri"]
        assert h["WARC-Refers-To-Date"] == first["date"]
        assert h["WARC-Payload-Digest"] == DIGEST
        assert r["status"] == "200" and r["payload"] == b""  # the HTTP head kept, no payload
    log = [x for x in read_crawl_log(out / "crawl.log.jsonl") if "/d" in x["url"]]
    marked = {x["url"]: x.get("dup_of") for x in log if x.get("dup") == "identical"}
    assert marked == {r["uri"]: first["uri"] for r in revisits}
    return first


def library_index(warc_dir: Path) -> str:
    return subprocess.run(
        [str(BIN / "cdxj-indexer"), "--sort", *map(str, sorted(warc_dir.glob("*.warc.gz")))],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip


def test_identical_pages_are_stored_once_and_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = static_site(tmp_path, 3, identical=20)  # /, index.html, p1, p2, d1 … d20
    port = site.base.rsplit(":", 1)[1].strip("/")
    on, off, pool = tmp_path / "on", tmp_path / "off", tmp_path / "pool"
    with run_nginx(site.server):
        crawl(on, [site.base], workers=1)
        # (near-duplicates off too: byte-identical pages are near-duplicates, marked as such)
        crawl(off, [site.base], workers=1, dedup_payloads=False, near_dup_links="off")
        # two hosts of the same bytes (one nginx), a worker each (a host's batch lasts a
        # while: the second worker is up before the first could take both): 40 identical
        # pages, the two hosts fetched in turn (one IP), each batch's claims in the store
        # before the IP's next turn
        hosts = ("a.test", "b.test")
        crawl(pool, [f"http://{h}/" for h in hosts], workers=2, delay=0.1,
              resolve=[f"{h}:80:127.0.0.1:{port}" for h in hosts])  # fmt: skip

    check_one_response(on, 20)
    recs = records(on)
    # / and /index.html are the same bytes too (and over the minimum size): one revisit
    index = [r for r in recs if r["uri"].endswith(("/", "/index.html"))]
    assert sorted(r["type"] for r in index) == ["response", "revisit"]
    report = crawl_report(on)  # (`gossamer report --json`)
    assert report["revisits"] == {
        "records": 20,
        "bytes_saved": 19 * len(PAYLOAD) + len(index[0]["payload"] or index[1]["payload"]),
    }
    capsys.readouterr()
    assert print_report(on) == 0
    text = capsys.readouterr().out
    assert "revisits     20 (payloads identical to an earlier capture's), " in text
    warc_dir = on / "warc"
    assert (warc_dir / "index.cdxj").read_text() == library_index(warc_dir)
    index_text = (warc_dir / "index.cdxj").read_text()
    entries = [json.loads(x.split(" ", 2)[2]) for x in index_text.splitlines()]
    assert Counter(e["mime"] for e in entries if "/d" in e["url"]) == {
        "text/html": 1, "warc/revisit": 19,
    }  # fmt: skip
    assert all(e["digest"] == DIGEST for e in entries if "/d" in e["url"])

    # turned off: every page whole, nothing marked, no digest store
    responses, revisits = same_payload(records(off))
    assert (len(responses), len(revisits)) == (20, 0)
    assert not any("dup" in x for x in read_crawl_log(off / "crawl.log.jsonl"))
    assert not (off / "digests.sqlite").exists()
    assert crawl_report(off)["revisits"] == {"records": 0, "bytes_saved": 0}

    # the pool: the digests shared by its workers
    check_one_response(pool, 40)
    by_worker = Counter(
        x.get("worker") for x in read_crawl_log(pool / "crawl.log.jsonl") if "/d" in x["url"]
    )
    assert len(by_worker) == 2, by_worker  # both workers fetched identical pages

    # pywb replays every page: the revisits through the capture they refer to
    with pywb_serving(tmp_path / "pywb", [warc_dir / "index.cdxj"], [warc_dir]) as base:
        for r in recs:
            status, headers, body = get(f"{base}{r['timestamp']}id_/{r['uri']}")
            assert str(status) == r["status"], (r["uri"], status, body[:300])
            assert headers.get("memento-datetime"), r["uri"]
            if "/d" in r["uri"]:
                assert body == PAYLOAD, r["uri"]  # a revisit's: the first capture's payload


def _claimed(path: Path) -> bool:
    if not path.exists():
        return False
    try:
        db = sqlite3.connect(path, timeout=1)
        try:
            row = db.execute("SELECT 1 FROM digests WHERE digest = ?", (SHA1,)).fetchone()
            return row is not None
        finally:
            db.close()
    except sqlite3.Error:  # (not created yet)
        return False


def test_a_resumed_crawl_writes_no_second_response(tmp_path: Path) -> None:
    """SIGKILLed once the payload's first capture is claimed (its batch done), resumed: the
    pages fetched again and those left are all revisits of that one response."""
    site = static_site(tmp_path, 2, identical=20)
    out = tmp_path / "crawl"
    with run_nginx(site.server):
        proc = subprocess.Popen(
            [installed_gossamer(), "crawl", site.base, "-o", str(out), "--allow-private", "-q",
             "--workers", "1", "--per-host", "2", "--delay", "0.1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not _claimed(out / "digests.sqlite"):
                assert proc.poll() is None, "the crawl ended before the payload was claimed"
                assert time.monotonic() < deadline, "no claim within 60 s"
                time.sleep(0.02)
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=30)
        done = {x["url"] for x in read_crawl_log(out / "crawl.log.jsonl") if "/d" in x["url"]}
        assert 0 < len(done) < 20  # killed mid-crawl
        # (as `gossamer crawl --resume DIR --delay 0`)
        assert run_crawl(load_settings({"output": out, "delay": 0.0}), resume=True) == 0
    first = check_one_response(out, 20, again=True)
    assert first["uri"] in done  # the capture made before the kill
    assert (out / "warc" / "index.cdxj").read_text() == library_index(out / "warc")

"""The CDX index of a crawl (DIR/warc/index.cdxj), end to end with the real CLI: a pool of two
workers SIGKILLed mid-crawl and resumed, a re-crawl's revisit records, `gossamer report --cdx`.
Judged by the tools that read it: the index equals what `cdxj-indexer` writes from the same
WARC files, and pywb, serving the crawl with that index, replays every response record."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path

import pytest
from _pywb import get, pywb_serving
from warcio.archiveiterator import ArchiveIterator

from gossamer.runner.run import write_cdx_index
from gossamer.sinks import WarcWriter
from gossamer.testweb import WebSpec, serve_in_thread

BIN = Path(sys.executable).parent
UA = "gossamer-cdxtest/0.1"


def gossamer(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def crawl_args(out: Path, resolve: Path, seed: str, *extra: str) -> list[str]:
    return [
        "crawl", seed, "-o", str(out), "--scope", "all", "--resolve-file", str(resolve),
        "--allow-private", "--user-agent", UA, "--concurrency", "8", "-q", *extra,
    ]  # fmt: skip


@dataclass(frozen=True)
class Record:
    type: str
    url: str
    timestamp: str  # 14 digits, as in the index
    status: str
    body: bytes
    filename: str
    offset: int
    etag: str | None
    digest: str | None  # WARC-Payload-Digest (an identical-payload revisit: its original's)


def warc_records(warc_dir: Path) -> list[Record]:
    """Every response and revisit record of the crawl's WARC files, read by warcio."""
    records = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with path.open("rb") as f:
            it = ArchiveIterator(f)
            for rec in it:
                if rec.rec_type not in ("response", "revisit"):
                    continue
                date = rec.rec_headers.get_header("WARC-Date")
                records.append(
                    Record(
                        rec.rec_type,
                        rec.rec_headers.get_header("WARC-Target-URI"),
                        "".join(c for c in date[:19] if c.isdigit()),
                        rec.http_headers.get_statuscode(),
                        rec.content_stream().read(),
                        path.name,
                        it.get_record_offset(),
                        rec.http_headers.get_header("ETag"),
                        rec.rec_headers.get_header("WARC-Payload-Digest"),
                    )
                )
    return records


def library_index(warc_dir: Path) -> str:
    res = subprocess.run(
        [str(BIN / "cdxj-indexer"), "--sort", *map(str, sorted(warc_dir.glob("*.warc.gz")))],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return res.stdout


def index_entries(index: Path) -> list[dict[str, str]]:
    entries = []
    for line in index.read_text().splitlines():
        key, stamp, data = line.split(" ", 2)
        entries.append({"urlkey": key, "timestamp": stamp, **json.loads(data)})
    return entries


def wait_for(cond: object, proc: subprocess.Popen[bytes], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert proc.poll() is None, f"the crawl ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.02)


def replay_all(base: str, records: list[Record]) -> None:
    """Every record, fetched through pywb's replay at its own timestamp (`id_`: the archived
    bytes, unrewritten), answers with its status and, for a 200, its body (a page fetched
    again after a kill is an identical-payload revisit: its first capture's payload)."""
    assert records
    payloads = {r.digest: r.body for r in records if r.type == "response"}
    for r in records:
        status, headers, body = get(f"{base}{r.timestamp}id_/{r.url}")
        assert str(status) == r.status, (r.url, status, body[:300])
        if status == 200:
            assert body == (r.body if r.type == "response" else payloads[r.digest]), r.url
        assert headers.get("memento-datetime"), r.url  # a capture, not pywb's error page


@pytest.mark.slow
def test_pool_killed_and_resumed_index_equals_cdxj_indexer_and_pywb_replays_it(
    tmp_path: Path,
) -> None:
    spec = WebSpec(seed=21, hosts=12, pages_mean=15, profile="clean")
    out = tmp_path / "crawl"
    warc_dir = out / "warc"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        # a pool of two, slowed by the per-host delay so that the kill lands mid-crawl
        proc = subprocess.Popen(
            [sys.executable, "-m", "gossamer",
             *crawl_args(out, resolve, web.url(0, 0), "--workers", "2", "--delay", "0.15")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            log = out / "crawl.log.jsonl"
            wait_for(  # both workers writing, some way into the crawl
                lambda: log.exists()
                and log.read_bytes().count(b"\n") >= 30
                and len(list(warc_dir.glob("*.warc.gz.open"))) == 2,
                proc,
                "30 fetches and two WARC files being written",
            )
            proc.send_signal(signal.SIGKILL)  # its workers die with it
        finally:
            proc.kill()
            proc.wait(timeout=30)
        assert not (warc_dir / "index.cdxj").exists()
        resumed = gossamer("crawl", "--resume", str(out), "-q")
        assert resumed.returncode == 0, resumed.stderr
    assert not list(warc_dir.glob("*.open"))
    index = warc_dir / "index.cdxj"
    # (a) what cdxj-indexer writes from the same files, byte for byte; every response record
    # in it, at its offset, with its status
    text = index.read_text()
    assert text == library_index(warc_dir)
    records = warc_records(warc_dir)
    entries = index_entries(index)
    assert len(entries) == len(records) > 12 * 10
    assert {(e["filename"], int(e["offset"])) for e in entries} == {
        (r.filename, r.offset) for r in records
    }
    assert len({r.filename for r in records}) >= 4  # two workers, before and after the kill
    by_place = {(e["filename"], int(e["offset"])): e for e in entries}
    for r in records:
        e = by_place[(r.filename, r.offset)]
        assert (e["url"], e["timestamp"], e["status"]) == (r.url, r.timestamp, r.status)
    assert text.splitlines() == sorted(text.splitlines())

    # `gossamer report --cdx` writes the same index again, from the WARC files alone
    index.unlink()
    for part in (warc_dir / "cdx").iterdir():
        part.unlink()
    rep = gossamer("report", str(out), "--cdx")
    assert rep.returncode == 0, rep.stderr
    assert f"{index}: {len(entries)} records of" in rep.stderr
    assert rep.stdout.startswith(f"crawl {out}")  # then the report, as without --cdx
    assert index.read_text() == text

    # (b) pywb reads the index and replays every record from the WARC files
    with pywb_serving(tmp_path / "pywb", [index], [warc_dir]) as base:
        replay_all(base, records)


@pytest.mark.slow
def test_recrawl_revisits_are_indexed_and_replayed_by_pywb(tmp_path: Path) -> None:
    """A re-crawl with conditional GETs stores 304s as revisit records: indexed as
    cdxj-indexer does (`warc/revisit`, status 304, no digest); pywb, given both crawls,
    replays each revisit at its own time and the page it refers to at the first crawl's."""
    spec = WebSpec(seed=11, hosts=8, pages_mean=8, overrides=(("conditional_host", 1.0),))
    old, new = tmp_path / "old", tmp_path / "new"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        first = gossamer(*crawl_args(old, resolve, web.url(0, 0), "--delay", "0", "--workers", "1"))
        assert first.returncode == 0, first.stderr
        # an index time has whole seconds: the re-crawl's captures must not share the old
        # ones' second, or pywb may pick either for either time
        ended = time.time()
        while int(time.time()) == int(ended):
            time.sleep(0.02)
        again = gossamer(
            "crawl", "-o", str(new), "--recrawl", str(old), "--resolve-file", str(resolve),
            "--allow-private", "--scope", "all", "--delay", "0", "--user-agent", UA, "-q",
            "--workers", "1",
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
    for out in (old, new):
        assert (out / "warc" / "index.cdxj").read_text() == library_index(out / "warc")
    revisits = [r for r in warc_records(new / "warc") if r.type == "revisit"]
    assert len(revisits) > 20
    entries = index_entries(new / "warc" / "index.cdxj")
    assert sum(e["mime"] == "warc/revisit" and e["status"] == "304" for e in entries) == len(
        revisits
    )
    originals = {r.url: r for r in warc_records(old / "warc") if r.type == "response"}
    with pywb_serving(
        tmp_path / "pywb",
        [old / "warc" / "index.cdxj", new / "warc" / "index.cdxj"],
        [old / "warc", new / "warc"],
    ) as base:
        for r in revisits:
            # the revisit's own capture, read from the WARC where the index says: pywb 2.10
            # replays a revisit whose status is 3xx (a 304 here) with its own headers and
            # no payload, without looking the original up (resolvingloader.py)
            status, headers, body = get(f"{base}{r.timestamp}id_/{r.url}")
            assert (status, body) == (304, b""), (r.url, status, body[:300])
            assert headers["memento-datetime"] == _http_date(r.timestamp), r.url
            assert headers["x-archive-orig-etag"] == r.etag, r.url  # read from the record
            # the capture the revisit refers to: the page itself
            original = originals[r.url]
            status, headers, body = get(f"{base}{original.timestamp}id_/{r.url}")
            assert (status, body) == (int(original.status), original.body), r.url


def _http_date(timestamp: str) -> str:
    when = datetime.strptime(timestamp, "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    return format_datetime(when, usegmt=True)


def test_report_cdx_bad_input(tmp_path: Path) -> None:
    """Not a crawl directory, or a crawler running in it: one error line, exit 2 (USAGE),
    nothing written."""
    plain = tmp_path / "plain"
    (plain / "warc").mkdir(parents=True)
    (plain / "stats.json").write_text("{}")
    before = sorted(p.name for p in plain.rglob("*"))
    res = gossamer("report", str(plain), "--cdx", timeout=60)
    assert res.returncode == 2
    assert res.stderr.startswith(f"gossamer: error: {plain} is not a crawl directory")
    assert len(res.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in plain.rglob("*")) == before

    running = tmp_path / "running"
    (running / "warc").mkdir(parents=True)
    (running / "crawl.json").write_text("{}")
    import fcntl

    with (running / "lock").open("a+") as lock:  # as a running crawler holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = gossamer("report", str(running), "--cdx", timeout=60)
    assert res.returncode == 2
    assert "a crawler is running in" in res.stderr and res.stderr.startswith("gossamer: error:")
    assert not (running / "warc" / "index.cdxj").exists()


def test_an_index_that_cannot_be_written_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], human_logs: None
) -> None:
    """The end of a crawl and `report --cdx`: exit 74 (IOERR) with one error line that says
    how to go on; the WARC files are untouched. (`warc/cdx` is a file here, so the index's
    directory cannot be made: as root, permissions would not stop the write.)"""
    out = tmp_path / "crawl"
    warc_dir = out / "warc"
    with WarcWriter(warc_dir, prefix="w") as w:
        w.write_exchange("http://a.example/", None, b"GET / HTTP/1.1\r\n\r\n",
                         b"HTTP/1.1 200 OK\r\n\r\n", b"hello", time.time())  # fmt: skip
    (out / "crawl.json").write_text("{}")
    (warc_dir / "cdx").write_text("in the way")
    warcs = {p.name: p.read_bytes() for p in warc_dir.iterdir()}

    assert write_cdx_index(out, 0) == 74
    err = capsys.readouterr().err
    assert err.startswith(f"gossamer: error: cannot write the CDX index in {warc_dir}")
    assert f"`gossamer report {out} --cdx` once that is fixed" in err
    assert len(err.strip().splitlines()) == 1
    assert write_cdx_index(out, 130) == 130  # a stopped crawl keeps its own status
    capsys.readouterr()

    res = gossamer("report", str(out), "--cdx", timeout=60)
    assert res.returncode == 74
    assert res.stderr.startswith(f"gossamer: error: cannot write the CDX index in {warc_dir}")
    assert len(res.stderr.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in warc_dir.iterdir()} == warcs

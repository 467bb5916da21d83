"""WarcWriter and recover: record contents, digests, rotation, and crash safety (kills at any
byte, a real SIGKILLed writer, a full disk), validated by warcio and fastwarc and by a strict
reader of our own (both `check` tools accept a gzip WARC cut in the middle of a record)."""

from __future__ import annotations

import base64
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

import gossamer.sinks.warc as warc_mod
from gossamer.sinks import WarcWriter, recover

BIN = Path(sys.executable).parent
REQ = (
    b"GET /page HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: gossamer/0.1\r\n"
    b"Accept-Encoding: gzip\r\n\r\n"
)
BODY = (
    b"<html><head><title>t</title></head><body>"
    + b"<p>words words words</p>" * 300
    + b"</body></html>"
)


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def response_head(*extra: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", "Content-Type: text/html; charset=utf-8", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def assert_valid(files: list[Path]) -> None:
    """warcio check and fastwarc check (block and payload digests) pass on every file."""
    assert files
    res = run_tool(str(BIN / "warcio"), "check", *map(str, files))
    assert res.returncode == 0, res.stdout + res.stderr
    if (BIN / "fastwarc").exists():
        for f in files:
            res = run_tool(str(BIN / "fastwarc"), "check", "--verify-payloads", "--quiet", str(f))
            assert res.returncode == 0, res.stdout + res.stderr


def strict_records(path: Path) -> list[bytes]:
    """Every record of a WARC file; fails unless the file is whole records, nothing else."""
    data = path.read_bytes()
    records = []
    if path.name.endswith(".gz"):
        while data:
            d = zlib.decompressobj(wbits=31)
            record = d.decompress(data)
            assert d.eof, f"{path.name}: truncated gzip member"
            records.append(record)
            data = d.unused_data
    else:
        while data:
            head_end = data.index(b"\r\n\r\n")
            m = re.search(rb"Content-Length: (\d+)", data[:head_end])
            assert m is not None
            end = head_end + 4 + int(m.group(1)) + 4
            assert len(data) >= end, f"{path.name}: truncated record"
            records.append(data[:end])
            data = data[end:]
    for record in records:
        head, _, rest = record.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
        assert len(rest) == length + 4 and rest.endswith(b"\r\n\r\n")
    return records


def read_all(directory: Path) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for path in sorted(directory.glob("*.warc*")):
        with open(path, "rb") as f:
            out.extend(
                {
                    "file": path.name,
                    "type": rec.rec_type,
                    "headers": dict(rec.rec_headers.headers),
                    "http": rec.http_headers,
                    "payload": rec.content_stream().read(),
                }
                for rec in ArchiveIterator(f)
            )
    return out


# ------------------------------------------------------------------ contents


def test_records_headers_digests_and_payloads(tmp_path: Path) -> None:
    fetched = 1_790_000_000.5
    with WarcWriter(tmp_path, warcinfo={"operator": "tests", "robots": "obey"}) as w:
        loc = w.write_exchange(
            "http://www.example.com/page", "127.1.0.5", REQ, response_head(), BODY, fetched
        )
    files = sorted(tmp_path.glob("*.warc.gz"))
    assert [f.name for f in files] == [loc.filename]
    assert re.fullmatch(r"gossamer-\d{17}-00000\.warc\.gz", loc.filename)
    assert_valid(files)
    assert len(strict_records(files[0])) == 3
    info, resp, req = read_all(tmp_path)
    assert (info["type"], resp["type"], req["type"]) == ("warcinfo", "response", "request")
    ih, rh, qh = info["headers"], resp["headers"], req["headers"]
    assert isinstance(ih, dict) and isinstance(rh, dict) and isinstance(qh, dict)
    assert ih["WARC-Filename"] == loc.filename
    payload = info["payload"]
    assert isinstance(payload, bytes)
    assert b"operator: tests\r\n" in payload and b"format: WARC File Format 1.1" in payload
    for h in (rh, qh):
        assert h["WARC-Target-URI"] == "http://www.example.com/page"
        assert h["WARC-IP-Address"] == "127.1.0.5"
        assert h["WARC-Date"] == time.strftime("%Y-%m-%dT%H:%M:%S.500000Z", time.gmtime(fetched))
        assert h["WARC-Warcinfo-ID"] == ih["WARC-Record-ID"]
    assert rh["WARC-Concurrent-To"] == qh["WARC-Record-ID"]
    assert qh["WARC-Concurrent-To"] == rh["WARC-Record-ID"]
    assert rh["Content-Type"] == "application/http;msgtype=response"
    assert qh["Content-Type"] == "application/http;msgtype=request"
    assert rh["WARC-Payload-Digest"] == sha1_b32(BODY)
    assert rh["WARC-Block-Digest"] == sha1_b32(response_head() + BODY)
    assert qh["WARC-Block-Digest"] == sha1_b32(REQ)
    assert "WARC-Truncated" not in rh
    assert resp["payload"] == BODY
    # the returned location points at the response record's gzip member
    with open(files[0], "rb") as f:
        f.seek(loc.offset)
        member = f.read(loc.length)
    record = zlib.decompress(member, wbits=31)
    assert record.startswith(b"WARC/1.1\r\nWARC-Type: response\r\n") and record.endswith(
        BODY + b"\r\n\r\n"
    )


def test_decoded_bodies_get_truthful_headers(tmp_path: Path) -> None:
    encoded = response_head(
        "Content-Encoding: gzip", "Content-Length: 812", "Vary: Accept-Encoding"
    )
    chunked = response_head("Transfer-Encoding: chunked")
    with WarcWriter(tmp_path) as w:
        w.write_exchange("http://a.example/1", "127.0.0.1", REQ, encoded, BODY, time.time())
        w.write_exchange("http://a.example/2", "127.0.0.1", REQ, chunked, BODY, time.time())
        w.write_exchange(
            "http://a.example/3",
            "127.0.0.1",
            REQ,
            encoded,
            b"\x1f\x8braw",
            time.time(),
            decoded=False,
        )
        w.write_exchange(
            "http://a.example/4",
            "127.0.0.1",
            REQ,
            response_head("Content-Length: 9"),
            b"123456789",
            time.time(),
        )
    assert_valid(sorted(tmp_path.glob("*.warc.gz")))
    responses = [r for r in read_all(tmp_path) if r["type"] == "response"]
    http = [r["http"] for r in responses]
    first = http[0]
    assert first.get_header("Content-Encoding") is None  # type: ignore[union-attr]
    assert first.get_header("X-Crawler-Content-Encoding") == "gzip"  # type: ignore[union-attr]
    assert first.get_header("X-Crawler-Content-Length") == "812"  # type: ignore[union-attr]
    assert first.get_header("Content-Length") == str(len(BODY))  # type: ignore[union-attr]
    assert first.get_header("Vary") == "Accept-Encoding"  # type: ignore[union-attr]
    assert http[1].get_header("Transfer-Encoding") is None  # type: ignore[union-attr]
    assert http[1].get_header("X-Crawler-Transfer-Encoding") == "chunked"  # type: ignore[union-attr]
    assert http[2].get_header("Content-Encoding") == "gzip"  # type: ignore[union-attr]
    assert http[3].get_header("Content-Length") == "9"  # untouched: nothing was decoded
    assert [r["payload"] for r in responses] == [BODY, BODY, b"\x1f\x8braw", b"123456789"]


def test_truncation_odd_heads_and_hostile_urls(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, gzip=False) as w:
        w.write_exchange(
            "http://a.example/big",
            None,
            REQ,
            b"HTTP/1.1 200 OK\nContent-Length: 99999999\n",
            BODY,
            time.time(),
            truncated=True,
        )
        w.write_exchange(
            "http://a.example/slow",
            "127.0.0.1",
            REQ,
            response_head(),
            BODY[:10],
            time.time(),
            truncated="time",
        )
        w.write_exchange(
            "http://a.example/x\r\nWARC-Type: forged",
            "127.0.0.1",
            REQ,
            response_head(),
            b"",
            time.time(),
        )
        w.write_exchange(
            "http://a.example/304",
            "127.0.0.1",
            REQ,
            response_head(status="304 Not Modified"),
            b"",
            time.time(),
        )
    files = sorted(tmp_path.glob("*.warc"))
    assert len(files) == 1
    assert_valid(files)
    assert len(strict_records(files[0])) == 9
    responses = [r for r in read_all(tmp_path) if r["type"] == "response"]
    heads = [r["headers"] for r in responses]
    assert heads[0]["WARC-Truncated"] == "length" and "WARC-IP-Address" not in heads[0]  # type: ignore[index,operator]
    assert heads[1]["WARC-Truncated"] == "time"  # type: ignore[index]
    assert heads[2]["WARC-Target-URI"] == "http://a.example/x%0D%0AWARC-Type:%20forged"  # type: ignore[index]
    assert responses[0]["http"].get_header("Content-Length") == "99999999"  # type: ignore[union-attr]
    assert responses[3]["http"].get_statuscode() == "304"  # type: ignore[union-attr]


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="prefix"):
        WarcWriter(tmp_path, prefix="a/b")
    with pytest.raises(ValueError, match="max_bytes"):
        WarcWriter(tmp_path, max_bytes=0)
    w = WarcWriter(tmp_path)
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        w.write_exchange("http://a.example/", None, REQ, response_head(), b"", time.time())
    assert not list(tmp_path.iterdir())  # no file before the first record


# ------------------------------------------------------------------ rotation


def test_rotation_by_size_and_sequence_continues(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="crawl-w1", max_bytes=4000) as w:
        locations = [
            w.write_exchange(
                f"http://a.example/{i}", "127.0.0.1", REQ, response_head(), BODY, time.time()
            )
            for i in range(12)
        ]
        stats = w.statistics()
    files = sorted(tmp_path.glob("*.warc.gz"), key=lambda p: p.name[-13:])
    assert stats.files == len(files) >= 3 and stats.exchanges == 12
    assert stats.records == 12 * 2 + stats.files
    # A file is closed once it reaches max_bytes: every exchange starts below the limit, and
    # every file but the last reached it. (How far the last exchange goes past the limit
    # depends on how its random record ids compress: no fixed bound on the size.)
    assert all(loc.offset < 4000 for loc in locations)
    for f in files:
        records = strict_records(f)
        assert b"WARC-Type: warcinfo" in records[0]
    assert all(f.stat().st_size >= 4000 for f in files[:-1])
    assert {loc.filename for loc in locations} == {f.name for f in files}
    assert_valid(files)
    seqs = [int(f.name[-13:-8]) for f in files]
    assert seqs == list(range(len(files)))
    with WarcWriter(tmp_path, prefix="crawl-w1") as again:
        loc = again.write_exchange(
            "http://a.example/z", None, REQ, response_head(), b"", time.time()
        )
    assert loc.filename.endswith(f"-{len(files):05d}.warc.gz")
    with WarcWriter(tmp_path, prefix="crawl-w2") as other:  # other prefixes count on their own
        loc = other.write_exchange(
            "http://a.example/z", None, REQ, response_head(), b"", time.time()
        )
    assert loc.filename.endswith("-00000.warc.gz")
    urls = [r["headers"]["WARC-Target-URI"] for r in read_all(tmp_path) if r["type"] == "response"]  # type: ignore[index]
    assert sorted(urls) == sorted(
        [f"http://a.example/{i}" for i in range(12)] + ["http://a.example/z"] * 2
    )


# ------------------------------------------------------------------ crash safety


def _unclosed_writer(directory: Path, exchanges: int, gzip: bool = True) -> Path:
    """Write exchanges and 'die' without closing: the .open file is left behind."""
    w = WarcWriter(directory, gzip=gzip)
    for i in range(exchanges):
        w.write_exchange(
            f"http://a.example/{i}",
            "127.0.0.1",
            REQ,
            response_head(),
            BODY[: 200 + 97 * i],
            time.time(),
        )
    (path,) = directory.glob("*.open")
    return path


@pytest.mark.parametrize("gzip", [True, False])
def test_recover_after_a_cut_at_any_point(tmp_path: Path, gzip: bool) -> None:
    """Cut the unclosed file at many offsets (inside headers, bodies, gzip trailers, exactly
    at boundaries): recover keeps every whole record before the cut and nothing else."""
    src = _unclosed_writer(tmp_path / "src", 6, gzip=gzip)
    data = src.read_bytes()
    members = strict_records_from_bytes(data, gzip)
    bounds = [0]
    for size in members:
        bounds.append(bounds[-1] + size)
    rng = random.Random(7)
    cuts = sorted(
        {*bounds, *(b + d for b in bounds for d in (-1, 1, 10)), *rng.sample(range(len(data)), 25)}
    )
    for cut in cuts:
        if not 0 <= cut <= len(data):
            continue
        d = tmp_path / f"cut-{cut}"
        d.mkdir()
        victim = d / src.name
        victim.write_bytes(data[:cut])
        report = recover(d)
        whole = max(i for i, b in enumerate(bounds) if b <= cut)  # records entirely before the cut
        if whole <= 1:  # nothing, or only the warcinfo
            assert report.deleted == (src.name,) and not list(d.iterdir())
            continue
        final = d / src.name.removesuffix(".open")
        assert report.recovered == (final.name,) and report.records == whole
        assert report.bytes_dropped == cut - bounds[whole]
        assert final.read_bytes() == data[: bounds[whole]]
        assert len(strict_records(final)) == whole
        assert not list(d.glob("*.open"))
    assert_valid(_recovered_samples(tmp_path))


def strict_records_from_bytes(data: bytes, gzip: bool) -> list[int]:
    """Byte sizes of the records (gzip members) of a whole file."""
    sizes = []
    while data:
        if gzip:
            d = zlib.decompressobj(wbits=31)
            d.decompress(data)
            assert d.eof
            size = len(data) - len(d.unused_data)
        else:
            head_end = data.index(b"\r\n\r\n")
            length = int(re.search(rb"Content-Length: (\d+)", data[:head_end]).group(1))  # type: ignore[union-attr]
            size = head_end + 4 + length + 4
        sizes.append(size)
        data = data[size:]
    return sizes


def _recovered_samples(root: Path) -> list[Path]:
    found = sorted(p for p in root.glob("cut-*/*.warc*"))
    return found[:: max(1, len(found) // 3)]


def test_recover_leaves_closed_files_alone_and_handles_empty_ones(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="done") as w:
        w.write_exchange("http://a.example/", None, REQ, response_head(), BODY, time.time())
    closed = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    (tmp_path / "gossamer-20260101000000000-00000.warc.gz.open").write_bytes(b"")
    (tmp_path / "gossamer-20260101000000000-00001.warc.gz.open").write_bytes(b"\x1f\x8b\x08garbage")
    report = recover(tmp_path)
    assert sorted(report.deleted) == [
        "gossamer-20260101000000000-00000.warc.gz.open",
        "gossamer-20260101000000000-00001.warc.gz.open",
    ]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == closed
    assert recover(tmp_path).recovered == ()


def test_disk_full_rolls_back_to_the_last_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = WarcWriter(tmp_path)
    w.write_exchange("http://a.example/1", None, REQ, response_head(), BODY, time.time())
    (path,) = tmp_path.glob("*.open")
    size = path.stat().st_size
    real_write = os.write

    def half_then_enospc(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 100:
            real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(warc_mod.os, "write", half_then_enospc)
    with pytest.raises(OSError, match="No space"):
        w.write_exchange("http://a.example/2", None, REQ, response_head(), BODY, time.time())
    assert path.stat().st_size == size  # the partial member is gone
    monkeypatch.setattr(warc_mod.os, "write", real_write)
    w.write_exchange("http://a.example/3", None, REQ, response_head(), BODY, time.time())
    w.close()
    files = sorted(tmp_path.glob("*.warc.gz"))
    assert_valid(files)
    uris = [r["headers"]["WARC-Target-URI"] for r in read_all(tmp_path) if r["type"] == "response"]  # type: ignore[index]
    assert uris == ["http://a.example/1", "http://a.example/3"]


_KILLED_WRITER = textwrap.dedent(
    """
    import random, sys, time
    from gossamer.sinks import WarcWriter
    w = WarcWriter(sys.argv[1], max_bytes=600_000)
    body = random.randbytes(4000)
    req = b"GET / HTTP/1.1\\r\\nHost: a.example\\r\\n\\r\\n"
    head = b"HTTP/1.1 200 OK\\r\\nContent-Type: text/html\\r\\n\\r\\n"
    i = 0
    while True:
        url = f"http://a.example/{i}"
        w.write_exchange(url, "127.0.0.1", req, head, body + str(i).encode(), time.time())
        print(i, flush=True)
        i += 1
    """
)


@pytest.mark.slow
def test_sigkilled_writer_loses_nothing_it_wrote(tmp_path: Path) -> None:
    """A real process writing as fast as it can is SIGKILLed at random moments; after
    recover every exchange it reported as written is in valid WARC files."""
    rng = random.Random(3)
    reported: set[int] = set()
    for round_ in range(3):
        out = tmp_path / f"round{round_}"
        with subprocess.Popen(
            [sys.executable, "-c", _KILLED_WRITER, str(out)], stdout=subprocess.PIPE, text=True
        ) as proc:
            assert proc.stdout is not None
            deadline = time.monotonic() + 20
            target = rng.randrange(160, 400)
            last = -1
            for line in proc.stdout:
                last = int(line)
                if last >= target or time.monotonic() > deadline:
                    break
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        reported = set(range(last + 1))
        recover(out)
        files = sorted(out.glob("*.warc.gz"))
        assert not list(out.glob("*.open"))
        assert len(files) >= 2  # it rotated at least once
        assert_valid(files)
        written = set()
        for f in files:
            for record in strict_records(f):
                m = re.search(
                    rb"WARC-Type: response\r\n.*?WARC-Target-URI: http://a.example/(\d+)",
                    record,
                    re.S,
                )
                if m:
                    written.add(int(m.group(1)))
        assert reported <= written
        assert written == set(range(max(written) + 1))  # no hole: every record up to the kill
        shutil.rmtree(out)


# ------------------------------------------------------------------ fast helpers


def test_record_ids_are_unique_version_4_uuids(tmp_path: Path) -> None:
    import uuid

    ids = warc_mod._record_ids() + warc_mod._record_ids()
    assert len(ids) == 512 and len(set(ids)) == 512
    for rid in ids:
        assert rid.startswith(b"<urn:uuid:") and rid.endswith(b">")
        u = uuid.UUID(rid[10:-1].decode())
        assert u.version == 4 and u.variant == uuid.RFC_4122
        assert str(u).encode() == rid[10:-1]  # canonical form: lower case, dashes in place
    w = WarcWriter(tmp_path)
    drawn = {w._record_id() for _ in range(600)}  # refills its pool of 256 as it goes
    assert len(drawn) == 600


def test_base32_digest_matches_base64_module() -> None:
    rng = random.Random(4)
    for _ in range(2000):
        digest = rng.randbytes(20)
        assert warc_mod._b32(digest) == base64.b32encode(digest)
    assert warc_mod._digest(b"abc", b"def") == b"sha1:" + base64.b32encode(
        hashlib.sha1(b"abcdef").digest()
    )


def test_warc_date_equals_datetime_formatting() -> None:
    import datetime as dt

    rng = random.Random(6)
    stamps = [0.0, 1.0, 0.9999995, 1_790_000_000.9999995, 1_790_000_000.0000005, 2**31 + 0.25]
    stamps += [rng.uniform(0, 4.1e9) for _ in range(20_000)]
    stamps += [1.79e9 + k * 1e-6 + rng.choice((0.0, 5e-7, 4.999e-7)) for k in range(20_000)]
    for ts in stamps:
        old = dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert warc_mod._warc_date(ts) == old.encode(), ts


def test_identical_payload_is_an_identical_payload_digest_revisit(tmp_path: Path) -> None:
    """WARC 1.1 §6.7.2: the HTTP head kept (decoded-body renames included), no payload, the
    payload digest given, the first capture's URI and WARC-Date; valid for both checkers."""
    head = response_head("Content-Encoding: gzip", "Content-Length: 123")
    first_at, again_at = 1_790_000_000.25, 1_790_000_100.5
    with WarcWriter(tmp_path) as w:
        w.write_exchange("http://www.example.com/a", "127.1.0.5", REQ, head, BODY, first_at)
        w.write_exchange(
            "http://www.example.com/b", "127.1.0.5", REQ, head, BODY, again_at,
            payload_sha1=hashlib.sha1(BODY).digest(),
            identical_to=("http://www.example.com/a", first_at),
        )  # fmt: skip
        w.write_exchange(  # the digest computed when not given
            "http://www.example.com/c", None, REQ, head, BODY, again_at,
            identical_to=("http://www.example.com/a", first_at),
        )
    files = sorted(tmp_path.glob("*.warc.gz"))
    # warcio checks every block digest (a revisit's payload digest is the original's: "not
    # checked"); fastwarc's --verify-payloads would hash the absent payload, so block only
    res = run_tool(str(BIN / "warcio"), "check", "-v", *map(str, files))
    assert res.returncode == 0 and "not checked (revisit)" in res.stdout, res.stdout
    if (BIN / "fastwarc").exists():
        res = run_tool(str(BIN / "fastwarc"), "check", "--quiet", *map(str, files))
        assert res.returncode == 0, res.stdout + res.stderr
    _, resp, _, rev, req, rev2, _ = read_all(tmp_path)
    assert (resp["type"], rev["type"], req["type"]) == ("response", "revisit", "request")
    h, r = rev["headers"], resp["headers"]
    assert isinstance(h, dict) and isinstance(r, dict)
    assert h["WARC-Profile"] == (
        "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    )
    assert h["WARC-Refers-To-Target-URI"] == "http://www.example.com/a"
    assert h["WARC-Refers-To-Date"] == r["WARC-Date"]  # the first capture's, to the µs
    assert h["WARC-Payload-Digest"] == r["WARC-Payload-Digest"] == sha1_b32(BODY)
    assert rev2["headers"]["WARC-Payload-Digest"] == sha1_b32(BODY)  # type: ignore[index]
    # the block: the response's head as the response record stored it, and nothing else
    stored_head = resp["http"].to_str().encode() + b"\r\n"  # type: ignore[attr-defined]
    assert rev["http"].to_str().encode() + b"\r\n" == stored_head  # type: ignore[attr-defined]
    assert rev["payload"] == b"" and resp["payload"] == BODY
    assert int(h["Content-Length"]) == len(stored_head)
    assert h["WARC-Block-Digest"] == sha1_b32(stored_head)
    assert rev["http"].get_header("X-Crawler-Content-Encoding") == "gzip"  # type: ignore[attr-defined]
    assert h["WARC-Concurrent-To"] == req["headers"]["WARC-Record-ID"]  # type: ignore[index]
    assert "WARC-Truncated" not in h


def test_not_modified_is_a_server_not_modified_revisit(tmp_path: Path) -> None:
    """A 304 to a conditional GET (`--recrawl`): a revisit record, valid for both checkers."""
    head = b'HTTP/1.1 304 Not Modified\r\nETag: "abc"\r\nLast-Modified: x\r\n\r\n'
    with WarcWriter(tmp_path) as w:
        w.write_exchange(
            "http://www.example.com/same",
            "127.1.0.5",
            REQ,
            head,
            b"",
            1_790_000_000.5,
            revisit=True,
            refers_to_date="2026-11-20T10:15:02.123456Z",
        )
        w.write_exchange("http://www.example.com/nodate", None, REQ, head, b"", 1.0, revisit=True)
    files = sorted(tmp_path.glob("*.warc.gz"))
    assert_valid(files)
    assert len(strict_records(files[0])) == 5
    _, rev, req, rev2, _ = read_all(tmp_path)
    assert (rev["type"], req["type"], rev2["type"]) == ("revisit", "request", "revisit")
    h, h2 = rev["headers"], rev2["headers"]
    assert isinstance(h, dict) and isinstance(h2, dict)
    assert h["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    assert h["WARC-Refers-To-Target-URI"] == "http://www.example.com/same"
    assert h["WARC-Refers-To-Date"] == "2026-11-20T10:15:02.123456Z"
    assert "WARC-Refers-To-Date" not in h2 and "WARC-Payload-Digest" not in h
    assert h["WARC-Block-Digest"] == sha1_b32(head)
    assert rev["http"].get_statuscode() == "304"  # type: ignore[attr-defined]
    assert h["WARC-Concurrent-To"] == req["headers"]["WARC-Record-ID"]  # type: ignore[index]

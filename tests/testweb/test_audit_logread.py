"""Reading request logs: the server's own format (through its writer) and nginx's."""

from __future__ import annotations

from pathlib import Path

import pytest
from _logfiles import write_log

from gossamer.testweb import WebSpec
from gossamer.testweb._logread import (
    LogRecord,
    expand_log_paths,
    format_record,
    read_log,
    read_logs,
)

SPEC = WebSpec(seed=2, hosts=10, pages_mean=5)


def rec(start: int, **kw: object) -> LogRecord:
    base: dict[str, object] = {
        "start_us": start,
        "end_us": start + 500,
        "conn": "7-1",
        "ip": "127.1.0.1",
        "host": "www.h0.example",
        "method": "GET",
        "target": "/",
        "status": 200,
        "bytes": 1234,
        "outcome": "ok",
        "ua": "gossamer/0.1",
    }
    base.update(kw)
    return LogRecord(**base)  # type: ignore[arg-type]


def write(path: Path, records: list[LogRecord], spec: WebSpec = SPEC) -> Path:
    return write_log(path, spec, records)


def test_server_log_round_trip(tmp_path: Path) -> None:
    odd = rec(
        10,
        ua="we\tird\\agent\r\nX-Injected: 1",
        ims="Thu, 01 Jan 2026 00:00:00 GMT",
        inm='"abc"',
        ae="gzip, deflate",
        target="/a b?q=1\t2",
    )
    records = [rec(5), odd, rec(20, host="", status=0, outcome="hang", ua="")]
    log = write(tmp_path / "web.log", records)
    spec, got, malformed, fmt = read_log(log)
    assert spec == SPEC and fmt == "server" and malformed == 0
    assert got == records
    assert format_record(odd).count("\t") == 13


def test_torn_and_bad_lines_are_counted(tmp_path: Path) -> None:
    log = write(tmp_path / "web.log", [rec(1), rec(2)])
    with log.open("a") as f:
        f.write("3\t4\tbad\n")
        f.write("x\t4\t1-1\t127.0.0.1\th\tGET\t/\t200\t1\tok\t-\t-\t-\t-\n")
        f.write(format_record(rec(5)).replace("\tok\t", "\tweird\t") + "\n")
        f.write(format_record(rec(9))[:20])  # a torn last line (server killed mid-write)
    logs = read_logs([log])
    assert len(logs.records) == 2
    assert logs.malformed == 4


def test_header_checks(tmp_path: Path) -> None:
    bad = tmp_path / "v2.log"
    bad.write_text(f"#gossamer-testweb-log\tv2\t{SPEC.to_json()}\n")
    with pytest.raises(ValueError, match="v1"):
        read_logs([bad])
    junk = tmp_path / "junk.log"
    junk.write_text('#gossamer-testweb-log\tv1\t{"hosts": -5}\n')
    with pytest.raises(ValueError, match="spec"):
        read_logs([junk])
    a = write(tmp_path / "a.log", [rec(1)])
    b = write(tmp_path / "b.log", [rec(2)], WebSpec(seed=3, hosts=10, pages_mean=5))
    with pytest.raises(ValueError, match="differs"):
        read_logs([a, b])
    with pytest.raises(ValueError, match="cannot read"):
        read_logs([tmp_path / "nothing.log"])


def test_multi_process_logs_merge_by_time(tmp_path: Path) -> None:
    base = tmp_path / "web.log"
    write(tmp_path / "web.log.0", [rec(1, conn="1-1"), rec(30, conn="1-2")])
    write(tmp_path / "web.log.1", [rec(2, conn="2-1"), rec(25, conn="2-2")])
    write(tmp_path / "web.log.10", [rec(3, conn="3-1")])
    (tmp_path / "web.log.old").write_text("not a part\n")
    assert [p.name for p in expand_log_paths([base])] == ["web.log.0", "web.log.1", "web.log.10"]
    logs = read_logs([base])
    assert [r.conn for r in logs.records] == ["1-1", "2-1", "3-1", "2-2", "1-2"]
    assert logs.spec == SPEC
    assert len(logs.files) == 3
    # the base file itself is read too when it exists, and given paths are not repeated
    write(base, [rec(4, conn="0-1")])
    again = read_logs([base, tmp_path / "web.log.1"])
    assert len(again.files) == 4
    assert [r.conn for r in again.records][:4] == ["1-1", "2-1", "3-1", "0-1"]


def test_nginx_log(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text(
        "1800000000.250\t0.050\t17\t127.1.0.2\twww.h1.example\tGET\t/news/page-3.html\t200"
        "\t15500\tgossamer/0.1 (+http://x)\t-\t-\n"
        "1800000000.400\t0.000\t17\t127.1.0.2\tWWW.H1.EXAMPLE\tGET\t/caf\\xC3\\xA9\t499\t0"
        '\tMozilla \\x22quoted\\x22\tThu, 01 Jan 2026 00:00:00 GMT\t"e1"\n'
        "garbage line\n"
    )
    logs = read_logs([log])
    assert logs.spec is None and logs.formats == ("nginx",) and logs.malformed == 1
    first, second = logs.records
    assert first.end_us == 1_800_000_000_250_000
    assert first.start_us == 1_800_000_000_200_000
    assert (first.conn, first.ip, first.host, first.status, first.outcome) == (
        "nginx-17",
        "127.1.0.2",
        "www.h1.example",
        200,
        "ok",
    )
    assert first.ua == "gossamer/0.1 (+http://x)" and first.ims == "" and first.inm == ""
    assert second.host == "www.h1.example"
    assert second.target == "/café"
    assert second.outcome == "aborted"
    assert second.ua == 'Mozilla "quoted"'
    assert second.inm == '"e1"'

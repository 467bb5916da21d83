"""The machine list (runner/machines.py): its lines, its errors, how workers are spread."""

from __future__ import annotations

import io
import os
import signal
import threading
from pathlib import Path

import pytest

from gossamer.runner.machines import (
    Machine,
    Probe,
    machine_list,
    parse_machines,
    read_machines,
    read_url,
    spread,
    ssh_argv,
)


def test_lines_comments_and_fields() -> None:
    machines = parse_machines(
        "# machines\n"
        "\n"
        "crawler@10.0.0.11\n"
        "10.0.0.12:2222  workers=8   # a comment\n"
        "root@[::1]:22 out=/data/crawl workers=0\n"
    )
    assert machines == [
        Machine("10.0.0.11", "crawler"),
        Machine("10.0.0.12", None, 2222, 8),
        Machine("[::1]", "root", 22, 0, "/data/crawl"),
    ]
    assert [m.name for m in machines] == ["crawler@10.0.0.11", "10.0.0.12:2222", "root@[::1]:22"]
    assert machines[2].destination == "root@::1"
    # written back as a list's lines (what a crawl keeps of it), read back the same
    assert machine_list(machines) == (
        "crawler@10.0.0.11\n10.0.0.12:2222 workers=8\nroot@[::1]:22 workers=0 out=/data/crawl\n"
    )
    assert parse_machines(machine_list(machines)) == machines


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a:99999\n", "machines, line 1: port 99999 is not 1 to 65535"),
        ("a\nb workers=x\n", "machines, line 2: 'workers=x': expected workers=N or out=DIR"),
        ("a\nb cores=2\n", "machines, line 2: 'cores=2': expected workers=N or out=DIR"),
        ("a@b@c\n", "machines, line 1: 'a@b@c' is not [user@]host[:port]"),
        ("a\n# b\na\n", "machines: a is listed twice"),
        ("# nothing\n\n", "machines: no machine"),
    ],
)
def test_bad_lines_name_the_line(text: str, said: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_machines(text)
    assert str(err.value).startswith(said), str(err.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"machine list {tmp_path / 'none'}: "):
        read_machines(tmp_path / "none")


def _probes(*lines: str, cores: int = 4) -> list[Probe]:
    return [Probe(m, "0", cores) for m in parse_machines("\n".join(lines))]


def test_spread_evenly_by_lines_and_by_cores() -> None:
    assert spread(5, _probes("a", "b")) == [3, 2]
    assert spread(7, _probes("a workers=3", "b", "c")) == [3, 2, 2]
    assert spread(None, _probes("a workers=1", "b", cores=6)) == [1, 6]
    assert spread(3, _probes("a workers=3", "b")) == [3, 0]
    with pytest.raises(ValueError, match="fewer than the machine list's workers=N"):
        spread(2, _probes("a workers=3", "b"))
    with pytest.raises(ValueError, match="every machine has its workers=N"):
        spread(5, _probes("a workers=3", "b workers=1"))


def test_ssh_command_line() -> None:
    (m,) = parse_machines("me@h:2222")
    assert ssh_argv("ssh -F '/my dir/cfg'", m, "gossamer --version") == [
        "ssh", "-F", "/my dir/cfg", "-o", "BatchMode=yes", "-p", "2222", "--", "me@h",
        "gossamer --version",
    ]  # fmt: skip


def test_the_url_and_password_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    # (recorded as absent first: read_url sets it outside monkeypatch, and the delenv below
    # would otherwise restore its value, "secret", for every later test of the session)
    monkeypatch.setenv("REDISCLI_AUTH", "")
    monkeypatch.delenv("REDISCLI_AUTH")
    assert read_url(io.StringIO("redis://h:6379/0\nsecret\nstop\n")) == "redis://h:6379/0"
    assert os.environ["REDISCLI_AUTH"] == "secret"
    monkeypatch.delenv("REDISCLI_AUTH")
    assert read_url(io.StringIO("redis://:pw@h:6379/0\n\n")) == "redis://:pw@h:6379/0"
    assert "REDISCLI_AUTH" not in os.environ


def test_a_stop_line_is_a_sigterm() -> None:
    """watch_control: a `stop` line sends this process SIGTERM (caught here)."""
    from gossamer.runner.machines import watch_control

    got = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: got.set())
    r, w = os.pipe()
    try:
        with os.fdopen(r) as reading, os.fdopen(w, "w") as writing:
            watch_control(reading)
            writing.write("stop\n")
            writing.flush()
            assert got.wait(10)
            got.clear()
        # the pipe closed (its end read): SIGTERM again
        assert got.wait(10)
    finally:
        signal.signal(signal.SIGTERM, previous)

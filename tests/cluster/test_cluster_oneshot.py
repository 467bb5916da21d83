"""The one-shot cluster commands (`status`, `stop`, `workers --scale`): what `status` says in
words, and a Redis that accepts connections and never answers (a plain socket server here)
ending them with one error line and a non-zero exit instead of a hang."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gossamer.cluster import control
from gossamer.cluster.control import format_status, status_main, stop_main, workers_main
from gossamer.exitcodes import Exit


def _status_data(*, max_pages: int | None, published: int) -> dict[str, Any]:
    return {
        "crawl": {
            "id": "c1", "state": "running", "partition": {"name": "dynamic"},
            "created": 0.0, "max_pages": max_pages, "heartbeat_ttl": 5.0,
        },
        "frontier": {
            "queued": 10, "leased": 2, "done": published - 2, "failed": 0, "hosts": 3,
            "ready_hosts": 1, "leased_hosts": 1, "dead_hosts": 0, "published": published,
            "seen_false_positives": 0,
        },
        "totals": {"workers": 0, "pages_per_s": 0.0, "pages_per_s_since_start": 0.0},
        "workers": [],
        "server_time": 10.0,
    }  # fmt: skip


def test_status_says_what_counts_against_max_pages() -> None:
    text = format_status(_status_data(max_pages=900, published=102))
    assert "published" not in text  # the frontier's word, not the user's
    assert "max pages 900 (102 done or being fetched)" in text, text
    assert "max pages" not in format_status(_status_data(max_pages=None, published=102))


# ------------------------------------------------------------ a Redis that never answers

_INFO = b"# Cluster\r\ncluster_enabled:0\r\n"
# redis-py's handshake: HELLO 3 (RESP3, redis-py >= 8) and CLIENT SETINFO
_HANDSHAKE = {b"HELLO": b"%2\r\n+server\r\n+redis\r\n+proto\r\n:3\r\n", b"CLIENT": b"+OK\r\n"}
# what the server answers before it falls silent: nothing at all; the handshake; the
# handshake and the INFO gossamer connects with, then no command
_ANSWERS = {"nothing": {}, "handshake": _HANDSHAKE,
            "connect": {**_HANDSHAKE, b"INFO": b"$%d\r\n%s\r\n" % (len(_INFO), _INFO)}}  # fmt: skip


def _commands(buf: bytes) -> tuple[list[bytes], bytes]:
    """The names of the whole RESP commands at the start of `buf`, and what is left."""
    names = []
    while buf.startswith(b"*"):
        head, sep, rest = buf.partition(b"\r\n")
        args = []
        for _ in range(int(head[1:]) if sep else 0):
            size, sep, rest = rest.partition(b"\r\n")
            if not sep or len(rest) < int(size[1:]) + 2:
                return names, buf
            args.append(rest[: int(size[1:])])
            rest = rest[int(size[1:]) + 2 :]
        if not sep:
            return names, buf
        names.append(args[0].upper())
        buf = rest
    return names, buf


@pytest.fixture(params=list(_ANSWERS))
def silent_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """redis://… of a plain socket server that accepts every connection, answers what
    _ANSWERS[param] says and nothing more (a hung Redis); closed at the end, which wakes
    anyone still reading."""
    answers = _ANSWERS[request.param]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []

    def serve(conn: socket.socket) -> None:
        buf = b""
        silent = False
        with contextlib.suppress(OSError):
            while data := conn.recv(65536):
                names, buf = _commands(buf + data)
                for name in names:
                    silent = silent or name not in answers
                    if not silent:
                        conn.sendall(answers[name])

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    finally:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)  # wakes accept() (close alone does not)
        server.close()
        for conn in accepted:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        thread.join(5)


@pytest.mark.parametrize(
    "command",
    [
        lambda url: status_main(url, None),
        lambda url: stop_main(url, None),
        lambda url: workers_main(url, None, 1, out=Path("unused")),
    ],
    ids=["status", "stop", "workers --scale"],
)
def test_a_silent_redis_ends_a_one_shot_command_with_one_error(
    silent_server: str,
    command: Callable[[str], int],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(control, "CONTROL_READ_TIMEOUT", 0.5, raising=False)
    result: list[int] = []
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="gossamer"):
        # in a thread, so that the test itself is bounded if the command hangs
        thread = threading.Thread(target=lambda: result.append(command(silent_server)))
        thread.daemon = True
        thread.start()
        thread.join(10)
    took = time.monotonic() - started
    assert result, "the command still waits for an answer after 10 s"
    # each command once: not redis-py's retries, nor the 5 s connect time-out
    assert result == [Exit.UNAVAILABLE] and took < 3, (result, took)
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    message = errors[0].getMessage()
    assert errors[0].levelno == logging.ERROR and "\n" not in message
    assert f"Redis at {silent_server} " in message and "Timeout reading" in message, message
    assert "does not answer" in message or "stopped answering" in message, message

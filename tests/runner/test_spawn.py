"""runner/spawn.py: a child's command line never holds a Redis URL's password, whichever form
the URL takes; the password reaches the child in its environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gossamer import logs
from gossamer.runner.spawn import (
    REDIS_ENV,
    REDIS_PASSWORD_ENV,
    Command,
    gossamer_command,
    module_command,
    start,
)

URLS = [
    ("redis://:s3cret@127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("redis://crawler:s3cret@127.0.0.1:6379/0", "redis://crawler@127.0.0.1:6379/0"),
    ("redis://:s3c%2Fret@127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("redis://127.0.0.1:6379/0?password=s3cret&db=1", "redis://127.0.0.1:6379/0?db=1"),
]


@pytest.mark.parametrize(("url", "bare"), URLS)
def test_a_url_goes_in_the_environment(url: str, bare: str) -> None:
    worker = gossamer_command("worker", "--crawl", "c1", redis=url)
    assert worker.argv[1:4] == ("-m", "gossamer", "worker")
    assert not any("s3c" in arg or "redis" in arg for arg in worker.argv)
    assert worker.env is not None and worker.env[REDIS_ENV] == url
    crawl = gossamer_command("crawl", "-q", "--", "http://a.example/", redis=url, redis_flag=True)
    assert crawl.argv[3:] == ("crawl", "--redis", bare, "-q", "--", "http://a.example/")
    assert not any("s3c" in arg for arg in crawl.argv)
    assert crawl.env is not None and crawl.env[REDIS_PASSWORD_ENV] in ("s3cret", "s3c/ret")


def test_a_url_without_a_password_leaves_redis_cli_auth_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(REDIS_PASSWORD_ENV, "from-the-user")
    crawl = gossamer_command("crawl", redis="redis://h:1/0", redis_flag=True)
    assert crawl.env is not None and crawl.env[REDIS_PASSWORD_ENV] == "from-the-user"


def test_the_child_logs_as_we_were_told() -> None:
    logs.configure("json", "warning")
    try:
        env = gossamer_command("status").env
        assert env is not None and env[logs.FORMAT_ENV] == "json"
        mute = gossamer_command("status", logs=False).env
        assert mute is not None and mute.get(logs.FORMAT_ENV) == os.environ.get(logs.FORMAT_ENV)
    finally:
        logs.unconfigure()


def test_start_sends_the_output_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    code = "import sys; print('out'); print('err', file=sys.stderr)"
    child = start(Command((sys.executable, "-c", code)), log=log)
    assert child.wait(timeout=60) == 0
    assert log.read_text() == "out\nerr\n"
    piped = start(Command((sys.executable, "-c", code)), log=log, stdout=subprocess.PIPE)
    out, _ = piped.communicate(timeout=60)
    assert out == b"out\n" and log.read_text() == "out\nerr\nerr\n"
    zen = start(module_command("this"), stdout=subprocess.PIPE)
    assert b"Beautiful is better than ugly." in zen.communicate(timeout=60)[0]

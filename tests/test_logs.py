"""gossamer.logs: diagnostics as logging records, shown by the command in human or JSON form.

The human lines must be the ones the command printed before it logged, byte for byte (tests and
docs quote them); JSON lines must parse and carry the `extra=` fields; importing gossamer must
install no handler (an embedding application decides)."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import redis.exceptions

from gossamer import logs
from gossamer.cli import main
from gossamer.cluster._redis import retrying
from gossamer.exitcodes import Exit
from gossamer.report.crawl import print_report

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(autouse=True)
def _hand_logging_back() -> Iterator[None]:
    yield
    logs.unconfigure()


def _flaky(fails: int) -> object:
    """A Redis call that meets `fails` transient errors, then answers 7."""
    left = [fails]

    def call() -> int:
        if left[0]:
            left[0] -= 1
            raise redis.exceptions.ConnectionError("Connection refused")
        return 7

    return call


def json_lines(text: str) -> list[dict[str, object]]:
    lines = text.splitlines()
    assert lines and text.endswith("\n"), text
    return [json.loads(line) for line in lines]


# ------------------------------------------------------------------------------- human


def test_human_lines_are_the_command_lines_of_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `print(..., file=sys.stderr)` wrote before: an error, a warning, an info line."""
    logs.configure("human", "info")
    assert print_report(tmp_path) == 2
    assert retrying(_flaky(2), what="registry", sleep=lambda _s: None) == 7  # type: ignore[arg-type]
    assert capsys.readouterr().err == (
        f"gossamer: error: {tmp_path} is not a crawl directory (no crawl.json)\n"
        "gossamer: Redis unreachable (registry): Connection refused; retrying\n"
        "gossamer: Redis reachable again (registry)\n"
    )


def test_human_formatter_by_level() -> None:
    fmt = logs.HumanFormatter()

    def line(level: int) -> str:
        return fmt.format(logging.LogRecord("gossamer.x", level, __file__, 1, "a %s", ("b",), None))

    assert line(logging.ERROR) == "gossamer: error: a b"
    assert line(logging.CRITICAL) == "gossamer: error: a b"
    assert line(logging.WARNING) == line(logging.INFO) == line(logging.DEBUG) == "gossamer: a b"


def test_the_level_filters(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("human", "error")
    assert retrying(_flaky(1), what="registry", sleep=lambda _s: None) == 7  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""  # a warning and an info line, below error
    logs.configure("human", "warning")
    retrying(_flaky(1), what="registry", sleep=lambda _s: None)  # type: ignore[arg-type]
    assert capsys.readouterr().err == (
        "gossamer: Redis unreachable (registry): Connection refused; retrying\n"
    )


# -------------------------------------------------------------------------------- json


def test_json_lines_parse_and_carry_the_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("json", "info")
    assert print_report(tmp_path) == 2
    retrying(_flaky(1), what="registry", sleep=lambda _s: None)  # type: ignore[arg-type]
    error, warning, info = json_lines(capsys.readouterr().err)
    assert error == {
        "ts": error["ts"],
        "level": "error",
        "logger": "gossamer.report.crawl",
        "message": f"{tmp_path} is not a crawl directory (no crawl.json)",
        "path": str(tmp_path),  # the call's extra=
    }
    assert TS.match(str(error["ts"])), error
    assert warning["level"] == "warning" and warning["logger"] == "gossamer.cluster._redis"
    assert warning["message"] == "Redis unreachable (registry): Connection refused; retrying"
    assert info["level"] == "info" and info["message"] == "Redis reachable again (registry)"


def test_json_formatter_writes_what_json_cannot_hold_as_text_and_the_traceback() -> None:
    try:
        raise OSError("disk full")
    except OSError:
        record = logging.LogRecord(
            "gossamer.x", logging.ERROR, __file__, 1, "oh, ünïcode", None, sys.exc_info()
        )
    record.path = Path("/tmp/x")
    record.pids = [1, 2]
    record.stack_info = "Stack (most recent call last):\n  here"
    entry = json.loads(logs.JsonFormatter().format(record))
    assert entry["message"] == "oh, ünïcode" and entry["level"] == "error"
    assert entry["path"] == "/tmp/x" and entry["pids"] == [1, 2]
    assert "OSError: disk full" in entry["exception"]
    assert entry["stack"].endswith("  here")
    assert set(entry) == {"ts", "level", "logger", "message", "path", "pids", "exception", "stack"}


# ------------------------------------------------------------------ choosing, children


def test_check_takes_the_flag_then_the_environment_then_the_default() -> None:
    env = {logs.FORMAT_ENV: "JSON", logs.LEVEL_ENV: "warning"}
    assert logs.check(None, None, {}) == ("human", "info")
    assert logs.check(None, None, env) == ("json", "warning")
    assert logs.check("human", "debug", env) == ("human", "debug")
    with pytest.raises(ValueError, match=r"^'xml' is not one of human, json$"):
        logs.check("xml", None, {})
    with pytest.raises(ValueError, match=r"^\$GOSSAMER_LOG_LEVEL: 'loud' is not one of debug, "):
        logs.check(None, None, {logs.LEVEL_ENV: "loud"})


def test_a_subprocess_gets_the_choice_in_its_environment() -> None:
    from gossamer.cluster.control import worker_command

    def worker_env(url: str) -> Mapping[str, str]:
        env = worker_command(url, "c1", Path("out")).env
        assert env is not None
        return env

    assert logs.child_env() == {}
    logs.configure("json", "warning")
    assert logs.child_env() == {logs.FORMAT_ENV: "json", logs.LEVEL_ENV: "warning"}
    env = worker_env("redis://127.0.0.1:1/0")
    assert env[logs.FORMAT_ENV] == "json" and env[logs.LEVEL_ENV] == "warning"
    logs.configure("human", "info")  # configuring again replaces: one handler, the new choice
    assert len(logging.getLogger("gossamer").handlers) == 1
    assert worker_env("redis://127.0.0.1:1/0")[logs.FORMAT_ENV] == "human"
    logs.unconfigure()
    assert logging.getLogger("gossamer").handlers == [] and logs.child_env() == {}


# ------------------------------------------------------------------------- the command


def test_the_command_writes_json_with_the_flag_or_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["report", str(tmp_path), "--log-format", "json"]) == 2
    (line,) = json_lines(capsys.readouterr().err)
    assert line["level"] == "error" and "is not a crawl directory" in str(line["message"])
    monkeypatch.setenv(logs.FORMAT_ENV, "json")
    assert main(["report", str(tmp_path)]) == 2
    assert json_lines(capsys.readouterr().err)[0]["logger"] == "gossamer.report.crawl"
    assert main(["report", str(tmp_path), "--log-format", "human"]) == 2  # the flag wins
    assert capsys.readouterr().err.startswith("gossamer: error: ")


def test_a_bad_log_variable_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(logs.FORMAT_ENV, "xml")
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path)])
    assert exc.value.code == Exit.USAGE
    assert capsys.readouterr().err == (
        "gossamer: error: $GOSSAMER_LOG_FORMAT: 'xml' is not one of human, json\n"
    )


def test_a_bad_log_flag_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "x", "--log-level", "loud"])
    assert exc.value.code == Exit.USAGE
    assert capsys.readouterr().err == (
        "gossamer: error: --log-level loud: expected one of debug, info, warning, error\n"
    )


# ------------------------------------------------------------------- the library alone


def test_importing_gossamer_installs_no_handler() -> None:
    """Every module of the package imported (as an application embedding it would): no
    handler anywhere, no level set; the command alone configures logging."""
    code = """
import importlib, logging, pkgutil
import gossamer
names = [m.name for m in pkgutil.walk_packages(gossamer.__path__, "gossamer.")
         if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
loggers = [logging.getLogger(n) for n in logging.root.manager.loggerDict
           if n == "gossamer" or n.startswith("gossamer.")]
assert len(names) > 50, names
assert logging.root.handlers == [], logging.root.handlers
assert logging.getLogger("gossamer").level == logging.NOTSET
bad = [(g.name, g.handlers) for g in loggers if g.handlers or g.level != logging.NOTSET]
assert not bad, bad
assert any(g.name == "gossamer.cluster.worker" for g in loggers)
print(len(names), "modules")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(" modules\n")


def test_a_forked_process_logs_as_its_parent_was_configured() -> None:
    """A pool's workers are forked (runner/run.py): they keep the parent's handler."""
    code = """
import logging, os
from gossamer import logs
logs.configure("json", "info")
pid = os.fork()
if pid == 0:
    logging.getLogger("gossamer.runner.run").error("from the child", extra={"pid": os.getpid()})
    os._exit(0)
os.waitpid(pid, 0)
print(pid)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    (line,) = json_lines(done.stderr)
    assert line["message"] == "from the child" and line["pid"] == int(done.stdout)

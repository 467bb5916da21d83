"""A new user's mistakes through the real `gossamer` command (the issue "Every mistake
recoverable, every number right", items 7 and 10): each is one line on stderr naming the
flag, `-s` key or GOSSAMER_* variable as given and saying what it takes (no usage dump, no
pydantic wording), exit 2 (`Exit.USAGE`), and nothing written. `--workers` has one meaning
(auto: one per core; 0: none, a cluster crawl's only; at most MAX_WORKERS) and warns above
the core count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gossamer._clidoc import MISTAKES_FILE
from gossamer.config import MAX_WORKERS, available_cores
from gossamer.exitcodes import Exit
from gossamer.runner.pool import MAX_POOL_WORKERS

# refused at once without --allow-private, so a crawl that wrongly starts ends quickly
UNREACHABLE = "http://127.0.0.1:9/"
ERROR = "gossamer: error: "


def gossamer(
    *args: str, cwd: Path, env: dict[str, str] | None = None, one_core: bool = False
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GOSSAMER_")}

    def pin() -> None:  # the child may run on one core: `auto` is 1, 2 is above it
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env={**clean, **(env or {})},
        preexec_fn=pin if one_core else None,
    )


# (command line after `gossamer`, environment, the one stderr line)
MISTAKES = [
    (["crawl", UNREACHABLE, "--scope", "hosts"], {},
     "--scope hosts: expected one of host, domain, all; did you mean host?"),
    (["crawl", UNREACHABLE, "--delay", "1s"], {},
     "--delay 1s: expected a number of seconds from 0 to 3,600, e.g. 1 or 0.5"),
    (["crawl", UNREACHABLE, "--max-pages", "ten"], {},
     "--max-pages ten: expected a whole number of at least 1, or none (no limit)"),
    (["crawl", UNREACHABLE, "--max-pags", "3"], {},
     "gossamer crawl has no flag --max-pags; did you mean --max-pages?"),
    (["crawl", UNREACHABLE, "--max-page", "3"], {},  # no abbreviation taken as a prefix
     "gossamer crawl has no flag --max-page; did you mean --max-pages?"),
    (["crawl", UNREACHABLE, "-s", "max_pagez=3"], {},
     "-s 'max_pagez=3': no setting 'max_pagez'; did you mean max_pages?"),
    (["crawl", "127.0.0.1:8081"], {},
     "invalid seed URL '127.0.0.1:8081': no http:// or https://; "
     "did you mean http://127.0.0.1:8081/ ?"),
    (["crawl", UNREACHABLE], {"GOSSAMER_DELAY": "abc"},
     "GOSSAMER_DELAY=abc: expected a number of seconds from 0 to 3,600, e.g. 1 or 0.5"),
    (["crawl", UNREACHABLE, "--max-pages", "0"], {},  # pydantic's "greater than or equal"
     "--max-pages 0: must be at least 1, or none (no limit)"),
    (["crawl", UNREACHABLE, "-s", "delay=-1"], {}, "-s delay=-1: must be at least 0"),
    (["crawl", UNREACHABLE, "--workers", "100"], {},
     f"--workers 100: at most {MAX_WORKERS} worker processes on one machine (they share one "
     "frontier: past a few per core they only wait for each other); auto: one per core"),
    (["crawl", UNREACHABLE, "--workers", "0"], {},
     f"--workers 0: starts no worker; an embedded crawl needs 1 to {MAX_WORKERS}, or auto (one "
     "per core, the default); 0 is for --redis, whose workers may join from elsewhere"),
    (["crawl", UNREACHABLE], {"GOSSAMER_WORKERS": "many"},
     f"GOSSAMER_WORKERS=many: expected a whole number from 1 to {MAX_WORKERS}, or auto (one "
     "per core)"),
    (["crawl"], {}, "no seed URL: give one or more, `gossamer crawl URL …` (or --seeds-file "
     "FILE)"),
    (["crwal", UNREACHABLE], {},
     "no command 'crwal'; did you mean crawl? (gossamer --help lists them)"),
    (["crawl", "--redis", "redis://127.0.0.1:1/0", UNREACHABLE, "--workers", "65"], {},
     f"--workers 65: at most {MAX_WORKERS} worker processes on one machine (they share one "
     "frontier: past a few per core they only wait for each other); auto: one per core"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "env", "line"), MISTAKES, ids=lambda v: repr(v)[:40])
def test_a_mistake_is_one_line_naming_it_and_nothing_is_written(
    tmp_path: Path, args: list[str], env: dict[str, str], line: str
) -> None:
    r = gossamer(*args, "-o", "out", cwd=tmp_path, env=env)
    assert r.stderr.splitlines() == [ERROR + line], r.stderr
    assert r.returncode == Exit.USAGE and r.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing done: no -o directory


def test_workers_above_the_cores_is_said_in_one_warning_line(tmp_path: Path) -> None:
    r = gossamer(
        "crawl", UNREACHABLE, "--workers", "2", "-o", "out", "-q", cwd=tmp_path, one_core=True
    )
    warning = (
        "gossamer: --workers 2: more than the 1 core this crawl may use; its workers will "
        "share them (fine while they wait on slow sites; auto: one per core)"
    )
    assert r.stderr.splitlines()[0] == warning, r.stderr
    assert r.returncode == Exit.NOTHING_FETCHED  # it ran (127.0.0.1 without --allow-private)
    r = gossamer("crawl", UNREACHABLE, "-o", "out2", "-q", cwd=tmp_path, one_core=True)
    assert "more than" not in r.stderr  # auto: one per core, no warning


def test_workers_0_means_none_and_only_a_cluster_crawl_takes_it(tmp_path: Path) -> None:
    """0 is no worker in both modes: refused for an embedded crawl (above), taken by a
    cluster crawl (which then needs only its Redis: here none, so UNAVAILABLE)."""
    r = gossamer(
        "crawl", "--redis", "redis://127.0.0.1:1/0", UNREACHABLE, "--workers", "0", "-o", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == Exit.UNAVAILABLE, r.stderr
    assert "--workers" not in r.stderr


def test_auto_is_one_per_core_in_both_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    from gossamer.cli import _check_workers, build_parser, crawl_settings

    for name in [n for n in os.environ if n.startswith("GOSSAMER_")]:
        monkeypatch.delenv(name)
    per_core = min(available_cores(), MAX_WORKERS)
    parser = build_parser(with_testweb=False)
    for given in ([], ["--workers", "auto"]):
        args = parser.parse_args(["crawl", "http://a.example/", *given])
        assert crawl_settings(args).effective_workers() == per_core
        cluster = parser.parse_args(["crawl", "--redis", "redis://h/0", "http://a/", *given])
        assert _check_workers(cluster, crawl_settings(cluster)) == per_core
    monkeypatch.setenv("GOSSAMER_WORKERS", "auto")
    args = parser.parse_args(["crawl", "http://a.example/"])
    assert crawl_settings(args).workers is None


def test_one_cap_for_the_flag_the_pool_and_the_dashboard() -> None:
    from gossamer.dashboard._control import MAX_POOL_WORKERS as DASHBOARD_CAP

    assert MAX_POOL_WORKERS == DASHBOARD_CAP == MAX_WORKERS == 64


def recorded_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(MISTAKES_FILE.read_text())
    return rows


@pytest.mark.parametrize(
    "row", [r for r in recorded_rows() if r["offline"]], ids=lambda r: str(r["what"])
)
def test_docs_common_mistakes_say_what_the_command_says(
    tmp_path: Path, row: dict[str, Any]
) -> None:
    """docs/cli.md's "Common mistakes" (scripts/common_mistakes.py ran them against nginx):
    the rows that need no server, replayed, say the same and exit the same."""
    port = "8081"
    args = [a.replace("PORT", port) for a in row["args"]]
    if row.get("setup") == "someones_files":  # as scripts/common_mistakes.py makes it
        (tmp_path / "photos").mkdir()
        (tmp_path / "photos" / "holiday.jpg").write_bytes(b"x")
    elif "setup" in row:
        pytest.fail(f"no setup {row['setup']!r} here: add it as in scripts/common_mistakes.py")
    r = gossamer(*args, cwd=tmp_path, env=row["env"])
    assert r.stderr.replace(f":{port}", ":PORT").splitlines() == row["stderr"], r.stderr
    assert r.returncode == row["exit"]

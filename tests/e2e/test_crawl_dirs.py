"""Output directories and resumes through the real command line (issue 16): `-o` at a
directory holding other files is refused and changes nothing; `--resume` on a finished crawl
says so and changes nothing; a resume takes run-time settings and a higher --max-pages,
refuses a new definition by name; stats.json and `gossamer report` say why a crawl ended.

Every refusal is checked the same way: the exit status, one error line naming the directory
or the flags, and a snapshot of the directory (every file's bytes and mtime) unchanged."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from gossamer.report.crawl import wait_live_graph
from gossamer.testweb import RunningWeb, TruthRules, WebSpec, audit, read_logs, serve_in_thread

UA = "gossamer-dirs-test/0.1"
USAGE = 2  # gossamer.exitcodes.Exit.USAGE (a literal: the same test runs against old code)

Snapshot = dict[str, tuple[bytes | None, int]]


def snapshot(root: Path) -> Snapshot:
    """Every file and directory under `root`: its bytes (None for a directory) and mtime,
    once the live graph (on by default) has written a crawl's final statistics: they land
    after the crawl's exit (docs/graph.md)."""
    assert wait_live_graph(root, 120), f"{root}: the live graph's final statistics"
    found: Snapshot = {".": (None, root.stat().st_mtime_ns)}
    for path in sorted(root.rglob("*")):
        st = path.stat()
        data = None if path.is_dir() else path.read_bytes()
        found[str(path.relative_to(root))] = (data, st.st_mtime_ns)
    return found


def gossamer(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, **(env or {})},
    )


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gossamer: error: "), r.stderr
    return lines[0]


def foreign_directory(path: Path) -> Path:
    """A directory of someone's files, named like a crawl's and a demo's outputs."""
    path.mkdir(parents=True)
    (path / "stats.json").write_text('{"mine": "do not overwrite"}\n')
    (path / "web.log").write_text("my own log\n")
    (path / "notes.txt").write_text("notes\n")
    (path / "sub").mkdir()
    (path / "sub" / "data.csv").write_text("a,b\n")
    return path


# ------------------------------------------------------------------ -o at a foreign directory


@pytest.mark.parametrize(
    "command",
    [
        # a seed that is refused at once (loopback without --allow-private): the crawl the old
        # code ran into the directory was short
        ["crawl", "http://127.0.0.1:9/", "-q"],
        ["crawl", "http://127.0.0.1:9/", "--workers", "2", "-q"],
        ["demo", "--hosts", "3"],
        ["testweb", "demo", "--hosts", "3"],
    ],
    ids=["crawl", "crawl-pool", "demo", "testweb-demo"],
)
def test_o_at_a_directory_holding_other_files_is_refused(
    tmp_path: Path, command: list[str]
) -> None:
    out = foreign_directory(tmp_path / "mine")
    before = snapshot(out)
    r = gossamer(*command, "-o", str(out))
    assert r.returncode == USAGE, r.stdout + r.stderr
    line = one_error_line(r)
    assert f"-o {out}: the directory holds other files (notes.txt, stats.json, sub" in line
    assert "give a new or empty directory" in line
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_o_at_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a-file"
    path.write_text("mine\n")
    before = snapshot(tmp_path)
    r = gossamer("crawl", "http://127.0.0.1:9/", "-o", str(path), "-q")
    assert r.returncode == USAGE
    assert "exists and is not a directory" in one_error_line(r)
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------ crawls of the simulated web


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningWeb, Path]]:
    spec = WebSpec(seed=21, hosts=12, pages_mean=12, profile="clean")
    where = tmp_path_factory.mktemp("web")
    with serve_in_thread(spec, log_path=where / "web.log") as running:
        yield running, running.write_resolve_file(where / "resolve.txt")


def crawl_args(web: tuple[RunningWeb, Path], out: Path, *extra: str) -> list[str]:
    running, resolve = web
    return [
        "crawl", running.url(0, 0), "-o", str(out), "--scope", "all", "--resolve-file",
        str(resolve), "--allow-private", "--delay", "0", "--user-agent", UA,
        "--concurrency", "8", "--workers", "1", "-q", *extra,
    ]  # fmt: skip


def stats(out: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / "stats.json").read_text())
    return data


def frontier_done(out: Path) -> int:
    frontier = stats(out)["frontier"]
    assert isinstance(frontier, dict)
    return int(frontier["done"])


def test_an_empty_existing_directory_is_fine(
    tmp_path: Path, web: tuple[RunningWeb, Path]
) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    r = gossamer(*crawl_args(web, out))
    assert r.returncode == 0, r.stderr
    assert stats(out)["ended"] == "complete" and stats(out)["finished"] is True


def test_resume_of_a_complete_crawl_says_so_and_changes_nothing(
    tmp_path: Path, web: tuple[RunningWeb, Path]
) -> None:
    out = tmp_path / "crawl"
    assert gossamer(*crawl_args(web, out)).returncode == 0
    done = frontier_done(out)
    before = snapshot(out)
    for extra in ([], ["--max-pages", "100000", "--workers", "2"]):
        r = gossamer("crawl", "--resume", str(out), *extra)
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("\n") == 1, r.stderr
        assert f"{out}: the crawl is complete" in r.stderr
        assert f"with {done:,} pages done" in r.stderr and "nothing to resume" in r.stderr
        # when: the end of its run, as a date
        assert re.search(r"ended at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", r.stderr), r.stderr
        assert snapshot(out) == before
    assert stats(out)["ended"] == "complete" and stats(out)["finished"] is True


def test_a_resume_refuses_a_new_definition_naming_each_flag(
    tmp_path: Path, web: tuple[RunningWeb, Path]
) -> None:
    running, _ = web
    out = tmp_path / "crawl"
    assert gossamer(*crawl_args(web, out, "--max-pages", "20")).returncode == 0
    before = snapshot(out)
    other = running.url(1, 0)
    r = gossamer(
        "crawl", "--resume", str(out), other, "--scope", "host", "--deny", "/x", "--workers", "2"
    )
    assert r.returncode == USAGE, r.stderr
    line = one_error_line(r)
    assert f"--resume {out}:" in line
    assert "--scope host (the crawl's: all)" in line
    assert "--deny [/x] (the crawl's: [])" in line
    assert f"SEED [{other}]" in line
    assert "--workers" not in line  # a run-time setting: taken, not refused
    assert "start a new crawl with a new -o DIR" in line
    assert snapshot(out) == before
    # from the environment too, named with its variable
    r = gossamer("crawl", "--resume", str(out), env={"GOSSAMER_MAX_DEPTH": "3"})
    assert r.returncode == USAGE
    assert "--max-depth 3 from GOSSAMER_MAX_DEPTH (the crawl's: 20)" in one_error_line(r)
    # -o naming another directory than --resume's
    r = gossamer("crawl", "--resume", str(out), "-o", str(tmp_path / "other"))
    assert r.returncode == USAGE and "leave -o out" in one_error_line(r)
    # the same definition given again is no change: the crawl is at its limit, as below
    r = gossamer("crawl", "--resume", str(out), running.url(0, 0), "--scope", "all")
    assert r.returncode == 0 and "stopped at its page limit" in r.stderr
    assert snapshot(out) == before
    assert not (tmp_path / "other").exists()


def test_max_pages_stop_then_resumes_that_raise_the_limit(tmp_path: Path) -> None:
    spec = WebSpec(seed=22, hosts=12, pages_mean=12, profile="clean")
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as running:
        web = (running, running.write_resolve_file(tmp_path / "resolve.txt"))
        assert gossamer(*crawl_args(web, out, "--max-pages", "25")).returncode == 0
        first = stats(out)
        assert first["ended"] == "max-pages" and first["finished"] is False
        assert first["stopped_by"] is None
        assert frontier_done(out) == 25
        assert datetime.fromisoformat(str(first["ended_at"])).tzinfo is not None

        # the report says why it stopped, when, and how to go on; times are dates
        r = gossamer("report", str(out))
        assert r.returncode == 0, r.stderr
        date = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
        ended = re.search(r"^  ended +(.*)$", r.stdout, re.MULTILINE)
        assert ended, r.stdout
        assert re.fullmatch(
            f"max-pages: page limit reached at {date} .*\\(last run\\); to go on: "
            + re.escape(f"gossamer crawl --resume {out} --max-pages N (N > 25)"),
            ended.group(1),
        ), ended.group(1)
        assert re.search(f"^    run 1  {date} ", r.stdout, re.MULTILINE), r.stdout
        # hosts with URLs left: the frontier's next ready time, a date, not an epoch
        assert re.search(f"next_ready_at {date}", r.stdout), r.stdout
        data = json.loads(gossamer("report", str(out), "--json").stdout)
        assert data["end_reason"] == "max-pages" and data["runs"][0]["end_reason"] == "max-pages"
        run = data["runs"][0]
        assert datetime.fromisoformat(run["started_iso"]).timestamp() == int(run["started"])
        assert datetime.fromisoformat(run["ended_iso"]).timestamp() == int(run["ended"])
        assert data["ended_at"] == run["ended_iso"]
        frontier = data["stats"]["frontier"]
        assert datetime.fromisoformat(frontier["next_ready_at_iso"]).timestamp() == int(
            frontier["next_ready_at"]
        )

        # nothing given: at its limit, nothing to do, nothing changed
        before = snapshot(out)
        r = gossamer("crawl", "--resume", str(out), "-q")
        assert r.returncode == 0, r.stderr
        assert f"{out}: the crawl stopped at its page limit (--max-pages 25)" in r.stderr
        assert f"gossamer crawl --resume {out} --max-pages N (N > 25)" in r.stderr
        assert snapshot(out) == before
        # a lower limit, one it has already passed: refused (the same one is no change)
        r = gossamer("crawl", "--resume", str(out), "--max-pages", "10")
        assert r.returncode == USAGE
        assert f"--max-pages 10: the crawl in {out} already has 25 pages" in one_error_line(r)
        assert snapshot(out) == before

        # a higher limit (and two worker processes: a run-time setting) goes on to it
        r = gossamer("crawl", "--resume", str(out), "--max-pages", "60", "--workers", "2", "-q")
        assert r.returncode == 0, r.stderr
        assert stats(out)["ended"] == "max-pages" and frontier_done(out) == 60
        assert stats(out)["workers"] == 2
        manifest = json.loads((out / "crawl.json").read_text())
        assert (manifest["max_pages"], manifest["workers"]) == (60, 2)  # for the next resume
        runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
        assert runs[-2]["changed"] == {"max_pages": 60, "workers": 2}

        # no limit: to the end
        r = gossamer("crawl", "--resume", str(out), "--max-pages", "none", "-q")
        assert r.returncode == 0, r.stderr
        running.flush_log()
    final = stats(out)
    assert final["ended"] == "complete" and final["finished"] is True
    # the three runs are one crawl: every page once, politely
    rules = TruthRules(seeds=(running.url(0, 0),), scope="all", user_agent=UA)
    truth = audit(running.model, read_logs([log]).records, rules)
    assert truth.coverage == 1.0 and truth.overlap == 0.0, truth.format_table()
    assert truth.politeness_violations == 0, truth.format_table()
    report = json.loads(gossamer("report", str(out), "--json").stdout)
    assert [run["end_reason"] for run in report["runs"]] == ["max-pages", "max-pages", "complete"]
    assert report["end_reason"] == "complete"
    assert report["totals"]["pages"] == frontier_done(out) == truth.unique


# ------------------------------------------------------------------ cluster outputs


def test_cluster_outputs_never_overwrite_another_crawls(
    tmp_path: Path, web: tuple[RunningWeb, Path], redis_url: str
) -> None:
    """Worker ids start at w1 in every cluster crawl: `-o DIR` of a second crawl in a
    directory holding a first one's DIR/w1/ once overwrote its crawl.json and stats.json."""
    running, resolve = web
    out = tmp_path / "out"
    old = foreign_directory(out / "w1")  # another crawl's first worker, say
    before, old_before = snapshot(out), snapshot(old)
    common = [
        running.url(0, 0), "--redis", redis_url, "--scope", "all", "--resolve-file",
        str(resolve), "--allow-private", "--delay", "0", "--user-agent", UA,
    ]  # fmt: skip
    # a crawl with local workers: refused before it is created
    r = gossamer("crawl", *common, "-o", str(out), "--workers", "1", "-q")
    assert r.returncode == USAGE, r.stdout + r.stderr
    assert r.stdout == ""  # no crawl id: no crawl was created
    line = one_error_line(r)
    assert f"-o {out}: the directory holds other files (w1)" in line
    assert snapshot(out) == before
    # a crawl without local workers writes nothing here; a worker joining it gets id w1
    created = gossamer("crawl", *common, "--workers", "0", "-o", str(out))
    assert created.returncode == 0, created.stderr
    crawl_id = created.stdout.strip()
    r = gossamer("worker", "--redis", redis_url, "--crawl", crawl_id, "-o", str(out), "-q")
    assert r.returncode == USAGE, r.stderr
    line = one_error_line(r)
    assert f"-o {out}: this worker's directory {old}: the directory holds other files" in line
    assert line.endswith("give another -o DIR")
    assert snapshot(out) == before
    # the next worker (w2) has a directory of its own and crawls to the end
    r = gossamer("worker", "--redis", redis_url, "--crawl", crawl_id, "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert stats(out / "w2")["ended"] == "complete"
    assert snapshot(old) == old_before  # the other crawl's files, untouched throughout

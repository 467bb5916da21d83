"""Why a run ended (`ended` in stats.json), a pool's merged statistics, what a resume takes
and refuses, and the rule for a new output directory — on files built here."""

from __future__ import annotations

import fcntl
import json
import signal
from pathlib import Path

import pytest

from gossamer.config import CrawlSettings, load_settings
from gossamer.crawldir import CrawlError
from gossamer.frontier import FrontierStats
from gossamer.outdir import new_directory_problem
from gossamer.report.crawl import ENDED, end_reason, fetched_nothing, stats_end_reason
from gossamer.report.summary import merge_stats
from gossamer.runner.manifest import write_manifest
from gossamer.runner.resume import (
    DEFINITION,
    RETRY_ON,
    RUN_TIME,
    ResumeRefused,
    failure_keys,
    flag_of,
    plan_resume,
    retry_errors,
)
from gossamer.sinks import append_run_record, write_stats


def frontier(queued: int = 0, leased: int = 0, done: int = 10) -> FrontierStats:
    return FrontierStats(
        queued=queued, leased=leased, done=done, failed=0, retries=0, hosts=1, ready_hosts=0,
        leased_hosts=0, dead_hosts=0, dropped_by_budget=0, duplicates_seen=0, next_ready_at=None,
    )  # fmt: skip


# ------------------------------------------------------------------ ended


@pytest.mark.parametrize(
    ("signal_name", "failed", "queued", "leased", "done", "max_pages", "expected"),
    [
        (None, False, 0, 0, 10, None, "complete"),
        (None, False, 0, 0, 10, 10, "complete"),  # the limit reached with nothing left
        (None, False, 5, 0, 10, 10, "max-pages"),
        (None, False, 5, 0, 9, 10, "stopped"),  # work left, below the limit, no signal
        ("SIGINT", False, 5, 0, 10, 10, "SIGINT"),  # a signal says more than the limit
        ("SIGTERM", True, 0, 0, 10, None, "SIGTERM"),
        (None, True, 0, 0, 10, None, "error"),
    ],
)
def test_end_reason(
    signal_name: str | None,
    failed: bool,
    queued: int,
    leased: int,
    done: int,
    max_pages: int | None,
    expected: str,
) -> None:
    got = end_reason(
        signal_name=signal_name,
        failed=failed,
        queued=queued,
        leased=leased,
        done=done,
        max_pages=max_pages,
    )
    assert got == expected and got in ENDED


def test_the_end_of_statistics_written_before_ended_existed() -> None:
    old_limit = {"finished": True, "stopped_by": None, "frontier": {"queued": 4, "done": 30}}
    assert stats_end_reason(old_limit, 30) == "max-pages"  # what "finished True" hid
    old_done = {"finished": True, "stopped_by": None, "frontier": {"queued": 0, "done": 30}}
    assert stats_end_reason(old_done, 30) == "complete"
    assert stats_end_reason({"finished": False, "stopped_by": "SIGINT"}, None) == "SIGINT"
    assert stats_end_reason({"finished": False, "stopped_by": "error"}, None) == "error"
    assert stats_end_reason({"finished": False, "stopped_by": None}, None) is None
    assert stats_end_reason(None, None) is None
    assert stats_end_reason({"ended": "max-pages", "finished": False}, None) == "max-pages"


def part(ended: str, pages: int) -> dict[str, object]:
    return {"ended": ended, "finished": ended == "complete", "pages": pages, "errors": {"e": 1}}


@pytest.mark.parametrize(
    ("parts", "stopped", "codes", "front", "expected"),
    [
        ([part("complete", 5), part("complete", 7)], [], [0, 0], frontier(), "complete"),
        (
            [part("max-pages", 5), part("max-pages", 5)],
            [],
            [0, 0],
            frontier(queued=3, done=10),
            "max-pages",
        ),
        (
            [part("SIGTERM", 5), part("SIGTERM", 5)],
            [signal.SIGINT],
            [143, 143],
            frontier(queued=3),
            "SIGINT",  # the signal the parent received, forwarded as SIGTERM
        ),
        ([part("error", 5), part("SIGTERM", 5)], [], [74, 143], frontier(queued=3), "error"),
        ([part("complete", 5)], [], [0, 137], frontier(queued=3), "error"),  # a part missing
        (
            [part("SIGTERM", 5), part("complete", 5)],
            [],
            [143, 0],
            frontier(queued=3),
            "SIGTERM",  # one worker stopped by a signal sent to it alone
        ),
    ],
)
def test_a_pools_statistics_say_why_it_ended(
    tmp_path: Path,
    parts: list[dict[str, object]],
    stopped: list[int],
    codes: list[int],
    front: FrontierStats,
    expected: str,
) -> None:
    for k, p in enumerate(parts):
        write_stats(tmp_path / f"stats-w{k}.json", p)
    merged = merge_stats(tmp_path, 2, 0.0, stopped, front, 10, codes)
    assert merged["ended"] == expected
    assert merged["finished"] is (expected == "complete")
    assert merged["pages"] == sum(int(str(p["pages"])) for p in parts)
    assert merged["frontier"]["queued"] == front.queued
    assert "T" in merged["ended_at"]


# ------------------------------------------------------------------ resume


def test_every_setting_is_either_run_time_or_definition() -> None:
    """A new setting must be placed: taken by a resume, or part of what the crawl is."""
    assert RUN_TIME.isdisjoint(DEFINITION)
    assert set(CrawlSettings.knob_fields()) == RUN_TIME | DEFINITION


def test_flag_names() -> None:
    assert flag_of("max_depth") == "--max-depth"
    assert flag_of("obey_robots") == "--ignore-robots"
    assert flag_of("seeds") == "SEED"


def stored_crawl(tmp_path: Path, **extra: object) -> Path:
    out = tmp_path / "crawl"
    out.mkdir()
    settings = load_settings({"seeds": ["http://a.example/"], "output": out, **extra})
    write_manifest(settings)
    return out


def resume(out: Path, **given: object) -> CrawlSettings:
    return load_settings({"output": out, **given})


def end_of_run(out: Path, stats: dict[str, object] | None) -> None:
    runs = out / "runs.jsonl"
    append_run_record(runs, {"event": "start", "run": 1, "time": 1.8e9, "resume": False})
    if stats is not None:
        append_run_record(runs, {"event": "end", "run": 1, "time": 1.8e9 + 5, "stats": stats})


def test_a_killed_run_is_resumed_with_the_run_time_settings_given(tmp_path: Path) -> None:
    out = stored_crawl(tmp_path, max_pages=50)
    end_of_run(out, None)  # no end recorded: killed
    plan = plan_resume(resume(out, concurrency=3, delay=0.25, seeds=["http://a.example/"]))
    assert plan.nothing_to_do is None
    assert plan.changed == {"concurrency": 3, "delay": 0.25}  # the same seed is no change
    assert (plan.settings.fetch.concurrency, plan.settings.max_pages) == (3, 50)


def test_a_new_definition_is_refused_naming_each_setting(tmp_path: Path) -> None:
    out = stored_crawl(tmp_path)
    with pytest.raises(ResumeRefused) as info:
        plan_resume(resume(out, scope="domain", obey_robots=False, workers=2))
    message = str(info.value)
    assert "--ignore-robots False (the crawl's: True)" in message
    assert "--scope domain (the crawl's: host)" in message
    assert "workers" not in message


def test_a_complete_crawl_has_nothing_to_resume(tmp_path: Path) -> None:
    out = stored_crawl(tmp_path)
    end_of_run(out, {"ended": "complete", "frontier": {"done": 7, "queued": 0}})
    plan = plan_resume(resume(out, max_pages=100))
    assert plan.nothing_to_do is not None and "the crawl is complete" in plan.nothing_to_do
    assert "7 pages done" in plan.nothing_to_do


def test_a_crawl_at_its_page_limit_goes_on_with_a_higher_one(tmp_path: Path) -> None:
    out = stored_crawl(tmp_path, max_pages=7)
    end_of_run(out, {"ended": "max-pages", "frontier": {"done": 7, "queued": 3}})
    assert "--max-pages N (N > 7)" in str(plan_resume(resume(out)).nothing_to_do)
    plan = plan_resume(resume(out, max_pages=20))
    assert plan.nothing_to_do is None and plan.settings.max_pages == 20
    assert plan_resume(resume(out, max_pages="none")).settings.max_pages is None
    with pytest.raises(ResumeRefused, match="already has 7 pages"):
        plan_resume(resume(out, max_pages=5))


def test_a_stopped_or_failed_run_is_resumed(tmp_path: Path) -> None:
    out = stored_crawl(tmp_path)
    end_of_run(out, {"ended": "SIGINT", "frontier": {"done": 7, "queued": 3}})
    assert plan_resume(resume(out)).nothing_to_do is None


def test_a_crawl_older_than_run_histories_is_judged_by_its_stats(tmp_path: Path) -> None:
    out = stored_crawl(tmp_path)
    write_stats(out / "stats.json", {"finished": True, "frontier": {"queued": 0, "done": 4}})
    assert plan_resume(resume(out)).nothing_to_do is not None


def test_a_crawl_in_use_is_not_judged(tmp_path: Path) -> None:
    out = stored_crawl(tmp_path)
    end_of_run(out, {"ended": "complete", "frontier": {"done": 7, "queued": 0}})
    with (out / "lock").open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(CrawlError, match="another crawler is running"):
            plan_resume(resume(out))


def test_a_directory_without_crawl_json_cannot_be_resumed(tmp_path: Path) -> None:
    with pytest.raises(CrawlError, match="not a crawl directory"):
        plan_resume(resume(tmp_path))
    (tmp_path / "crawl.json").write_text(json.dumps(["not", "an", "object"]))
    with pytest.raises(CrawlError, match="not a JSON object"):
        plan_resume(resume(tmp_path))


# ------------------------------------------------------------------ failed URLs a fix retries


def test_the_settings_that_retry_failures_are_run_time_ones() -> None:
    assert set(RETRY_ON) <= RUN_TIME
    assert retry_errors({"allow_private": True, "delay": 0}) == ("fetch/error/blocked-address",)
    assert retry_errors({"allow_private": False}) == ()  # refusing again fixes nothing
    assert retry_errors({"workers": 4, "max_pages": 9}) == ()
    assert set(retry_errors({"proxy": None})) >= {"fetch/error/proxy", "fetch/error/connect"}
    assert "fetch/error/dns" not in retry_errors({"proxy": None})  # names resolve here
    assert retry_errors({"first_byte_timeout": 60.0}) == ("fetch/error/timeout",)
    assert failure_keys(("fetch/error/blocked-address",)) == [
        "fetch/error/blocked-address",
        "robots/unreachable/blocked-address",
    ]


def test_fetched_nothing(tmp_path: Path) -> None:
    out = stored_crawl(tmp_path)
    assert not fetched_nothing(out)  # no run history
    nothing = {"ended": "complete", "pages": 0, "frontier": {"done": 0, "failed": 1}}
    end_of_run(out, nothing)
    assert fetched_nothing(out)
    append_run_record(out / "runs.jsonl", {"event": "start", "run": 2, "time": 1.9e9})
    assert not fetched_nothing(out)  # a run going on, or killed
    end = {"event": "end", "run": 2, "time": 1.9e9, "stats": nothing}
    append_run_record(out / "runs.jsonl", end)
    assert fetched_nothing(out)
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    other = stored_crawl(tmp_path / "b")
    end_of_run(other, {"ended": "complete", "pages": 3, "frontier": {"done": 3}})
    assert not fetched_nothing(other)
    killed = stored_crawl(tmp_path / "c")
    end_of_run(killed, None)
    assert not fetched_nothing(killed)


# ------------------------------------------------------------------ new output directories


def test_new_directory_problem(tmp_path: Path) -> None:
    assert new_directory_problem(tmp_path / "new") is None
    assert new_directory_problem(tmp_path) is None  # empty
    for name in ("a", "b", "c", "d", "e"):
        (tmp_path / name).write_text("x")
    problem = new_directory_problem(tmp_path, holds=", not a gossamer crawl")
    assert problem == (
        f"-o {tmp_path}: the directory holds other files (a, b, c and 2 more), not a gossamer "
        "crawl; nothing was written: give a new or empty directory"
    )
    assert "exists and is not a directory" in str(new_directory_problem(tmp_path / "a"))


def test_a_pool_that_shrank_counts_every_worker_and_its_retired_sigterm_is_not_its_end(
    tmp_path: Path,
) -> None:
    parts = {"w0": ("complete", 50), "w1": ("SIGTERM", 7), "w2": ("SIGTERM", 3),
             "w10": ("complete", 1)}  # fmt: skip
    for name, (ended, pages) in parts.items():
        write_stats(tmp_path / f"stats-{name}.json", {"ended": ended, "pages": pages})
    front = frontier(done=61)
    merged = merge_stats(tmp_path, 4, 0.0, [], front, None, [0, 0, 0, 0],
                         retired=["w1", "w2"])  # fmt: skip
    assert merged["ended"] == "complete" and merged["workers"] == 4
    assert merged["pages"] == 61 and merged["pages_per_worker"] == [50, 7, 3, 1]  # w10 last
    assert merged["workers_retired"] == ["w1", "w2"]
    # the same parts without the scale-down: a worker stopped by a signal sent to it alone
    assert merge_stats(tmp_path, 4, 0.0, [], front, None, [0, 143, 143, 0])["ended"] == "SIGTERM"

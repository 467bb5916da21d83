"""The progress display (JSON lines, rich on a terminal), the stop notes and the end summary."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gossamer.frontier import FrontierStats
from gossamer.report.progress import (
    ProgressDisplay,
    ProgressSample,
    WorkersProgress,
    diagnose,
    end_summary,
    ended,
    nothing_fetched,
    print_summary,
    show_worker_progress,
    stop_note,
    utc_timestamp,
)


class _Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _display(stream: io.StringIO, **kw: Any) -> tuple[ProgressDisplay, _Clock]:
    clock = _Clock()
    wall = _Clock(1_764_000_000.25)  # 2025-11-24T16:00:00.250Z

    def wall_now() -> float:
        return wall.t + (clock.t - 100.0)

    return ProgressDisplay(stream, clock=clock, wall=wall_now, **kw), clock


def test_json_lines_carry_a_timestamp_and_the_elapsed_time() -> None:
    out = io.StringIO()
    display, clock = _display(out, terminal=False)
    assert display.interval == 10.0
    for k in range(1, 4):
        clock.t += 10.0
        display.update(ProgressSample(pages=100 * k, queued=50, active_hosts=7, errors=k))
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[0] == {
        "event": "progress",
        "ts": "2025-11-24T16:00:10.250Z",
        "elapsed_s": 10.0,
        "run_pages": 100,
        "crawl_pages": 100,
        "pages_per_s": 10.0,
        "queued": 50,
        "active_hosts": 7,
        "errors": 1,
    }
    assert [x["elapsed_s"] for x in lines] == [10.0, 20.0, 30.0]
    assert lines[2]["pages_per_s"] == 10.0


def test_json_lines_with_max_pages_give_the_eta() -> None:
    out = io.StringIO()
    display, clock = _display(out, terminal=False, max_pages=1000, fields={"crawl": "c1"})
    clock.t += 10.0
    display.update(ProgressSample(pages=200, queued=5, active_hosts=1, done=250, workers=2))
    line = json.loads(out.getvalue())
    assert line["crawl"] == "c1" and line["workers"] == 2
    assert (line["run_pages"], line["crawl_pages"], line["max_pages"]) == (200, 250, 1000)
    assert line["eta_s"] == 37.5  # 750 left at this run's 20 pages/s (50 done before it)


def _frontier(done: int) -> FrontierStats:
    return FrontierStats(queued=5, leased=1, done=done, failed=0, retries=0, hosts=2,
                         ready_hosts=1, leased_hosts=1, dead_hosts=0, dropped_by_budget=0,
                         duplicates_seen=0, next_ready_at=None)  # fmt: skip


class _Worker:
    """What show_worker_progress reads of a crawler: at first 0 pages fetched by this
    worker and 80 done in the crawl, then 2 and 82; `asked` is set at the third reading
    (two lines shown by then)."""

    def __init__(self) -> None:
        self.calls = 0
        self.asked = asyncio.Event()

    def publish_snapshot(self) -> Any:
        self.calls += 1
        return SimpleNamespace(pages=0 if self.calls == 1 else 2, active_hosts=1, error_count=0)

    async def frontier_statistics(self) -> FrontierStats:
        if self.calls >= 3:
            self.asked.set()
        return _frontier(80 if self.calls == 1 else 82)


def test_json_lines_say_whose_pages_they_count() -> None:
    """A worker joining a crawl (a cluster's, or a resumed one) with 80 pages done: 2
    fetched by this run, 82 in the crawl. The line names each count for what it counts (before,
    `"pages": 2` and `"done": 82` side by side); a pool's parent knows the crawl's only."""
    out = io.StringIO()
    display, _ = _display(out, terminal=False, max_pages=900)
    display.interval = 0.01

    async def show() -> None:
        worker = _Worker()
        task = asyncio.create_task(show_worker_progress(worker, display))  # type: ignore[arg-type]
        await asyncio.wait_for(worker.asked.wait(), 10)
        task.cancel()

    asyncio.run(show())
    line = json.loads(out.getvalue().splitlines()[-1])
    assert (line["run_pages"], line["crawl_pages"], line["max_pages"]) == (2, 82, 900)
    assert "pages" not in line and "done" not in line, line

    parent = io.StringIO()
    display, _ = _display(parent, terminal=False, max_pages=900)
    WorkersProgress(display, [], grace_s=3.0).show(_frontier(82), workers=2)
    line = json.loads(parent.getvalue())
    assert (line["crawl_pages"], line["workers"]) == (82, 2)
    assert not {"pages", "done"} & set(line), line

    # on a terminal: this run's pages, and the crawl's when they differ
    screen = io.StringIO()
    display, _ = _display(screen, terminal=True, max_pages=900)
    display.update(ProgressSample(pages=2, queued=5, active_hosts=1, done=82))
    display.close()
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    assert "2 pages this run, 82 in all" in plain and "82/900" in plain, plain


def test_a_note_is_a_json_line_and_marks_the_progress_stopping() -> None:
    out = io.StringIO()
    display, clock = _display(out, terminal=False)
    clock.t += 1.5
    display.note("stopping", "stopping (Ctrl-C): …", signal="SIGINT", in_flight=3)
    display.update(ProgressSample(pages=1, queued=0, active_hosts=0))
    note, progress = (json.loads(x) for x in out.getvalue().splitlines())
    assert note == {
        "event": "stopping",
        "ts": "2025-11-24T16:00:01.750Z",
        "elapsed_s": 1.5,
        "message": "stopping (Ctrl-C): …",
        "signal": "SIGINT",
        "in_flight": 3,
    }
    assert progress["stopping"] is True


def test_on_a_terminal_rich_draws_a_live_display() -> None:
    out = io.StringIO()  # not a TTY: forced, as rich's own tests do
    display, clock = _display(out, terminal=True, max_pages=1000)
    assert display.interval == 0.5
    clock.t += 5.0
    display.update(ProgressSample(pages=400, queued=1234, active_hosts=12, errors=3, done=400))
    display.note("stopping", "stopping (Ctrl-C): waiting for 2 requests")
    display.close()
    screen = out.getvalue()
    assert "\x1b[" in screen and '"event"' not in screen  # drawn, not JSON
    assert "━" in screen  # the bar
    assert "400/1,000" in screen and "40%" in screen and "ETA 0:00:07" in screen
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    for text in ("400", "80 pages/s", "queue 1,234", "active hosts 12", "errors 3",
                 "elapsed 0:00:05", "gossamer: stopping (Ctrl-C): waiting for 2 requests"):
        assert text in plain, text  # fmt: skip


def test_without_max_pages_no_bar() -> None:
    out = io.StringIO()
    display, clock = _display(out, terminal=True)
    clock.t += 1.0
    display.update(ProgressSample(pages=10, queued=1, active_hosts=1, failed=2, workers=2))
    display.close()
    screen = out.getvalue()
    assert "━" not in screen and "ETA" not in screen
    assert "failed URLs 2" in screen and "workers 2" in screen


def test_a_resume_shows_this_runs_pages_and_rate_beside_the_crawls_total() -> None:
    """5 s into a resume of a crawl that had 528 pages: 300 of this run, 60 pages/s — not
    828 pages at 161 pages/s (the crawl's total over this run's seconds)."""
    out = io.StringIO()
    display, clock = _display(out, terminal=True)
    clock.t += 5.0
    display.update(ProgressSample(pages=300, queued=10, active_hosts=2, done=828))
    display.close()
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "300 pages this run, 828 in all  60 pages/s" in plain, plain
    out = io.StringIO()
    display, clock = _display(out, terminal=False, max_pages=2000)
    clock.t += 10.0
    display.update(ProgressSample(pages=300, queued=10, active_hosts=2, done=828))
    line = json.loads(out.getvalue())
    assert (line["run_pages"], line["pages_per_s"], line["crawl_pages"]) == (300, 30.0, 828)
    assert line["eta_s"] == round((2000 - 828) / 30.0, 1)
    # without --max-pages: both counts, named for what they count
    out = io.StringIO()
    display, clock = _display(out, terminal=False)
    clock.t += 10.0
    display.update(ProgressSample(pages=300, queued=10, active_hosts=2, done=828))
    display.update(ProgressSample(pages=400, queued=10, active_hosts=2))
    first, second = (json.loads(x) for x in out.getvalue().splitlines())
    assert (first["run_pages"], first["crawl_pages"]) == (300, 828)
    assert (second["run_pages"], second["crawl_pages"]) == (400, 400)


def test_a_pool_parent_shows_the_pages_its_workers_fetched() -> None:
    """The frontier counts a batch's pages when it completes; the workers' heartbeats count
    each page as it is fetched: the parent shows the larger, this run's beside the total."""
    st = FrontierStats(
        queued=11, leased=1, done=529, failed=0, retries=0, hosts=1, ready_hosts=0,
        leased_hosts=1, dead_hosts=0, dropped_by_budget=0, duplicates_seen=0, next_ready_at=None,
    )  # fmt: skip
    sample = ProgressSample.of_frontier(st, workers=2, pages=7, done_before=528)
    assert (sample.pages, sample.done, sample.workers) == (7, 535, 2)
    sample = ProgressSample.of_frontier(st, workers=2, pages=None, done_before=528)
    assert (sample.pages, sample.done) == (1, 529)
    sample = ProgressSample.of_frontier(st, workers=1)  # `crawl --redis`: the frontier's
    assert (sample.pages, sample.done) == (529, 529)


def test_utc_timestamp() -> None:
    assert utc_timestamp(0.0) == "1970-01-01T00:00:00.000Z"


def test_stop_notes() -> None:
    first = stop_note("SIGINT", in_flight=1, grace_s=3.0, second=False)
    assert first.startswith("stopping (Ctrl-C): sending no new request; waiting up to 3 s")
    assert "1 request in flight" in first and "Ctrl-C again stops sooner" in first
    pool = stop_note("SIGTERM", in_flight=None, grace_s=3.0, second=False, pool=True)
    assert "(SIGTERM): the workers send no new request" in pool
    assert "the requests in flight" in pool
    second = stop_note("SIGINT", in_flight=4, grace_s=3.0, second=True)
    assert second.startswith("stopping now (Ctrl-C again): 4 requests in flight abandoned")


# ---------------------------------------------------------------------------- the end


def _stats(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "finished": True, "stopped_by": None, "elapsed_s": 12.5, "pages": 0, "requests": 0,
        "bytes": 0, "statuses": {}, "errors": {}, "dropped": {}, "frontier": {"done": 0},
    }  # fmt: skip
    base.update(kw)
    return base


@pytest.mark.parametrize(
    ("errors", "dropped", "kind", "words"),
    [
        ({"robots/fetch/error/blocked-address": 2}, {"robots/disallowed": 2},
         "fetch/error/blocked-address", "add --allow-private"),
        ({"robots/fetch/error/dns": 1, "fetch/error/dns": 3}, {}, "fetch/error/dns", "DNS"),
        ({"robots/fetch/error/connect": 1}, {"robots/disallowed": 1}, "fetch/error/connect",
         "refused"),
        ({"fetch/error/timeout": 5, "fetch/error/reset": 1}, {}, "fetch/error/timeout",
         "first_byte_timeout"),
        ({}, {"robots/disallowed": 4}, "robots/disallowed", "--ignore-robots"),
        ({}, {"robots/unreachable/http-503": 4}, "robots/unreachable/http-503",
         "robots.txt could not be fetched"),
        ({"fetch/error/empty-reply": 2}, {}, "fetch/error/empty-reply", "empty-reply"),
    ],
)  # fmt: skip
def test_diagnose_names_the_main_failure_and_the_fix(
    errors: dict[str, int], dropped: dict[str, int], kind: str, words: str
) -> None:
    found = diagnose(_stats(errors=errors, dropped=dropped))
    assert found is not None and found.kind == kind
    assert words in found.line()


def test_nothing_fetched() -> None:
    assert nothing_fetched(_stats(requests=1, errors={"robots/fetch/error/dns": 1}))
    assert not nothing_fetched(_stats(pages=1, requests=1))
    assert not nothing_fetched(_stats())  # nothing to do is not a failure
    # a resumed crawl whose last URLs all failed fetched pages in its earlier runs
    assert not nothing_fetched(
        _stats(requests=2, errors={"fetch/error/timeout": 2}, frontier={"done": 40})
    )


def test_ended_prefers_the_stats_own_word() -> None:
    assert ended(_stats(ended="max-pages")) == "max-pages"
    assert ended(_stats(finished=False, stopped_by="SIGTERM")) == "SIGTERM"
    assert ended(_stats(finished=False, stopped_by="error")) == "error"
    assert ended(_stats(frontier={"done": 50}), max_pages=50) == "max-pages"
    assert ended(_stats(frontier={"done": 5}), max_pages=50) == "complete"


def test_end_summary_lines(tmp_path: Path) -> None:
    for name in ("warc", "graph"):
        (tmp_path / name).mkdir()
    for name in ("crawl.log.jsonl", "stats.json", "warc/index.cdxj"):
        (tmp_path / name).write_text("")
    stats = _stats(
        finished=False, stopped_by="SIGINT", pages=1000, requests=1100, bytes=12_345_678,
        elapsed_s=10.0,
        errors={"fetch/error/timeout": 40, "fetch/error/reset": 9, "robots/fetch/error/dns": 1},
        statuses={"200": 990, "404": 8, "500": 2}, dropped={"scope/non-html": 30},
    )  # fmt: skip
    lines = end_summary(stats, tmp_path)
    assert lines == [
        "gossamer: crawl stopped by Ctrl-C (SIGINT): 1,000 pages in 0:00:10 (100.0 pages/s)",
        "  1,100 requests, 12.3 MB received",
        "  errors: 50 (fetch/error/timeout 40, fetch/error/reset 9, robots/fetch/error/dns 1)",
        "  HTTP errors: 10 (404 8, 500 2)",
        "  not fetched: 30 URLs (scope/non-html 30)",
        f"  outputs: WARC {tmp_path}/warc/, CDX index {tmp_path}/warc/index.cdxj, "
        f"crawl log {tmp_path}/crawl.log.jsonl, graph {tmp_path}/graph/, "
        f"statistics {tmp_path}/stats.json",
        f"  to go on: gossamer crawl --resume {tmp_path}",
    ]


def test_end_summary_counts_robots_txt_and_sitemaps_apart(tmp_path: Path) -> None:
    # `statuses` counts every response; robots.txt's and sitemaps' are not the pages' HTTP
    # errors: their own lines
    stats = _stats(
        pages=100, requests=110, statuses={"200": 95, "404": 12, "500": 3},
        robots_sitemap_statuses={"robots/200": 4, "robots/404": 5, "robots/500": 1,
                                 "sitemap/200": 2, "sitemap/404": 1},
    )  # fmt: skip
    lines = end_summary(stats, tmp_path)
    assert "  HTTP errors: 8 (404 6, 500 2)" in lines, lines
    assert "  robots.txt: 10 responses (404 5, 200 4, 500 1)" in lines, lines
    assert "  sitemaps: 3 responses (200 2, 404 1)" in lines, lines
    only_robots = _stats(pages=5, requests=7, statuses={"200": 5, "404": 2},
                         robots_sitemap_statuses={"robots/404": 2})  # fmt: skip
    lines = end_summary(only_robots, tmp_path)
    assert not any("HTTP errors" in line for line in lines), lines
    assert "  robots.txt: 2 responses (404 2)" in lines


def test_end_summary_when_most_requests_fail(tmp_path: Path) -> None:
    stats = _stats(pages=3, requests=10, errors={"fetch/error/connect": 7})
    lines = end_summary(stats, tmp_path)
    said = "  most requests failed: connections were refused"
    assert any(line.startswith(said) for line in lines), lines


def test_print_summary_when_nothing_was_fetched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], human_logs: None
) -> None:
    stats = _stats(requests=1, errors={"robots/fetch/error/blocked-address": 1},
                   dropped={"robots/disallowed": 1})  # fmt: skip
    out = io.StringIO()
    assert print_summary(out, stats, tmp_path)
    text = out.getvalue()
    assert text.endswith("\n") and text.startswith("gossamer: crawl ended with no page fetched")
    assert text.splitlines()[-1].startswith(
        "gossamer: error: no page fetched: the seeds resolve to loopback/private addresses"
    )
    # quiet (-q): no summary, but the error still
    assert print_summary(None, stats, tmp_path)
    err = capsys.readouterr().err
    assert err.startswith("gossamer: error: no page fetched:") and err.count("\n") == 1
    # a stop is not "nothing fetched": it says how to go on instead
    assert not print_summary(io.StringIO(), {**stats, "stopped_by": "SIGINT"}, tmp_path)

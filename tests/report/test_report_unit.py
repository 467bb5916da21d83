"""`gossamer report` on crawl directories built with the real writers: graph parts, run
histories (killed runs, runs before the history, none at all), errors as the crawler counts
them."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path

import pytest

from gossamer.crawldir import RUNS
from gossamer.report.crawl import (
    crawl_report,
    end_run,
    graph_counts,
    print_report,
    start_run,
)
from gossamer.sinks import (
    CrawlLog,
    GraphWriter,
    append_run_record,
    read_graph,
    read_run_records,
    write_stats,
)

T0 = 1_800_000_000.0


def crawl_dir(tmp_path: Path) -> Path:
    out = tmp_path / "crawl"
    out.mkdir()
    (out / "crawl.json").write_text(json.dumps({"seeds": ["http://a.example/"]}))
    return out


def log_fetches(out: Path, *fetches: tuple[float, str, int | None, str]) -> None:
    """(start time, URL, status, outcome) lines for pages at depth 1 (robots.txt: depth None);
    no status: a time-out."""
    log = CrawlLog(out / "crawl.log.jsonl")
    for started, url, status, outcome in fetches:
        robots = url.endswith("/robots.txt")
        log.write(
            url=url,
            status=status,
            outcome=outcome,
            nbytes=100 if status else 0,
            duration=0.5,
            depth=None if robots else 1,
            error="fetch/error/timeout" if status is None else None,
            started_at=started,
        )
    log.close()


# ------------------------------------------------------------------ graph


def test_graph_counts_dedupe_nodes_and_edges_across_parts(tmp_path: Path) -> None:
    a, b, c, d = (f"http://{h}.example/" for h in "abcd")
    w0 = GraphWriter(tmp_path, part="w0")
    w0.add_edges(a, [b, c])
    w0.close()
    w1 = GraphWriter(tmp_path, part="w1")
    w1.add_edges(d, [b, c])  # b and c are in both parts' nodes
    w1.add_edge(a, b)  # the same edge recorded again by another worker (after a crash)
    w1.add_edge(a, b, kind="redirect")  # another kind: another edge
    w1.close()
    with (tmp_path / "graph" / "edges-w1.tsv").open("a") as f:
        f.write("123\t45")  # a torn last line of a killed worker
    counts = graph_counts(tmp_path / "graph")
    graph = read_graph(tmp_path)
    assert counts["nodes"] == len(graph.nodes) == 4  # not 3 + 4 lines, not counting headers
    assert counts["edges"] == len(graph.edges) == 5
    assert counts["edges_by_kind"] == {"link": 4, "redirect": 1}
    assert counts["parts"] == ["w0", "w1"]


def test_graph_counts_single_part_and_no_graph(tmp_path: Path) -> None:
    g = GraphWriter(tmp_path)
    g.add_edge("http://a.example/", "http://b.example/")
    g.close()
    assert graph_counts(tmp_path / "graph") == {
        "nodes": 2,
        "edges": 1,
        "edges_by_kind": {"link": 1},
        "parts": [""],
    }
    assert graph_counts(tmp_path / "nothing")["nodes"] == 0


# ------------------------------------------------------------------ runs


def test_runs_are_told_apart_and_summed(tmp_path: Path) -> None:
    out = crawl_dir(tmp_path)
    runs = out / RUNS
    append_run_record(runs, {"event": "start", "run": 1, "time": T0, "resume": False})
    append_run_record(runs, {"event": "start", "run": 2, "time": T0 + 100, "resume": True})
    stats = {"finished": True, "elapsed_s": 20.0, "pages": 2, "dropped": {"scope/x": 3}}
    append_run_record(runs, {"event": "end", "run": 2, "time": T0 + 120, "exit": 0, "stats": stats})
    log_fetches(
        out,
        (T0 + 1, "http://a.example/robots.txt", 200, "robots"),
        (T0 + 2, "http://a.example/", 200, "ok"),
        (T0 + 9, "http://a.example/p", 200, "ok"),  # run 1 was killed after this one
        (T0 + 101, "http://a.example/p", 200, "ok"),  # fetched again: not acknowledged
        (T0 + 102, "http://a.example/q", 404, "fetch/status/404"),
    )
    report = crawl_report(out)
    one, two = report["runs"]
    assert (one["log_lines"], one["fetches"], two["log_lines"], two["fetches"]) == (3, 2, 2, 2)
    assert one["ended_by"] == "killed or crashed (no end recorded)"
    assert one["duration_s"] == 9.5 and one["duration_estimated"]  # its last fetch's end
    # statistics from before `ended` existed: `finished` (no frontier counts) was complete
    assert two["end_reason"] == "complete" and two["ended_by"] == "complete: frontier exhausted"
    assert two["duration_s"] == 20.0
    totals = report["totals"]
    assert totals["runs"] == 2
    assert (totals["pages"], totals["fetches"], totals["requests"]) == (3, 4, 5)
    assert totals["bytes"] == 500
    assert totals["duration_s"] == 29.5 and totals["duration_estimated"]
    assert totals["dropped"] == {"scope/x": 3} and totals["dropped_runs"] == 1
    assert totals["statuses"] == {"200": 4, "404": 1}


def test_lines_before_the_history_are_an_unrecorded_run(tmp_path: Path) -> None:
    """A crawl begun before run histories were kept, then resumed: both runs count."""
    out = crawl_dir(tmp_path)
    log_fetches(
        out, (T0, "http://a.example/", 200, "ok"), (T0 + 4, "http://a.example/b", 200, "ok")
    )
    append_run_record(out / RUNS, {"event": "start", "run": 1, "time": T0 + 50})
    log_fetches(out, (T0 + 51, "http://a.example/c", 200, "ok"))
    report = crawl_report(out)
    assert [r["run"] for r in report["runs"]] == [0, 1]
    assert report["runs"][0]["ended_by"] == "unrecorded (no run history)"
    assert report["runs"][0]["duration_s"] == 4.5  # first line to the end of the last
    assert report["totals"]["pages"] == 3 and report["totals"]["runs"] == 2


def test_a_directory_without_history_is_one_run_with_its_statistics(tmp_path: Path) -> None:
    """A cluster worker's directory (`run_engine` alone writes it): stats.json is its run's."""
    out = crawl_dir(tmp_path)
    log_fetches(
        out, (T0, "http://a.example/", 200, "ok"), (T0 + 2, "http://a.example/b", 200, "ok")
    )
    write_stats(out / "stats.json", {"finished": True, "elapsed_s": 7.25, "dropped": {"d": 1}})
    (out / "worker.json").write_text(json.dumps({"crawl": "c1", "worker": "w3"}))
    report = crawl_report(out)
    (run,) = report["runs"]
    assert run["cluster_worker"] == "w3" and run["end_reason"] == "complete"
    assert run["duration_s"] == 7.25 and not run["duration_estimated"]
    assert report["totals"]["dropped"] == {"d": 1} and report["totals"]["pages"] == 2
    # without worker.json (a crawl older than run histories, perhaps resumed): stats.json may
    # be the last of several runs', so the log tells the duration
    (out / "worker.json").unlink()
    (run,) = crawl_report(out)["runs"]
    assert run["ended_by"] == "unrecorded (no run history)"
    assert run["duration_s"] == 2.5 and run["duration_estimated"]


def test_errors_are_counted_as_the_crawler_counts_them(tmp_path: Path) -> None:
    out = crawl_dir(tmp_path)
    log_fetches(
        out,
        (T0, "http://a.example/robots.txt", None, "robots"),
        (T0, "http://a.example/", None, "fetch/error/timeout"),
        (T0, "http://a.example/", 503, "fetch/status/503"),  # retried: not a page
        (T0, "http://a.example/", 200, "ok"),
        (T0, "http://a.example/gone", 404, "fetch/status/404"),  # a page, not an error
    )
    totals = crawl_report(out)["totals"]
    assert totals["errors"] == {"fetch/error/timeout": 1, "robots/fetch/error/timeout": 1}
    assert totals["pages"] == 2 and totals["fetches"] == 2
    assert totals["statuses"] == {"200": 1, "404": 1, "503": 1}  # no response: no status


def test_start_and_end_run_write_the_history(tmp_path: Path) -> None:
    out = crawl_dir(tmp_path)
    write_stats(out / "stats.json", {"pages": 99})  # an older run's statistics
    an_hour_ago = time.time() - 3600
    os.utime(out / "stats.json", (an_hour_ago, an_hour_ago))
    number, started = start_run(out, resume=False, workers=2)
    end_run(out, number, started, 137)  # stats.json was not rewritten: not this run's
    number, started = start_run(out, resume=True, workers=2)
    write_stats(out / "stats.json", {"pages": 5})
    end_run(out, number, started, 0)
    records = read_run_records(out / RUNS)
    assert [(r["event"], r["run"]) for r in records] == [
        ("start", 1), ("end", 1), ("start", 2), ("end", 2)
    ]  # fmt: skip
    assert records[1]["stats"] is None and records[1]["exit"] == 137
    assert records[2]["resume"] is True and records[2]["workers"] == 2
    assert records[3]["stats"] == {"pages": 5} and records[3]["time"] >= records[2]["time"]


def test_a_torn_history_line_is_skipped_and_the_next_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / RUNS
    append_run_record(path, {"event": "start", "run": 1, "time": T0})
    with path.open("a") as f:
        f.write('{"event": "end", "ru')  # killed while writing
    append_run_record(path, {"event": "start", "run": 2, "time": T0 + 1})
    assert [r["run"] for r in read_run_records(path)] == [1, 2]


def test_report_of_a_directory_that_is_no_crawl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], human_logs: None
) -> None:
    assert print_report(tmp_path) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a crawl directory" in err


def test_the_report_says_why_and_when_the_crawl_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = crawl_dir(tmp_path)
    runs = out / RUNS
    frontier = {"queued": 3, "leased": 0, "done": 2, "next_ready_at": T0 + 130}
    limited = {"ended": "max-pages", "elapsed_s": 9.0, "frontier": frontier}
    append_run_record(runs, {"event": "start", "run": 1, "time": T0, "resume": False})
    append_run_record(runs, {"event": "end", "run": 1, "time": T0 + 10, "stats": limited})
    append_run_record(
        runs, {"event": "start", "run": 2, "time": T0 + 100, "changed": {"max_pages": None}}
    )
    write_stats(out / "stats.json", limited)
    log_fetches(out, (T0 + 1, "http://a.example/", 200, "ok"))
    report = crawl_report(out)
    one, two = report["runs"]
    assert (one["end_reason"], two["end_reason"]) == ("max-pages", None)
    assert one["ended_iso"] == datetime.fromtimestamp(T0 + 10).astimezone().isoformat()
    assert two["changed"] == {"max_pages": None} and two["ended_iso"] is None
    assert report["end_reason"] is None  # the last run: killed
    assert report["stats"]["frontier"]["next_ready_at_iso"].startswith("2027-01-15T")

    assert print_report(out) == 0
    text = capsys.readouterr().out
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(T0))
    assert f"    run 1  {started}  10.0 s  1 page fetches  max-pages: page limit reached\n" in text
    assert "killed or crashed (no end recorded)  (resumed with --max-pages none)\n" in text
    assert (
        f"  ended        killed or crashed (no end recorded) (last run); "
        f"to go on: gossamer crawl --resume {out}\n"
    ) in text
    ready = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(T0 + 130))
    assert f"next_ready_at {ready}\n" in text and str(T0 + 130) not in text

    # the last run ended at the page limit: when, and how to go on
    append_run_record(runs, {"event": "end", "run": 2, "time": T0 + 110, "stats": limited})
    assert print_report(out) == 0
    text = capsys.readouterr().out
    at = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(T0 + 110))
    assert (
        f"  ended        max-pages: page limit reached at {at} (last run); to go on: "
        f"gossamer crawl --resume {out} --max-pages N (N > 2)\n"
    ) in text

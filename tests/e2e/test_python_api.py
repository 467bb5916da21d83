"""The Python API (docs/python.md) against a real static site served by nginx: every page
yielded once, a loop left early and resumed fetching only the rest (from nginx's access
log), settings checked as the command checks them, the asyncio twin, `Crawl`'s control,
`Page`'s reads and the graph helpers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _python_site import python_site

import gossamer
from gossamer.testweb._nginx import run_nginx

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


def test_forty_pages_from_python_c(tmp_path: Path) -> None:
    site = python_site(tmp_path, 40)
    code = (
        "import gossamer; print(sum(p.status == 200 for p in "
        f"gossamer.crawl([{site.base!r}], allow_private=True, delay=0)))"
    )
    with run_nginx(site.server):
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=_env(),
            timeout=120, check=False,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "40"
    pages = site.pages()
    assert len(pages) == 40 and len(set(pages)) == 40  # each page once


def test_a_loop_left_after_ten_pages_resumes_with_the_other_thirty(tmp_path: Path) -> None:
    site = python_site(tmp_path, 40)
    out = tmp_path / "crawl"
    with run_nginx(site.server):
        first: list[str] = []
        for page in gossamer.crawl([site.base], out, allow_private=True, delay=0):
            first.append(page.url)
            if len(first) == 10:
                break
        assert (out / "crawl.json").exists()  # kept: `output` was given
        since = site.log_length()
        second = [p.url for p in gossamer.crawl([site.base], out, allow_private=True, delay=0)]
        fetched_again = site.pages(since)
    everything = {site.base} | {f"{site.base}p{k}.html" for k in range(1, 40)}
    assert len(first) == 10 and len(second) == 30
    assert set(first) | set(second) == everything
    assert not set(first) & set(second)
    # the second run fetched exactly the 30 pages the first did not yield
    prefix = site.base.rstrip("/")
    assert sorted(prefix + t for t in fetched_again) == sorted(second)
    # and a crawl run to its end has nothing left: a third call yields nothing
    with run_nginx(site.server):
        assert list(gossamer.crawl([site.base], out, allow_private=True, delay=0)) == []


def test_settings_are_checked_as_the_command_checks_them(tmp_path: Path) -> None:
    with pytest.raises(gossamer.SettingsError, match=r"no setting 'dealy'; did you mean delay"):
        gossamer.crawl(["http://127.0.0.1:1/"], tmp_path / "c", dealy=0)
    with pytest.raises(gossamer.SettingsError, match=r"delay='soon'.*number of seconds"):
        gossamer.crawl(["http://127.0.0.1:1/"], tmp_path / "c", delay="soon")
    with pytest.raises(gossamer.SettingsError, match="http"):
        gossamer.crawl(["127.0.0.1/"], tmp_path / "c")
    assert not (tmp_path / "c").exists()  # nothing written for a refused crawl


def test_a_crawl_that_fetches_nothing_raises_why(tmp_path: Path) -> None:
    site = python_site(tmp_path, 3)
    with run_nginx(site.server), pytest.raises(gossamer.CrawlError, match="allow-private"):
        list(gossamer.crawl([site.base], delay=0))  # loopback refused without allow_private


def test_pages_carry_what_was_fetched(tmp_path: Path) -> None:
    site = python_site(tmp_path, 5, broken=2)
    with run_nginx(site.server):
        pages = {p.url: p for p in gossamer.crawl(site.base, allow_private=True, delay=0)}
    home = pages[site.base]
    assert home.status == 200 and home.ok and home.final_url == home.url
    assert home.depth == 0 and home.title == "Home"
    assert home.headers["content-type"].startswith("text/html")
    assert home.body.startswith(b"<!doctype html>") and "<h1>Home</h1>" in home.text
    assert [link.url for link in home.links] == [f"{site.base}p{k}.html" for k in range(1, 5)]
    assert {link.kind for link in home.links} == {"a"}
    assert [url for url, _ in home.followed] == [link.url for link in home.links]
    assert [n.text() for n in home.css("li a")] == [f"p{k}.html" for k in range(1, 5)]
    assert home.xpath("//meta[@name='description']/@content") == ["the home page"]
    assert home.fetched_at > 0 and home.elapsed >= 0
    p1 = pages[f"{site.base}p1.html"]
    assert p1.depth == 1 and p1.css_first(".price").text() == "1.99"  # type: ignore[union-attr]
    gone = pages[f"{site.base}gone-1.html"]
    assert gone.status == 404 and not gone.ok and gone.depth == 2
    assert len(pages) == 5 + 2


def test_acrawl_in_an_asyncio_program(tmp_path: Path) -> None:
    site = python_site(tmp_path, 8)

    async def main() -> list[str]:
        ticks = 0

        async def ticker() -> None:  # the program's loop keeps running meanwhile
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.create_task(ticker())
        urls = [p.url async for p in gossamer.acrawl([site.base], allow_private=True, delay=0)]
        task.cancel()
        assert ticks > 0
        return urls

    with run_nginx(site.server):
        urls = asyncio.run(main())
    assert len(urls) == 8 == len(set(urls))


def test_crawl_control_stats_stop_summary_resume(tmp_path: Path) -> None:
    site = python_site(tmp_path, 20)
    out = tmp_path / "crawl"
    with run_nginx(site.server):
        with gossamer.Crawl([site.base], out, allow_private=True, delay=0) as run:
            seen = []
            for page in run:
                seen.append(page.url)
                if len(seen) == 5:
                    assert run.stats().pages >= 5
                    summary = run.stop()
                    break
        assert summary is not None and summary is run.summary
        assert summary.ended == "stopped" and summary.exit_code == 0
        assert summary.done == 5 and summary.queued > 0 and not summary.complete
        assert summary.output == out
        rest = gossamer.Crawl.resume(out)
        assert rest.resumed
        urls = [p.url for p in rest]
        assert rest.summary is not None and rest.summary.complete
        assert rest.summary.done == 20 and rest.stats().pages == 15
    assert len(urls) == 15 and not set(urls) & set(seen)
    # what `gossamer report` reads from the files agrees
    r = subprocess.run(
        [sys.executable, "-m", "gossamer", "report", str(out), "--json"],
        capture_output=True, text=True, env=_env(), timeout=60, check=True,
    )  # fmt: skip
    totals = json.loads(r.stdout)["totals"]
    assert totals["pages"] == 20 and totals["runs"] == 2
    # the page waiting for the program when it stopped was refused, and fetched again
    assert totals["fetches"] - totals["pages"] <= 1


def test_run_crawls_to_the_end_with_an_extractor_and_no_page_read(tmp_path: Path) -> None:
    site = python_site(tmp_path, 6)
    (tmp_path / "mine.py").write_text(
        "def titles(page):\n    return {'title': page.title}\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        run = gossamer.Crawl(site.base, tmp_path / "c", allow_private=True, delay=0,
                             extract="mine:titles")  # fmt: skip
        with run_nginx(site.server):
            summary = run.run()
    finally:
        sys.path.remove(str(tmp_path))
    assert summary.complete and summary.pages == 6
    feed = (tmp_path / "c" / "items.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["item"]["title"] for line in feed) == [
        "Home", *(f"Page {k}" for k in range(1, 6))
    ]


def test_a_temporary_crawl_directory_is_removed(tmp_path: Path) -> None:
    site = python_site(tmp_path, 3)
    with run_nginx(site.server):
        run = gossamer.Crawl([site.base], allow_private=True, delay=0)
        assert run.output.exists() is False or run.output.parent.exists()
        assert len(list(run)) == 3
    assert run.summary is not None and run.summary.output is None
    assert not run.output.parent.exists()


def test_graph_helpers_give_the_command_s_figures(tmp_path: Path) -> None:
    site = python_site(tmp_path, 10)
    out = tmp_path / "crawl"
    with run_nginx(site.server):
        assert len(list(gossamer.crawl(site.base, out, allow_private=True, delay=0))) == 10
    r = subprocess.run(
        [sys.executable, "-m", "gossamer", "graph", "stats", str(out), "--json"],
        capture_output=True, text=True, env=_env(), timeout=60, check=True,
    )  # fmt: skip
    ours, theirs = gossamer.graph.stats(out), json.loads(r.stdout)
    ours.pop("seconds"), theirs.pop("seconds")  # (how long each took)
    assert ours == theirs
    graph = gossamer.graph.load(out)
    assert graph.nodes == 10 and graph.edges == 18
    nx_graph = gossamer.graph.to_networkx(graph)
    assert nx_graph.number_of_nodes() == 10 and nx_graph.number_of_edges() == 18


def test_importing_gossamer_is_cheap() -> None:
    code = (
        "import sys, gossamer; print(' '.join(sorted(m for m in sys.modules "
        "if m.startswith('gossamer'))))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(),
        timeout=60, check=True,
    )  # fmt: skip
    assert r.stdout.split() == ["gossamer", "gossamer._version"]
    assert set(gossamer.__all__) <= set(dir(gossamer))


CTRL_C = """
import sys, gossamer
try:
    for page in gossamer.crawl([sys.argv[1]], sys.argv[2], allow_private=True, delay=0.3):
        print(page.url, flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_in_the_loop_stops_the_crawl_and_the_next_call_resumes_it(
    tmp_path: Path,
) -> None:
    site = python_site(tmp_path, 30)
    out = tmp_path / "crawl"
    script = tmp_path / "loop.py"
    script.write_text(CTRL_C)
    with run_nginx(site.server):
        proc = subprocess.Popen(
            [sys.executable, str(script), site.base, str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env(),
        )  # fmt: skip
        assert proc.stdout is not None
        first = [proc.stdout.readline().strip() for _ in range(5)]
        # Ctrl-C: KeyboardInterrupt in the program's loop, 7 s before its crawl would end (at
        # a delay of 0.05 s it had ended on a loaded machine before the signal came)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        lines = rest.split()
        assert lines[-1] == "interrupted"
        first += lines[:-1]
        second = [p.url for p in gossamer.crawl([site.base], out, allow_private=True, delay=0)]
    assert len(first) + len(second) == 30
    assert set(first) | set(second) == {site.base, *(f"{site.base}p{k}.html" for k in range(1, 30))}


def test_acrawl_left_early_stops_and_resumes(tmp_path: Path) -> None:
    site = python_site(tmp_path, 12)
    out = tmp_path / "crawl"

    async def first_three() -> list[str]:
        urls = []
        pages = gossamer.acrawl([site.base], out, allow_private=True, delay=0)
        async with contextlib.aclosing(pages):
            async for page in pages:
                urls.append(page.url)
                if len(urls) == 3:
                    break
        return urls

    with run_nginx(site.server):
        first = asyncio.run(first_three())
        rest = [p.url for p in gossamer.crawl([site.base], out, allow_private=True, delay=0)]
    assert len(first) == 3 and len(rest) == 9 and not set(first) & set(rest)

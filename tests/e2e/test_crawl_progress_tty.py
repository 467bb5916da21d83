"""The live display under a real terminal (a pty), against the crawl log at the same moment:
`gossamer crawl` of a 12-page site on 127.0.0.1 (nginx) at the default 1 s delay, one worker
and a pool of two. The pages shown go up a page at a time, as the crawl log's lines do — a
pool's parent once showed the frontier's count, which moves only when a host's batch
completes (`1 pages` for 11 s here, while the log said nothing either until the batch's end)
— and a resume shows this run's pages and rate beside the crawl's total (it once showed the
crawl's total as this run's, and its rate as if fetched in the first seconds)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from _static_site import static_site
from test_real_site import installed_gossamer

from gossamer.testweb._nginx import run_nginx

PAGES = 12  # index.html and p1 … p11, on one host
TOLERANCE = 2  # pages: a redraw every 0.5 s, a pool's worker beats every 1 s
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-B]")
_FRAME = re.compile(r"crawling\s+([\d,]+) pages(?: this run, ([\d,]+) in all)?\s+([\d,.]+) pages/s")


@dataclass(frozen=True, slots=True)
class Seen:
    """One look: what the display shows last, and the crawl log's page lines then."""

    pages: int
    total: int | None  # "… in all" (a resume)
    rate: float
    logged: int  # page lines in the crawl log (robots.txt's left out)


class Terminal:
    """`gossamer crawl …` with its stdin, stdout and stderr on a pty, read as it draws."""

    def __init__(self, args: list[str], log: Path) -> None:
        master, slave = pty.openpty()
        env = {**os.environ, "COLUMNS": "120", "LINES": "30", "TERM": "xterm-256color"}
        self.proc = subprocess.Popen(
            [installed_gossamer(), "crawl", *args],
            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        self.master = master
        self.log = log
        self.screen = ""

    def read(self, wait: float) -> bool:
        """Read what the crawl drew within `wait` seconds; False at its end (EOF)."""
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the crawl closed its side
            return False
        self.screen += data.decode("utf-8", "replace")
        return bool(data)

    def look(self) -> Seen | None:
        """The display's last frame and the crawl log's page lines now (None: no frame yet)."""
        frames = _FRAME.findall(_ANSI.sub("", self.screen))
        if not frames:
            return None
        pages, total, rate = frames[-1]
        return Seen(
            int(pages.replace(",", "")),
            int(total.replace(",", "")) if total else None,
            float(rate.replace(",", "")),
            _page_lines(self.log),
        )

    def wait_for(self, what: str, ok: Callable[[Seen], bool], deadline: float) -> list[Seen]:
        """Every look until one is `ok` (fails at `deadline` or the crawl's end)."""
        seen: list[Seen] = []
        while time.monotonic() < deadline:
            alive = self.read(0.1)
            look = self.look()
            if look is not None and (not seen or look != seen[-1]):
                seen.append(look)
                if ok(look):
                    return seen
            assert alive and self.proc.poll() is None, f"the crawl ended before {what}: {seen}"
        pytest.fail(f"no {what} in time: {seen}\n{_ANSI.sub('', self.screen)[-2000:]}")

    def stop(self, deadline: float) -> int:
        """Ctrl-C, and the crawl's exit status once it has ended."""
        self.proc.send_signal(signal.SIGINT)
        while time.monotonic() < deadline and self.read(0.1):
            pass
        os.close(self.master)
        return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))


def _page_lines(log: Path) -> int:
    try:
        lines = log.read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    count = 0
    for line in lines:
        try:
            url = json.loads(line)["url"]
        except (ValueError, KeyError):
            continue  # (a line being written)
        count += not url.endswith("/robots.txt")
    return count


def _in_step(seen: Seen) -> bool:
    return abs(seen.pages - seen.logged) <= TOLERANCE


@pytest.mark.parametrize("workers", [1, 2], ids=["one-worker", "pool"])
def test_the_display_counts_pages_as_the_crawl_log_does_and_a_resume_shows_this_run(
    tmp_path: Path, workers: int
) -> None:
    site = static_site(tmp_path, PAGES)
    seed = site.base + "index.html"
    out = tmp_path / "crawl"
    log = out / "crawl.log.jsonl"
    with run_nginx(site.server):
        # the default delay (1 s): a page a second, 11 of them in one batch of the host
        crawl = Terminal([seed, "-o", str(out), "--allow-private", "--workers", str(workers)], log)
        seen = crawl.wait_for("5 pages shown", lambda s: s.pages >= 5, time.monotonic() + 15.0)
        code = crawl.stop(time.monotonic() + 10.0)
        assert code == 130, _ANSI.sub("", crawl.screen)[-2000:]
        # every look in step with the crawl log, and the count going up a page at a time
        assert all(_in_step(s) for s in seen), seen
        shown = {s.pages for s in seen}
        assert len(shown & set(range(2, PAGES - 1))) >= 3, seen
        first = _page_lines(log)
        assert 5 <= first < PAGES

        again = Terminal(["--resume", str(out)], log)
        seen = again.wait_for(
            "3 pages of this run", lambda s: s.pages >= 3, time.monotonic() + 12.0
        )
        assert again.stop(time.monotonic() + 10.0) in (0, 130)
    # this run's pages beside the crawl's total, each in step with the log; the rate is
    # this run's (a page a second), not the crawl's pages over this run's seconds
    late = [s for s in seen if s.pages >= 1]
    assert late, seen
    for s in late:
        assert s.total is not None, seen
        assert abs(s.pages - (s.logged - first)) <= TOLERANCE, seen
        assert abs(s.total - s.logged) <= TOLERANCE, seen
        assert s.rate <= 3, seen

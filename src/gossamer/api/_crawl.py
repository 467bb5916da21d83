"""A crawl run from a Python program: `Crawl`, `crawl()` and `acrawl()` (docs/python.md).

The crawl is the embedded crawl of the command (`run_crawl`: the same frontier,
politeness, WARC, crawl log, statistics and resume), one worker, on a thread of this
process with its own event loop. Pages reach the program through a hand-over of one page
(`_Handover`): the crawler's thread waits at each page until the program asks for it, so a
program that reads slowly slows the crawl down instead of filling memory, and a page the
program never took is not counted done — stopping (breaking out of the loop, `stop()`)
refuses it, and the frontier queues it again for the next run with the same `output`.
SIGINT and SIGTERM stay the program's (Ctrl-C raises KeyboardInterrupt in its loop, whose
exit stops the crawl)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import logs
from ..config import CrawlSettings, keyword_settings
from ..crawldir import CrawlDir, CrawlError
from ..engine.crawler import Crawler
from ..engine.sink_registry import PageSink
from ..exitcodes import MEANINGS, Exit
from ..fetch import FetchResult
from ..page import Page
from ..report.crawl import fetched_nothing
from ..runner.run import run_crawl
from ..runner.worker import WorkerHooks

__all__ = ["Crawl", "Stats", "Summary", "acrawl", "crawl"]


@dataclass(frozen=True, slots=True)
class Stats:
    """A running crawl's figures now (this run's): pages crawled, HTTP requests made
    (robots.txt included), body bytes, URLs discovered, requests in flight, failed
    requests by error key, pages by HTTP status, seconds since the run began."""

    pages: int = 0
    requests: int = 0
    bytes: int = 0
    discovered: int = 0
    in_flight: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)
    statuses: Mapping[int, int] = field(default_factory=dict)
    elapsed: float = 0.0


@dataclass(frozen=True, slots=True)
class Summary:
    """How a run ended: `ended` (`complete`: nothing left to fetch; `max-pages`; `stopped`:
    a stop; `error`; or the signal's name), its exit status as the command's (0 OK, 3
    nothing fetched, 74 a storage error, ...), this run's pages, requests and bytes, the
    crawl's pages done and URLs still queued or failed in its frontier (all runs), the
    run's seconds, and where the crawl directory is (None once a temporary one is removed).
    `stats` is the run's whole `stats.json` (docs/crawler/outputs.md)."""

    ended: str
    exit_code: int
    pages: int
    requests: int
    bytes: int
    done: int
    queued: int
    failed: int
    elapsed: float
    output: Path | None
    stats: Mapping[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether the crawl has nothing left to fetch."""
        return self.ended == "complete"


_END = object()


class _Handover:
    """One page at a time from the crawler's thread to the program's: `put` waits until the
    program has taken the page (True) or the hand-over is closed (False: the page is
    refused); `get` waits for the next page, or returns `_END` once the crawl has ended."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._item: Page | None = None
        self._taken = False
        self.closed = False  # the program reads no more pages
        self.ended = False  # the crawl has ended

    def put(self, page: Page) -> bool:
        with self._cond:
            if self.closed:
                return False
            self._item, self._taken = page, False
            self._cond.notify_all()
            while not self._taken and not self.closed:
                self._cond.wait()
            taken = self._taken
            self._item = None
            return taken

    def get(self, timeout: float | None = None) -> Page | object | None:
        """The next page, `_END`, or None after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._item is not None and not self._taken:
                    self._taken = True
                    page = self._item
                    self._cond.notify_all()
                    return page
                if self.ended or self.closed:
                    return _END
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def end(self) -> None:
        with self._cond:
            self.ended = True
            self._cond.notify_all()


class _ErrorLines(logging.Handler):
    """The error messages the crawl's thread (`ident`) logs: what a failed crawl raises."""

    def __init__(self, ident: int) -> None:
        super().__init__(logging.ERROR)
        self.ident = ident
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.ident:
            self.lines.append(record.getMessage())


class _PageFeed(PageSink):
    """The crawl's sink that hands each crawled page to the program (`_Handover`)."""

    def __init__(self, handover: _Handover, owner: Crawl) -> None:
        self.handover = handover
        self.owner = owner

    def fetched(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> bool:
        if self.handover.closed:
            return False
        crawler = self.owner._crawler
        if crawler is not None:  # the figures `stats()` reads, this page counted
            crawler.publish_snapshot()
        return self.handover.put(Page.from_result(result, depth, edges))


class Crawl:
    """A crawl run by this program: `start()` it, read its pages (`for page in crawl`, or
    `async for` in an asyncio program), look at `stats()`, `stop()` it, and read its
    `summary`. Also a context manager: leaving it stops the crawl and waits for its end.

    `seeds` and the keyword settings are those of `gossamer crawl` (`delay=0`,
    `max_pages=100`, `allow_private=True`: the names `-s KEY=VALUE` takes, checked the
    same way, SettingsError naming the closest one for a typo). `output` is the crawl
    directory: a new crawl when it does not exist (or is empty), the crawl there resumed
    when it holds one (then its stored settings hold; run-time settings given change, a
    definition setting given with another value is refused, as `--resume` does). With
    `output=None` the crawl goes to a temporary directory, removed once the crawl has
    ended (WARC files and all): give `output` to keep them or to resume later.

    A crawl runs one worker (the `workers` setting is refused); the crawl's SIGINT and
    SIGTERM handling is left to the program."""

    def __init__(
        self,
        seeds: Iterable[str] | str = (),
        output: str | Path | None = None,
        **settings: Any,
    ) -> None:
        if isinstance(seeds, str):
            seeds = [seeds]
        seeds = list(seeds)
        if "workers" in settings and settings["workers"] not in (None, 1, "1"):
            raise ValueError("a crawl from Python runs one worker: leave `workers` out")
        self._temporary: Path | None = None
        if output is None:
            self._temporary = Path(tempfile.mkdtemp(prefix="gossamer-"))
            out = self._temporary / "crawl"
        else:
            out = Path(output)
        crawl = CrawlDir(out)
        self.resumed = crawl.manifest.exists() and not fetched_nothing(out)
        values: dict[str, Any] = dict(settings)
        if seeds:  # (on resume, compared with the stored ones: another list is refused)
            values["seeds"] = seeds
        values["output"] = str(out)
        values["workers"] = 1
        try:
            self.settings: CrawlSettings = keyword_settings(values)
        except BaseException:
            self._remove_temporary()
            raise
        if not self.resumed and not self.settings.seeds:
            self._remove_temporary()
            raise ValueError(f"no seeds given, and {out} holds no crawl to resume")
        self.output = out
        self._handover = _Handover()
        self._thread: threading.Thread | None = None
        self._crawler: Crawler | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_asked = False
        self._lock = threading.Lock()
        self._code: int | None = None
        self._error: BaseException | None = None
        self._summary: Summary | None = None
        self._began = 0.0

    # ------------------------------------------------------------------ running
    def start(self) -> Crawl:
        """Start the crawl on its thread (once); returns the crawl."""
        if self._thread is not None:
            return self
        self._began = time.time()
        self._thread = threading.Thread(target=self._run, name="gossamer-crawl", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        hooks = WorkerHooks(
            session=self._session, sinks=(_PageFeed(self._handover, self),), signals=False
        )
        errors = _ErrorLines(threading.get_ident())
        logger = logging.getLogger(logs.ROOT)
        logger.addHandler(errors)
        try:
            self._code = run_crawl(self.settings, resume=self.resumed, progress=None, hooks=hooks)
            if self._code not in (Exit.OK, None):
                self._error = CrawlError(self._failure(self._code, errors.lines))
        except BaseException as exc:  # handed to the program's thread (`wait`)
            self._error = exc
        finally:
            logger.removeHandler(errors)
            self._handover.end()

    def _failure(self, code: int, lines: list[str]) -> str:
        what = MEANINGS.get(code, "an error")
        said = "; ".join(lines[-3:])
        if not said and code == Exit.NOTHING_FETCHED:
            with contextlib.suppress(OSError, ValueError):
                stats = json.loads(CrawlDir(self.output).stats.read_text())
                top = sorted((stats.get("errors") or {}).items(), key=lambda kv: -kv[1])[:3]
                said = ", ".join(f"{key} ×{n}" for key, n in top)
                if not said:
                    said = ", ".join(f"HTTP {k} ×{n}" for k, n in stats["statuses"].items())
        return f"the crawl in {self.output} ended with exit status {code}: {what}" + (
            f": {said}" if said else ""
        )

    @contextlib.asynccontextmanager
    async def _session(self, crawler: Crawler) -> AsyncIterator[None]:
        with self._lock:
            self._crawler, self._loop = crawler, asyncio.get_running_loop()
            stop = self._stop_asked
        if stop:
            crawler.abandon_in_flight()
        try:
            yield
        finally:
            with self._lock:
                self._crawler = None

    def pages(self, timeout: float | None = None) -> Iterator[Page]:
        """The crawled pages as they arrive (starting the crawl if needed), until it ends.
        Leaving the loop early stops the crawl (the pages not taken are fetched by the next
        run with the same `output`). `timeout`: TimeoutError when no page comes for so
        many seconds."""
        self.start()
        try:
            while True:
                item = self._handover.get(timeout)
                if item is None:
                    raise TimeoutError(f"no page for {timeout} s")
                if item is _END:
                    break
                assert isinstance(item, Page)
                yield item
        finally:
            self.stop()
        self._raise_error()

    def run(self) -> Summary:
        """Crawl to the end (or the page limit) without reading the pages, and return the
        summary: for a program that wants the crawl's files (WARC, an extractor's items),
        not its pages."""
        for _ in self.pages():
            pass
        return self.wait()

    def __iter__(self) -> Iterator[Page]:
        return self.pages()

    async def __aiter__(self) -> AsyncIterator[Page]:
        """The pages in an asyncio program: waiting for each runs in a thread of the
        default executor, so the program's event loop keeps running."""
        self.start()
        try:
            while True:
                item = await asyncio.to_thread(self._handover.get, 1.0)
                if item is None:
                    continue
                if item is _END:
                    break
                assert isinstance(item, Page)
                yield item
        finally:
            await asyncio.to_thread(self.stop)
        self._raise_error()

    def stats(self) -> Stats:
        """This run's figures now (zeros before it crawls; the last ones once it ended)."""
        crawler = self._crawler
        snap = crawler.snapshot if crawler is not None else None
        if snap is None:
            summary = self._summary
            if summary is None:
                return Stats()
            return Stats(
                pages=summary.pages,
                requests=summary.requests,
                bytes=summary.bytes,
                elapsed=summary.elapsed,
                statuses={int(k): v for k, v in summary.stats.get("statuses", {}).items()},
                errors=dict(summary.stats.get("errors", {})),
            )
        return Stats(
            pages=snap.pages,
            requests=snap.requests,
            bytes=snap.bytes,
            discovered=snap.discovered,
            in_flight=snap.in_flight,
            errors=dict(snap.errors),
            statuses=dict(snap.statuses),
            elapsed=max(0.0, snap.taken_at - snap.started_at),
        )

    def stop(self, *, wait: bool = True) -> Summary | None:
        """Stop the crawl cleanly: no new request, those in flight abandoned (their URLs
        stay queued), the page waiting for the program refused (queued again), the
        batches completed, the statistics and WARC files written. With `wait`, wait for
        the end and return the summary."""
        self._handover.close()
        with self._lock:
            self._stop_asked = True
            crawler, loop = self._crawler, self._loop
        if crawler is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # (the loop has closed: it ended)
                loop.call_soon_threadsafe(crawler.abandon_in_flight)
        return self.wait() if wait else None

    def wait(self, timeout: float | None = None) -> Summary:
        """Wait for the crawl to end (TimeoutError after `timeout` seconds); its summary.
        Pages not read meanwhile wait for the program (the crawl waits with them): read
        them, `run()` it, or `stop()` it."""
        if self._thread is None:
            self.start()
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the crawl in {self.output} is still running")
        if self._summary is None:
            self._summary = self._read_summary()
            self._remove_temporary()
        self._raise_error()
        return self._summary

    @property
    def running(self) -> bool:
        """Whether the crawl's thread runs."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def summary(self) -> Summary | None:
        """The summary once the crawl has ended and been waited for (`wait`, `stop`)."""
        return self._summary

    @classmethod
    def resume(cls, output: str | Path, **settings: Any) -> Crawl:
        """The crawl in `output` resumed with its stored settings (and the run-time
        settings given)."""
        if not CrawlDir(Path(output)).manifest.exists():
            raise ValueError(f"{output} holds no crawl to resume")
        return cls((), output, **settings)

    def __enter__(self) -> Crawl:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the end
    def _read_summary(self) -> Summary:
        code = self._code if self._code is not None else 1
        stats: dict[str, Any] = {}
        path = CrawlDir(self.output).stats
        with contextlib.suppress(OSError, ValueError):
            if path.stat().st_mtime >= self._began - 1.0:  # this run's
                stats = json.loads(path.read_text())
        frontier = stats.get("frontier") or {}
        return Summary(
            ended=str(stats.get("ended") or ("complete" if code == 0 else "error")),
            exit_code=code,
            pages=int(stats.get("pages") or 0),
            requests=int(stats.get("requests") or 0),
            bytes=int(stats.get("bytes") or 0),
            done=int(frontier.get("done") or 0),
            queued=int(frontier.get("queued") or 0),
            failed=int(frontier.get("failed") or 0),
            elapsed=float(stats.get("elapsed_s") or 0.0),
            output=None if self._temporary is not None else self.output,
            stats=stats,
        )

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _remove_temporary(self) -> None:
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)

    def __repr__(self) -> str:
        state = "running" if self.running else ("ended" if self._summary else "not started")
        return f"<Crawl {self.output} {state}>"


def crawl(
    seeds: Iterable[str] | str, output: str | Path | None = None, **settings: Any
) -> Iterator[Page]:
    """Crawl from `seeds` and yield each crawled page (`Page`) as it arrives: the same
    frontier, politeness, WARC and resume as `gossamer crawl`, settings as keywords with
    the names `-s KEY=VALUE` takes (`allow_private=True, delay=0, max_pages=100`).
    Breaking out of the loop stops the crawl cleanly; a later call with the same `output`
    resumes it and yields the pages not yielded before. `output=None`: a temporary crawl
    directory, removed at the end. See `Crawl` for control over a running crawl."""
    return Crawl(seeds, output, **settings).pages()


async def acrawl(
    seeds: Iterable[str] | str, output: str | Path | None = None, **settings: Any
) -> AsyncIterator[Page]:
    """`crawl` for asyncio programs: `async for page in gossamer.acrawl(...)`."""
    async for page in Crawl(seeds, output, **settings):
        yield page

"""What a running crawl shows, and what it says when it stops and ends.

`ProgressDisplay` draws a live display on a terminal (rich) or writes one JSON line every 10 s
otherwise (docs/crawler.md, "Progress"); `stop_note` is what a first and a second stop say at
once; `end_summary` / `diagnose` are the summary printed at the end and, when no page was
fetched, the main failure and how to fix it. The display never reads the engine: callers hand
it `ProgressSample`s (`show_worker_progress` for one worker's counters, `WorkersProgress` for
the parent of worker processes, a pool's or `crawl --redis`'s), so one display serves all."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..crawldir import CRAWL_LOG, STATS, CrawlDir
from ..frontier import FrontierStats
from ..robots import ROBOTS_DISALLOWED, ROBOTS_UNREACHABLE

if TYPE_CHECKING:
    from ..engine.crawler import Crawler

_log = logging.getLogger(__name__)

TTY_INTERVAL_S = 0.5  # a terminal's redraw period
JSON_INTERVAL_S = 10.0  # a JSON line's period (logs stay small: 360 lines an hour)
RATE_WINDOW_S = 10.0  # the rate shown is over the last this many seconds
ETA_WINDOW_S = 30.0  # the ETA's rate, steadier
TOP_KINDS = 5  # error kinds named in the end summary


@dataclass(frozen=True, slots=True)
class ProgressSample:
    """The counts shown at one moment. `pages`: pages fetched by this run, counted as each is
    fetched (its rate is shown); `done`: pages done in the whole crawl, earlier runs
    included (shown beside `pages` when more, and the bar's position against max_pages;
    None: `pages`); `errors`: failed requests (a worker's counters; None when unknown, as
    in a pool's parent); `failed`: URLs given up (the frontier's); `workers`: worker
    processes running."""

    pages: int
    queued: int
    active_hosts: int
    errors: int | None = None
    failed: int | None = None
    done: int | None = None
    workers: int | None = None
    in_flight: int | None = None

    @classmethod
    def of_frontier(
        cls,
        st: FrontierStats,
        *,
        workers: int,
        pages: int | None = None,
        done_before: int = 0,
    ) -> ProgressSample:
        """What a parent shows of the workers it watches (a pool's, `crawl --redis`'s local
        ones): the shared frontier's counts, and `pages`, the pages the workers say they
        fetched in this run (a pool's heartbeats; None: not known, then the frontier's,
        which counts a batch's pages only once the batch completes). `done_before`: the
        pages the frontier had done when this run began (a resume's earlier runs)."""
        run = max(st.done - done_before, pages or 0, 0)
        return cls(
            pages=run,
            queued=st.queued,
            active_hosts=st.leased_hosts,
            failed=st.failed,
            done=done_before + run,
            workers=workers,
        )


def utc_timestamp(epoch: float) -> str:
    """ISO 8601 UTC, milliseconds, with a Z (as the crawl log's `time`)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _clock_text(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class ProgressDisplay:
    """Progress on `stream`: a rich live display when it is a terminal (`terminal` forces
    either way), else JSON lines. Call `update()` every `interval` seconds (it may be called
    more often), `note()` for an event (a stop), `close()` at the end (the last state stays
    on a terminal). Not thread-safe: call it from one thread (no background refresh)."""

    def __init__(
        self,
        stream: IO[str],
        *,
        max_pages: int | None = None,
        terminal: bool | None = None,
        fields: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.stream = stream
        self.terminal = stream.isatty() if terminal is None else terminal
        self.interval = TTY_INTERVAL_S if self.terminal else JSON_INTERVAL_S
        self.max_pages = max_pages
        self.fields = dict(fields or {})
        self._clock = clock
        self._wall = wall
        self._start = clock()
        self._samples: deque[tuple[float, int]] = deque([(self._start, 0)])
        self._state = ""  # "" while crawling, else what a stop waits for
        self._drawn: tuple[ProgressSample, int, float, float | None, float] | None = None
        self._live: Any = None
        if self.terminal:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=stream, force_terminal=True, highlight=False)
            # no refresh thread (auto_refresh off): the caller's loop redraws, so a signal
            # handler or the event loop never races a drawing thread for the stream
            self._live = Live(
                console=console,
                auto_refresh=False,
                redirect_stdout=False,
                redirect_stderr=False,
                transient=False,
            )
            self._live.start()

    # ------------------------------------------------------------------ figures
    def _rates(self, now: float, pages: int, done: int) -> tuple[float, float | None]:
        """(this run's pages/s over the last RATE_WINDOW_S, seconds left to max_pages or
        None): from this run's `pages`, not the crawl's `done` (a resume's earlier pages
        are no speed of this run)."""
        samples = self._samples
        samples.append((now, pages))
        while len(samples) > 2 and samples[1][0] < now - ETA_WINDOW_S:
            samples.popleft()
        recent = next((s for s in samples if s[0] >= now - RATE_WINDOW_S), samples[0])
        if recent[0] == now and len(samples) > 1:
            recent = samples[-2]
        span = now - recent[0]
        rate = (pages - recent[1]) / span if span > 0 else 0.0
        eta = None
        if self.max_pages is not None:
            t0, p0 = samples[0]
            slow = (pages - p0) / (now - t0) if now > t0 else 0.0
            left = max(self.max_pages - done, 0)
            eta = 0.0 if left == 0 else (left / slow if slow > 0 else None)
        return rate, eta

    def update(self, sample: ProgressSample) -> None:
        """Show `sample` (a JSON line, or a redraw)."""
        now = self._clock()
        done = sample.pages if sample.done is None else sample.done
        rate, eta = self._rates(now, sample.pages, done)
        elapsed = now - self._start
        if self._live is not None:
            self._drawn = (sample, done, rate, eta, elapsed)
            self._live.update(self._render(*self._drawn), refresh=True)
            return
        record: dict[str, Any] = {
            "event": "progress",
            "ts": utc_timestamp(self._wall()),
            "elapsed_s": round(elapsed, 1),
            **self.fields,
            # whose pages each is: this run's (this process or pool), the crawl's (every
            # worker, earlier runs: what max_pages counts)
            "run_pages": sample.pages,
            "crawl_pages": done,
            "pages_per_s": round(rate, 1),
            "queued": sample.queued,
            "active_hosts": sample.active_hosts,
        }
        for key in ("errors", "failed", "workers"):
            value = getattr(sample, key)
            if value is not None:
                record[key] = value
        if self.max_pages is not None:
            record["max_pages"] = self.max_pages
            record["eta_s"] = None if eta is None else round(eta, 1)
        if self._state:
            record["stopping"] = True
        self._write(record)

    def note(self, event: str, message: str, *, state: str | None = None, **fields: Any) -> None:
        """An event worth saying at once (a stop): above the live display, or a JSON line
        `{"event": event, "ts", "elapsed_s", "message", **fields}`. A "stopping" event
        turns the display's state to `state` (default: the message)."""
        if event == "stopping":
            self._state = state or message
        if self._live is not None:
            self._live.console.print(f"gossamer: {message}", markup=False, highlight=False)
            if self._drawn is not None:  # the state line changes with it
                self._live.update(self._render(*self._drawn), refresh=True)
            return
        record = {
            "event": event,
            "ts": utc_timestamp(self._wall()),
            "elapsed_s": round(self._clock() - self._start, 1),
            **self.fields,
            "message": message,
            **fields,
        }
        self._write(record)

    def close(self) -> None:
        """End the display (a terminal keeps its last state). Idempotent."""
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, record: Mapping[str, Any]) -> None:
        self.stream.write(json.dumps(record) + "\n")
        self.stream.flush()

    def _render(
        self, s: ProgressSample, done: int, rate: float, eta: float | None, elapsed: float
    ) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        state = ("stopping", "bold yellow") if self._state else ("crawling", "bold cyan")
        # a resume: this run's pages and rate, the crawl's total beside them
        label = f" pages this run, {done:,} in all  " if done > s.pages else " pages  "
        lines: list[Any] = [
            Text.assemble(
                state, "  ", (f"{s.pages:,}", "bold"), label, (f"{rate:,.0f}", "bold"),
                " pages/s  ", f"elapsed {_clock_text(elapsed)}",
            )
        ]  # fmt: skip
        parts = [f"queue {s.queued:,}", f"active hosts {s.active_hosts:,}"]
        if s.errors is not None:
            parts.append(f"errors {s.errors:,}")
        if s.failed is not None:
            parts.append(f"failed URLs {s.failed:,}")
        if s.workers is not None:
            parts.append(f"workers {s.workers}")
        lines.append(Text("  ".join(parts), style="dim"))
        if self.max_pages:
            bar = Table.grid(padding=(0, 2))
            pct = 100.0 * min(done, self.max_pages) / self.max_pages
            bar.add_row(
                ProgressBar(total=self.max_pages, completed=min(done, self.max_pages), width=30),
                Text(
                    f"{done:,}/{self.max_pages:,}  {pct:.0f}%  ETA "
                    + ("-:--:--" if eta is None else _clock_text(eta))
                ),
            )
            lines.append(bar)
        if self._state:
            lines.append(Text(self._state, style="yellow"))
        return Group(*lines)


# ---------------------------------------------------------------------------- stopping


def stop_note(
    signame: str,
    *,
    in_flight: int | None,
    grace_s: float,
    second: bool,
    pool: bool = False,
    kept: str = "their URLs kept for --resume",
) -> str:
    """What a stop says at once: what the crawl now waits for, and what a second Ctrl-C
    does. `in_flight`: requests in flight (None: not known here, as in a pool's parent);
    `kept`: where the abandoned requests' URLs go."""
    key = "Ctrl-C" if signame == "SIGINT" else signame
    if second:
        what = "the requests in flight" if in_flight is None else (
            f"{in_flight} request{'' if in_flight == 1 else 's'} in flight")  # fmt: skip
        return (
            f"stopping now ({key} again): {what} abandoned ({kept}); writing the WARC "
            f"files, the crawl log and {STATS}"
        )
    if in_flight is None:
        waits = "the requests in flight"
    else:
        waits = f"{in_flight} request{'' if in_flight == 1 else 's'} in flight"
    who = "the workers send" if pool else "sending"
    return (
        f"stopping ({key}): {who} no new request; waiting up to {grace_s:g} s for {waits}, "
        f"then writing the outputs (WARC, crawl log, {STATS}). Ctrl-C again stops sooner "
        f"(the requests in flight abandoned, {kept})"
    )


def stop_state(*, grace_s: float, second: bool) -> str:
    """The live display's state line while a stop goes on."""
    if second:
        return "abandoning the requests in flight; writing the outputs"
    return f"waiting up to {grace_s:g} s for the requests in flight · Ctrl-C again stops now"


# -------------------------------------------------------------------- the reporters
async def show_worker_progress(crawler: Crawler, display: ProgressDisplay) -> None:
    """Show one worker's progress on `display` every `display.interval` seconds."""
    base: int | None = None  # pages done by earlier runs (a resume)
    while True:
        await asyncio.sleep(display.interval)
        c = crawler.publish_snapshot()  # (frozen while the statistics are awaited)
        stats = await crawler.frontier_statistics()
        # the frontier counts a page done when its batch completes, up to per_host pages
        # after it was fetched: the bar follows this worker's own count (a max_pages crawl
        # of one worker showed 484 pages fetched and 261 done)
        if base is None:
            base = max(stats.done - c.pages, 0)
        display.update(
            ProgressSample(
                pages=c.pages,
                queued=stats.queued,
                active_hosts=c.active_hosts,
                errors=c.error_count,
                failed=stats.failed,
                done=max(stats.done, base + c.pages),
            )
        )


class WorkersProgress:
    """What the parent of worker processes shows (a pool's parent, `crawl --redis`): the
    shared frontier's counts, and the pages the workers fetched when `show` is told them (a
    pool's heartbeats), every `interval` seconds (the display's: 0.5 on a terminal, 10
    otherwise), and what each stop in `stopped` (the parent's signal handler's list) waits
    for, said once (`say_stops`; a handler may not write to the display itself: it could
    interrupt a write to the same stream). `display` None: nothing is shown."""

    def __init__(
        self,
        display: ProgressDisplay | None,
        stopped: Sequence[int],
        *,
        grace_s: float,
        kept: str | None = None,
        interval: float | None = None,
        done_before: int = 0,
    ) -> None:
        self.display = display
        self.done_before = done_before  # pages the frontier had done as this run began
        self.stopped = stopped
        self.grace_s = grace_s
        self.kept = {} if kept is None else {"kept": kept}
        if interval is None:
            interval = display.interval if display is not None else 10.0
        self.interval = interval
        self.last_t = time.monotonic()  # when the counts were shown last
        self.said = 0  # the stops said so far

    def wait_s(self) -> float | None:
        """How long until the counts are due (None: never, nothing is shown)."""
        if self.display is None:
            return None
        return max(0.0, self.last_t + self.interval - time.monotonic())

    def due(self) -> bool:
        return self.display is not None and time.monotonic() - self.last_t >= self.interval

    def show(self, stats: FrontierStats, *, workers: int, pages: int | None = None) -> None:
        """Show the frontier's counts `stats` with `workers` worker processes alive, and
        `pages`, the pages the workers fetched in this run (None: not known here)."""
        self.last_t = time.monotonic()
        if self.display is not None:
            sample = ProgressSample.of_frontier(
                stats, workers=workers, pages=pages, done_before=self.done_before
            )
            self.display.update(sample)

    def say_stops(self) -> None:
        """Say what the stops received since the last call wait for: the first one, and the
        same signal again (another signal says nothing new)."""
        display, stopped = self.display, self.stopped
        if display is None:
            return
        while self.said < len(stopped) and self.said < 2:
            said = self.said
            second = said > 0 and stopped[said] in stopped[:said]
            self.said += 1
            if said and not second:
                continue  # another signal than the first: nothing new to say
            name = signal.Signals(stopped[said]).name
            display.note(
                "stopping",
                stop_note(name, in_flight=None, grace_s=self.grace_s, second=second, pool=True,
                          **self.kept),
                state=stop_state(grace_s=self.grace_s, second=second),
                signal=name,
            )  # fmt: skip

    def close(self) -> None:
        if self.display is not None:
            self.display.close()


# ---------------------------------------------------------------------------- the end

ENDED_TEXT = {
    "complete": "crawl complete (nothing left to fetch)",
    "max-pages": "crawl ended: --max-pages reached",
    "SIGINT": "crawl stopped by Ctrl-C (SIGINT)",
    "SIGTERM": "crawl stopped by SIGTERM",
    "error": "crawl stopped by an error",
}

# the fix for a failure kind (the error key without its robots/ or sitemap/ prefix)
_HINTS: dict[str, tuple[str, str]] = {
    "fetch/error/blocked-address": (
        "the seeds resolve to loopback/private addresses, which are refused by default",
        "add --allow-private to crawl them",
    ),
    "fetch/error/dns": (
        "the host names do not resolve (DNS)",
        "check the seed URLs' host names and the network (or map them with --resolve HOST:IP)",
    ),
    "fetch/error/connect": (
        "connections were refused or the hosts are unreachable",
        "check that the servers are up and the seed URLs' ports are right",
    ),
    "fetch/error/timeout": (
        "the servers did not answer in time",
        "check the network, or raise connect_timeout / first_byte_timeout",
    ),
    "fetch/error/too-slow": (
        "the servers sent too slowly",
        "lower low_speed_limit (--low-speed-limit) or raise --low-speed-time",
    ),
    "fetch/error/tls": (
        "the TLS handshake or the certificate check failed",
        "check the https URLs (does the server speak TLS on that port?)",
    ),
    "fetch/error/bad-url": ("the URLs are not absolute http(s) URLs", "check the seed URLs"),
    "fetch/error/protocol": (
        "the servers do not answer HTTP/1.x",
        "check the seed URLs' ports (is it a web server?)",
    ),
}
_ROBOTS_DISALLOW = (
    "robots.txt forbids every URL of the seeds for this user agent",
    "check robots.txt; crawl with --ignore-robots only where you are allowed to",
)
_ROBOTS_UNREACHABLE = (
    "robots.txt could not be fetched, so its hosts' URLs were held back (RFC 9309: "
    "disallow all while it is unreachable)",
    "check that the servers are up and answer robots.txt",
)
_GENERIC = ("the fetches failed", f"see {CRAWL_LOG} for each URL's error")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The main failure of a crawl: its error kind, how many, what it means, the fix."""

    kind: str
    count: int
    what: str
    fix: str

    def line(self) -> str:
        return f"{self.what} ({self.kind} ×{self.count:,}); {self.fix}"


def failure_kinds(stats: Mapping[str, Any]) -> dict[str, int]:
    """Failed requests by error kind, robots.txt's and sitemaps' with their own (a seed
    host's robots.txt that cannot be fetched forbids the whole host)."""
    return {str(k): int(v) for k, v in (stats.get("errors") or {}).items()}


def diagnose(stats: Mapping[str, Any]) -> Diagnosis | None:
    """The main failure of a crawl from its statistics (`stats.json`): the most frequent
    error kind (robots.txt's counted with the pages', since a robots.txt that cannot be
    fetched forbids its host), or robots.txt forbidding everything (its rules, or a 5xx
    answer: `robots/unreachable/http-503`); None without either."""
    by_base: dict[str, int] = {}
    for key, n in failure_kinds(stats).items():
        if key == "frontier/stale-lease":
            continue
        base = key.split("/", 1)[1] if key.startswith(("robots/", "sitemap/")) else key
        by_base[base] = by_base.get(base, 0) + n
    if by_base:
        kind, count = max(by_base.items(), key=lambda kv: (kv[1], kv[0]))
        what, fix = _HINTS.get(kind, _GENERIC)
        if kind not in _HINTS:
            what = f"the fetches failed ({kind.rsplit('/', 1)[-1]})"
        return Diagnosis(kind, count, what, fix)
    dropped = {str(k): int(v) for k, v in (stats.get("dropped") or {}).items() if v}
    if dropped.get(ROBOTS_DISALLOWED):
        return Diagnosis(ROBOTS_DISALLOWED, dropped[ROBOTS_DISALLOWED], *_ROBOTS_DISALLOW)
    unreachable = {k: n for k, n in dropped.items() if k.startswith(ROBOTS_UNREACHABLE)}
    if unreachable:  # (answered 5xx or 429: a fetch error would have been diagnosed above)
        kind, count = max(unreachable.items(), key=lambda kv: (kv[1], kv[0]))
        return Diagnosis(kind, count, *_ROBOTS_UNREACHABLE)
    return None


def nothing_fetched(stats: Mapping[str, Any]) -> bool:
    """The crawl tried and fetched no page: every fetch failed or was forbidden. A resumed
    crawl counts the pages of its earlier runs (the frontier's `done`): one whose last URLs
    all fail (a dead host) has still fetched pages."""
    done = (stats.get("frontier") or {}).get("done")
    if int(stats.get("pages", 0)) or (isinstance(done, int) and done):
        return False
    return bool(int(stats.get("requests", 0)) or stats.get("errors") or stats.get("dropped"))


def ended(stats: Mapping[str, Any], max_pages: int | None = None) -> str:
    """Why the crawl ended: stats.json's `ended` when it says, else from `finished` and
    `stopped_by`: complete | max-pages | SIGINT | SIGTERM | error."""
    said = stats.get("ended")
    if isinstance(said, str) and said:
        return said
    by = stats.get("stopped_by")
    if by:
        return str(by)
    if not stats.get("finished", True):
        return "error"
    done = int((stats.get("frontier") or {}).get("done", 0))
    if max_pages is not None and done >= max_pages:
        return "max-pages"
    return "complete"


def _top(counts: Mapping[str, int], n: int = TOP_KINDS) -> str:
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{k} {v:,}" for k, v in items[:n])
    if len(items) > n:
        more = len(items) - n
        text += f", … ({more} more kind{'' if more == 1 else 's'})"
    return text


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return str(n)


def not_html_line(stats: Mapping[str, Any]) -> str | None:
    """`non-HTML bodies not downloaded: 3 (62.9 MB saved)` from stats.json's `not_html`
    (--html-only), or None when no body was stopped."""
    counts = stats.get("not_html") or {}
    bodies = int(counts.get("bodies", 0))
    if not bodies:
        return None
    unknown = int(counts.get("unknown_length", 0))
    said = []
    if bodies > unknown:
        said.append(f"{_size(int(counts.get('bytes_saved', 0)))} saved")
    if unknown:
        said.append(f"{unknown:,} of unknown length")
    return f"non-HTML bodies not downloaded: {bodies:,} ({', '.join(said)})"


def end_summary(
    stats: Mapping[str, Any],
    out: Path,
    *,
    max_pages: int | None = None,
    resume: str | None = None,
    outputs: Iterable[tuple[str, Path]] | None = None,
) -> list[str]:
    """The end-of-crawl summary, a line each (no newlines): what was done and how fast,
    why it ended, errors by kind, where the outputs are, how to resume. `resume`: the
    command that goes on (default `gossamer crawl --resume OUT`)."""
    why = ended(stats, max_pages)
    pages, requests = int(stats.get("pages", 0)), int(stats.get("requests", 0))
    elapsed = float(stats.get("elapsed_s", 0.0))
    rate = pages / elapsed if elapsed > 0 else 0.0
    headline = ENDED_TEXT.get(why, f"crawl ended ({why})")
    if why in ("complete", "max-pages") and nothing_fetched(stats):
        headline = "crawl ended with no page fetched"
    lines = [
        f"gossamer: {headline}: {pages:,} pages in "
        f"{_clock_text(elapsed)} ({rate:,.1f} pages/s)",
        f"  {requests:,} request{'' if requests == 1 else 's'}, "
        f"{_size(int(stats.get('bytes', 0)))} received",
    ]
    errors = {k: v for k, v in failure_kinds(stats).items() if v}
    if errors:
        lines.append(f"  errors: {sum(errors.values()):,} ({_top(errors)})")
    # robots.txt's and sitemaps' answers are their own lines, not the pages' HTTP errors
    others = {str(k): int(v) for k, v in (stats.get("robots_sitemap_statuses") or {}).items()}
    http = {
        str(k): int(v) - sum(n for key, n in others.items() if key.endswith(f"/{k}"))
        for k, v in (stats.get("statuses") or {}).items()
        if str(k) >= "400"
    }
    http = {k: v for k, v in http.items() if v > 0}
    if http:
        lines.append(f"  HTTP errors: {sum(http.values()):,} ({_top(http, 3)})")
    for what, name in (("robots", "robots.txt"), ("sitemap", "sitemaps")):
        got = {k.split("/", 1)[1]: v for k, v in others.items() if k.startswith(f"{what}/") and v}
        if got:
            n = sum(got.values())
            lines.append(f"  {name}: {n:,} response{'' if n == 1 else 's'} ({_top(got, 3)})")
    dropped = {str(k): int(v) for k, v in (stats.get("dropped") or {}).items() if v}
    if dropped:
        n = sum(dropped.values())
        lines.append(f"  not fetched: {n:,} URL{'' if n == 1 else 's'} ({_top(dropped, 3)})")
    not_html = not_html_line(stats)
    if not_html:
        lines.append(f"  {not_html}")
    if pages and errors and sum(errors.values()) * 2 >= requests:
        problem = diagnose(stats)
        if problem is not None:
            lines.append(f"  most requests failed: {problem.line()}")
    if outputs is None:
        crawl = CrawlDir(out)
        outputs = [
            ("WARC", crawl.warc_dir),
            ("CDX index", crawl.cdx_index),
            ("crawl log", crawl.crawl_log),
            ("graph", crawl.graph_dir),
            ("statistics", crawl.stats),
        ]
    shown = [f"{name} {path}{'/' if path.is_dir() else ''}" for name, path in outputs
             if path.exists()]  # fmt: skip
    if shown:
        lines.append("  outputs: " + ", ".join(shown))
    if why in ("SIGINT", "SIGTERM", "error"):
        lines.append(f"  to go on: {resume or f'gossamer crawl --resume {out}'}")
    return lines


def print_summary(
    stream: IO[str] | None,
    stats: Mapping[str, Any],
    out: Path,
    *,
    max_pages: int | None = None,
    resume: str | None = None,
) -> bool:
    """Print the end summary on `stream` (None: quiet) and, when no page was fetched, the
    error line naming the main failure (printed even when quiet: it is an error). Whether
    no page was fetched (the crawl's exit status is then Exit.NOTHING_FETCHED)."""
    if stream is not None:
        stream.write(
            "\n".join(end_summary(stats, out, max_pages=max_pages, resume=resume)) + "\n"
        )
    failed = nothing_fetched(stats) and ended(stats, max_pages) in ("complete", "max-pages")
    if failed:
        problem = diagnose(stats)
        reason = problem.line() if problem is not None else f"see {CRAWL_LOG}"
        if stream is not None:  # the summary's last line
            stream.write(f"gossamer: error: no page fetched: {reason}\n")
        else:  # quiet: the error is a diagnostic like any other
            _log.error(f"no page fetched: {reason}", extra={"path": str(out)})
    if stream is not None:
        stream.flush()
    return failed

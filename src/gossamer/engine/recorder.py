"""The engine's one door to the sinks: WARC, crawl log and link graph of a crawl directory,
and any other sink registered by name (engine/sink_registry.py), and those a caller adds for
one crawl (`extra`: a Python program's pages).

The sinks never call back into the engine; the built-in ones here only adapt a
`FetchResult` to each writer.

WARC records are handed to the OS as they are written; log and graph lines are buffered, and
`flush()` hands them to the OS: call it before the frontier counts the batch done.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..config import CrawlSettings
from ..crawldir import CrawlDir
from ..fetch import FetchResult
from ..sinks import CrawlLog, GraphWriter, WarcWriter
from ..sinks.warc import recover
from ..urls import fingerprint
from .events import PageEvent
from .sink_registry import PageSink, SinkContext, build_sinks, overrides, register_sink

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .recrawl import Recrawl


class Recorder:
    """Every registered sink of a crawl (`build_sinks`), each handed what it implements.
    `recrawl`: the validators of a re-crawled crawl (`--recrawl`); a 304 answer is then
    stored as a `revisit` record referring to the old capture, and logged with the old
    validators when it carries none itself."""

    def __init__(
        self,
        out: Path,
        settings: CrawlSettings,
        *,
        version: str,
        part: str = "",
        recrawl: Recrawl | None = None,
        extra: Sequence[PageSink] = (),
    ) -> None:
        self.recrawl = recrawl
        self.part = part
        self.sinks = build_sinks(SinkContext(out, settings, version, part, recrawl))
        self.sinks.extend((f"extra-{i}", sink) for i, sink in enumerate(extra))
        sinks = [sink for _, sink in self.sinks]
        # bound methods of the sinks that implement each call, gathered once (per page: one
        # call per sink that wants it, none for the rest)
        self._exchange = [s.exchange for s in sinks if overrides(s, "exchange")]
        self._log = [s.log for s in sinks if overrides(s, "log")]
        self._edges = [s.edges for s in sinks if overrides(s, "edges")]
        self._page = [s.page for s in sinks if overrides(s, "page")]
        self._fetched = [s.fetched for s in sinks if overrides(s, "fetched")]
        self._flush = [s.flush for s in sinks if overrides(s, "flush")]
        self._close = [s.close for s in sinks if overrides(s, "close")]

    def exchange(self, result: FetchResult) -> None:
        for exchange in self._exchange:
            exchange(result)

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        if dup is None:  # (a sink written before `dup` existed takes this call)
            for log in self._log:
                log(result, depth=depth, parent=parent, outcome=outcome)
        else:
            for log in self._log:
                log(result, depth=depth, parent=parent, outcome=outcome, dup=dup)

    def edges(self, src: str, dsts: list[tuple[str, str]]) -> None:
        """The graph edges of one page: (dst URL, kind) pairs, kind `link`, `redirect` or
        `canonical` (self-links and repeated pairs are left out)."""
        for edges in self._edges:
            edges(src, dsts)

    def page(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> bool:
        """A crawled page (a response the frontier counts done) and its graph edges, as a
        `PageEvent` to the sinks that subscribe (built only when one does), then whole to
        those that read it (`fetched`). False when one of those refuses it."""
        if self._page:
            self._publish(result, depth, edges)
        taken = True
        for fetched in self._fetched:
            taken = fetched(result, depth, edges) and taken
        return taken

    def _publish(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> None:
        event = PageEvent(
            result.url,
            result.status if result.status is not None else 0,
            depth,
            self.part,
            result.started_at,
            result.header("content-type"),
            tuple(edges),
        )
        for page in self._page:
            page(event)

    def flush(self) -> None:
        """Hand the buffered log and graph lines to the OS (WARC records already are), so a
        killed process loses nothing the frontier counts as done. No fsync: that guards
        against power loss only and would block the event loop once per host batch. Raises
        the first error met (a full disk), after trying every sink."""
        _each(self._flush)

    def close(self) -> None:
        """Write what is pending and close every sink (all of them, even when one fails);
        raises the first error met."""
        _each(self._close)


def _each(calls: list[Callable[[], None]]) -> None:
    errors: list[BaseException] = []
    for call in calls:
        try:
            call()
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


# ---------------------------------------------------------------------- the built-in sinks
class WarcSink(PageSink):
    """WARC files (--no-warc: none), each with its CDXJ index as it is written."""

    def __init__(self, ctx: SinkContext) -> None:
        settings, part = ctx.settings, ctx.part
        warc_dir = CrawlDir(ctx.out).warc_dir
        self.recrawl = ctx.recrawl
        if not part:  # a pool's parent recovers before its workers start
            recover(warc_dir)  # a killed run leaves `.open` files: keep whole records
        self.warc = WarcWriter(
            warc_dir,
            prefix=f"gossamer{'-' + part if part else ''}",
            max_bytes=settings.sinks.warc_max_bytes,
            warcinfo={
                "software": f"gossamer/{ctx.version}",
                "operator": settings.fetch.user_agent,
                "robots": "obey" if settings.politeness.obey_robots else "ignore",
                "seeds": " ".join(settings.seeds),
            },
            cdx=True,  # each file's CDXJ index as it is written: `write_crawl_index`
        )

    @classmethod
    def build(cls, ctx: SinkContext) -> WarcSink | None:
        return cls(ctx) if ctx.settings.sinks.warc else None

    def exchange(self, result: FetchResult) -> None:
        revisit = result.status == 304
        old_date = None
        if revisit and self.recrawl is not None:
            old_date = self.recrawl.validators(fingerprint(result.url))[2]
        self.warc.write_exchange(
            result.url,
            result.ip,
            result.request_head,
            result.response_head,
            result.body,
            result.started_at,
            # WARC 1.1 has no reason for a body stopped for its type: not length, time or
            # disconnect, so "unspecified" (the crawl log's outcome says ok/not-html)
            "unspecified" if result.not_html else result.truncated,
            revisit=revisit,
            refers_to_date=old_date,
        )

    def close(self) -> None:
        self.warc.close()


class CrawlLogSink(PageSink):
    """crawl.log.jsonl: one line per fetch."""

    def __init__(self, ctx: SinkContext) -> None:
        self.recrawl = ctx.recrawl
        self.crawl_log = CrawlLog(CrawlDir(ctx.out).crawl_log, worker=ctx.part or None)

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        status = result.status
        etag = last_modified = None
        if status is not None and (200 <= status < 300 or status == 304):
            etag, last_modified = result.header("etag"), result.header("last-modified")
            if status == 304 and self.recrawl is not None and not (etag or last_modified):
                # not modified: the old validators still hold (a later re-crawl needs them)
                etag, last_modified, _ = self.recrawl.validators(fingerprint(result.url))
        self.crawl_log.write(
            url=result.url,
            status=result.status,
            outcome=outcome,
            nbytes=len(result.body),
            content_type=result.header("content-type") if result.status is not None else None,
            duration=result.elapsed,
            depth=depth if depth >= 0 else None,
            parent=parent,
            error=result.error,
            location=result.header("location") if result.status is not None else None,
            started_at=result.started_at,
            etag=etag,
            last_modified=last_modified,
            **({} if dup is None else {"dup": dup[0], "dup_of": dup[1]}),
        )

    def flush(self) -> None:
        self.crawl_log.flush()

    def close(self) -> None:
        self.crawl_log.close()


class GraphSink(PageSink):
    """graph/: the link graph's nodes and edges."""

    def __init__(self, ctx: SinkContext) -> None:
        self.graph = GraphWriter(ctx.out, part=ctx.part)

    def edges(self, src: str, dsts: list[tuple[str, str]]) -> None:
        self.graph.add_out_edges(src, dsts)

    def flush(self) -> None:
        self.graph.flush()

    def close(self) -> None:
        self.graph.close()


register_sink("warc", WarcSink.build)
register_sink("crawl-log", CrawlLogSink)
register_sink("graph", GraphSink)


if TYPE_CHECKING:
    from .seams import Sinks

    def _conforms(recorder: Recorder) -> Sinks:  # mypy checks that Recorder is the Sinks
        return recorder

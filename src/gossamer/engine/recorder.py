"""The engine's one door to the sinks: WARC, crawl log and link graph of a crawl directory.

The sinks never call back into the engine; this facade only adapts a `FetchResult` to each.

WARC records are handed to the OS as they are written; log and graph lines are buffered, and
`flush()` hands them to the OS: call it before the frontier counts the batch done.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..config import CrawlSettings
from ..fetch import FetchResult
from ..sinks import CrawlLog, GraphWriter, WarcWriter
from ..sinks.warc import recover
from ..urls import fingerprint

if TYPE_CHECKING:
    from .recrawl import Recrawl


class Recorder:
    """`recrawl`: the validators of a re-crawled crawl (`--recrawl`); a 304 answer is then
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
    ) -> None:
        self.recrawl = recrawl
        self.warc: WarcWriter | None = None
        if settings.warc:
            if not part:  # a pool's parent recovers before its workers start
                recover(out / "warc")  # a killed run leaves `.open` files: keep whole records
            self.warc = WarcWriter(
                out / "warc",
                prefix=f"gossamer{'-' + part if part else ''}",
                max_bytes=settings.warc_max_bytes,
                warcinfo={
                    "software": f"gossamer/{version}",
                    "operator": settings.user_agent,
                    "robots": "obey" if settings.obey_robots else "ignore",
                    "seeds": " ".join(settings.seeds),
                },
                cdx=True,  # each file's CDXJ index as it is written: `write_crawl_index`
            )
        self.crawl_log = CrawlLog(out / "crawl.log.jsonl")
        self.graph = GraphWriter(out, part=part)

    def exchange(self, result: FetchResult) -> None:
        if self.warc is None:
            return
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
            result.truncated,
            revisit=revisit,
            refers_to_date=old_date,
        )

    def log(self, result: FetchResult, *, depth: int, parent: str | None, outcome: str) -> None:
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
        )

    def edge(self, src: str, dst: str, kind: str) -> None:
        """One graph edge; `edges` records a page's edges in one call, at half the cost."""
        self.graph.add_edge(src, dst, kind)

    def edges(self, src: str, dsts: list[tuple[str, str]]) -> None:
        """The graph edges of one page: (dst URL, kind) pairs, kind `link`, `redirect` or
        `canonical` (self-links and repeated pairs are left out)."""
        self.graph.add_out_edges(src, dsts)

    def flush(self) -> None:
        """Hand the buffered log and graph lines to the OS (WARC records already are), so a
        killed process loses nothing the frontier counts as done. No fsync: that guards
        against power loss only and would block the event loop once per host batch. Raises
        the first error met (a full disk), after trying both."""
        errors: list[BaseException] = []
        for flush in (self.crawl_log.flush, self.graph.flush):
            try:
                flush()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Write what is pending and close every sink (all of them, even when one fails);
        raises the first error met."""
        errors: list[BaseException] = []
        for close in (
            self.warc.close if self.warc is not None else None,
            self.crawl_log.close,
            self.graph.close,
        ):
            if close is None:
                continue
            try:
                close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


if TYPE_CHECKING:
    from .seams import Sinks

    def _conforms(recorder: Recorder) -> Sinks:  # mypy checks that Recorder is the Sinks
        return recorder

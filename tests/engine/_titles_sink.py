"""A sink added the way the registry means it: this one module, a `PageSink` and its
registration. It writes titles.jsonl: {"url", "title"} for each HTML page fetched with a 200.
(tests/engine/test_sink_registry.py registers it for one crawl.)"""

from __future__ import annotations

import html
import json
import re

from gossamer.engine.sink_registry import PageSink, SinkContext, register_sink
from gossamer.fetch import FetchResult

NAME = "titles"
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


class TitlesSink(PageSink):
    def __init__(self, ctx: SinkContext) -> None:
        self.file = open(ctx.out / f"titles{'-' + ctx.part if ctx.part else ''}.jsonl", "a")  # noqa: SIM115 (closed by close())
        self.lines: list[str] = []

    def exchange(self, result: FetchResult) -> None:
        if result.status != 200 or "html" not in (result.header("content-type") or ""):
            return
        found = _TITLE.search(result.body)
        title = html.unescape(found.group(1).decode("utf-8", "replace").strip()) if found else None
        self.lines.append(json.dumps({"url": result.url, "title": title}) + "\n")

    def flush(self) -> None:
        self.file.writelines(self.lines)
        self.lines.clear()
        self.file.flush()

    def close(self) -> None:
        self.flush()
        self.file.close()


def register() -> None:
    register_sink(NAME, TitlesSink)

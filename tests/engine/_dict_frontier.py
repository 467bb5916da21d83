"""A frontier backend added the way the registry means it: this one module and its
registration. "dict" keeps a crawl's frontier in the memory of one process (the reference
`MemoryFrontier`), so it serves an embedded crawl of one worker process that is not resumed:
nothing is written to the crawl directory. (tests/engine/test_build_registries.py
registers it for one crawl.)"""

from __future__ import annotations

from gossamer.config import CrawlSettings
from gossamer.frontier import Frontier, FrontierError, MemoryFrontier
from gossamer.frontier._registry import FrontierPlace, register_frontier

NAME = "dict"

#: every frontier this backend opened, for the test to look at
opened: list[MemoryFrontier] = []


def open_dict_frontier(settings: CrawlSettings, place: FrontierPlace) -> Frontier:
    if place.directory is None:
        raise FrontierError("the dict frontier serves an embedded crawl: no crawl directory")
    frontier = MemoryFrontier(**settings.frontier_knobs())
    opened.append(frontier)
    return frontier


def register() -> None:
    register_frontier(NAME, open_dict_frontier, summary="one process's memory (a test's)")

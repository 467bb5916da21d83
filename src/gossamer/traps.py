"""Crawler-trap detectors: calendars, too many path segments, query-string explosions.

The pure, per-URL checks (`CalendarWindow`, `path_segments`) are called by `Scope.reject_url`,
so their verdicts are memoised with the URL's other routing facts. `QueryTraps` is stateful:
the distinct query strings (and parameter-name sequences) one path has shown, bounded in
memory, one per worker process; so a crawl of W workers may give a path up to W times the cap,
and a `--resume` starts the count again. All take canonical URLs. Why, and with which
defaults: docs/crawler.md, "Traps"."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import CrawlSettings

# A date as one segment or value: 2026-11 or 2026-11-25 (ISO 8601 calendar dates).
_ISO_DATE = re.compile(r"(\d{4})-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?")
# Query parameters whose 4-digit value is a year (?year=3787&month=1). A bare `y` only next to
# an `m` (?y=3787&m=1): alone it is as often a coordinate (server-side image maps, ?x=…&y=…).
_YEAR_PARAMS = frozenset({"year", "yr", "yyyy", "jahr", "annee", "anno", "ano"})
_TWO_DIGIT_MONTH = frozenset(f"{m:02d}" for m in range(1, 13))
_TWO_DIGIT_DAY = frozenset(f"{d:02d}" for d in range(1, 32))
_FOUR_DIGITS = re.compile(r"\d{4}")


def _split(url: str) -> tuple[str, str]:
    """(path, query) of an absolute URL (no fragment)."""
    rest = url.split("://", 1)[-1]
    slash = rest.find("/")
    if slash < 0:
        return "/", rest.partition("?")[2]
    path, _, query = rest[slash:].partition("?")
    return path, query


def date_only_years(url: str) -> list[int]:
    """The years of the dates a URL *consists of*: a path that ends in a date
    (`…/2026/11/`, `…/2026/11/25`, `…/2026-11/`, optionally followed by `index.*`) and query
    values that are dates (`?date=2026-11-25`) or years (`?year=2026`). A date followed by
    more path (`/2024/05/article-title`) is an article's address, not a calendar page: []."""
    if _FOUR_DIGITS.search(url) is None:  # the common case, decided fast
        return []
    path, query = _split(url)
    years: list[int] = []
    segments = path.split("/")[1:]
    if segments and segments[-1] == "":
        segments.pop()
    if segments and segments[-1].startswith("index."):
        segments.pop()
    if segments:
        last = segments[-1]
        m = _ISO_DATE.fullmatch(last)
        if m is not None:
            years.append(int(m.group(1)))
        else:
            # …/YYYY/MM or …/YYYY/MM/DD, months and days written with two digits: unpadded
            # numbers after a 4-digit one are as often ids (/go/2031/5/2) as dates
            tail = segments[-3:]
            if len(tail) == 3 and tail[2] in _TWO_DIGIT_DAY and tail[1] in _TWO_DIGIT_MONTH:
                y = tail[0]
            elif len(tail) >= 2 and tail[-1] in _TWO_DIGIT_MONTH:
                y = tail[-2]
            else:
                y = ""
            if len(y) == 4 and y.isascii() and y.isdigit():
                years.append(int(y))
    if query:
        params = [p.partition("=") for p in query.split("&")]
        with_m = any(name.lower() == "m" for name, _, _ in params)
        for name, _, value in params:
            if len(value) == 4 and value.isascii() and value.isdigit():
                low = name.lower()
                if low in _YEAR_PARAMS or (low == "y" and with_m):
                    years.append(int(value))
            elif len(value) in (7, 10):
                m = _ISO_DATE.fullmatch(value)
                if m is not None:
                    years.append(int(m.group(1)))
    return years


def _this_year() -> int:
    return time.gmtime().tm_year


@dataclass(frozen=True, slots=True)
class CalendarWindow:
    """The years a date-only URL may name: a calendar's "next month" link, followed for ever,
    walks out of this window within a few dozen pages (a year is 12 pages). None on a side:
    no limit there. `now_year` defaults to this year (UTC)."""

    years_back: int | None = 30
    years_ahead: int | None = 5
    now_year: int = field(default_factory=_this_year)

    def is_trap(self, url: str) -> bool:
        """Whether `url` is a date-only URL (see `date_only_years`) outside the window."""
        years = date_only_years(url)
        if not years:
            return False
        first = None if self.years_back is None else self.now_year - self.years_back
        last = None if self.years_ahead is None else self.now_year + self.years_ahead
        return any(
            (first is not None and y < first) or (last is not None and y > last) for y in years
        )


def calendar_window(settings: CrawlSettings) -> CalendarWindow | None:
    """The crawl's calendar window, or None when both sides are unlimited."""
    back, ahead = settings.traps.calendar_years_back, settings.traps.calendar_years_ahead
    if back is None and ahead is None:
        return None
    return CalendarWindow(years_back=back, years_ahead=ahead)


def path_segments(url: str) -> int:
    """Non-empty path segments of an absolute URL (`/a/b/` has 2)."""
    path = _split(url)[0]
    return sum(1 for s in path.split("/") if s)


@dataclass(slots=True)
class _PathQueries:
    queries: set[int] = field(default_factory=set)  # hashes of the query strings admitted
    shapes: set[str] = field(default_factory=set)  # their parameter-name sequences


class QueryTraps:
    """Caps on one path's query strings (scheme, host and path: one key), as a worker routes
    links. `admit(url)` returns None to keep the URL, else the reason key:

    - `scope/trap-query`: the path has had `max_queries` distinct query strings already
      (endless `search.php?q=…&page=N` pagination, session-like parameters);
    - `scope/trap-params`: the URL's parameter-name sequence (`q,sort,page` vs `page,sort,q`)
      would be the path's `max_shapes + 1`-th (faceted navigation and parameter
      permutations: every subset and order of a form's fields).

    An admitted URL stays admitted (asking again counts nothing). Memory is bounded: after
    `max_tracked` admitted query strings in all, everything is forgotten and counting starts
    over (so the caps are per window of that many URLs: approximate, never too strict)."""

    __slots__ = ("_paths", "_tracked", "max_queries", "max_shapes", "max_tracked")

    def __init__(
        self, max_queries: int | None, max_shapes: int | None, *, max_tracked: int = 500_000
    ) -> None:
        self.max_queries = max_queries
        self.max_shapes = max_shapes
        self.max_tracked = max_tracked  # ~70 B a hash: 35 MB at the cap
        self._paths: dict[str, _PathQueries] = {}
        self._tracked = 0

    @property
    def enabled(self) -> bool:
        return self.max_queries is not None or self.max_shapes is not None

    def admit(self, url: str) -> str | None:
        base, _, query = url.partition("?")
        if not query:
            return None
        entry = self._paths.get(base)
        if entry is None:
            entry = self._paths[base] = _PathQueries()
        key = hash(query)
        if key in entry.queries:
            return None
        if self.max_queries is not None and len(entry.queries) >= self.max_queries:
            return "scope/trap-query"
        shape = "&".join(p.partition("=")[0] for p in query.split("&"))
        if shape not in entry.shapes:
            if self.max_shapes is not None and len(entry.shapes) >= self.max_shapes:
                return "scope/trap-params"
            entry.shapes.add(shape)
        entry.queries.add(key)
        self._tracked += 1
        if self._tracked > self.max_tracked:
            self._paths.clear()
            self._tracked = 0
        return None

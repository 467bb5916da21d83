"""`Page`: one crawled page as a Python program and an extractor see it (docs/python.md).

A value built from the fetcher's `FetchResult` once the crawler has recorded the page: its
URL, status, headers, body and depth, the edges the crawl followed from it, and what is
read from its HTML on demand (decoded text, title, every link with its kind, CSS and XPath
selectors). Parsing happens only when a property that needs it is read, once a page."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .fetch import FetchResult
from .parse import ParseOptions, detect_charset, is_html, parse_html

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser, LexborNode

__all__ = ["Link", "Page"]

_T = TypeVar("_T")

#: every link of a page, nofollow ones too, and its canonical link
_PARSE_OPTIONS = ParseOptions(follow_nofollow=True, link_rels=frozenset({"canonical"}))


@dataclass(frozen=True, slots=True)
class Link:
    """A link found on a page: its absolute URL (canonical, as the crawler keys it) and its
    kind: the element it came from (`a`, `area`, `frame` for a frame or iframe, `canonical`
    for a `<link rel=canonical>`) or `redirect` for a 3xx answer's Location."""

    url: str
    kind: str


class Page:
    """One crawled page (a response the crawl counts done, whatever its HTTP status).

    `url` is the URL fetched; gossamer fetches a redirect as a page of its own (its target,
    `redirect`, is crawled as another page), so `final_url` is the URL the body came from,
    `url` itself. `headers` maps lower-case names to their first value (`header_list` keeps
    them all, in order). `depth` is the link hops from a seed (seeds 0), `fetched_at` when
    the fetch began (Unix time), `elapsed` the seconds it took. `followed` holds the edges
    the crawl kept from this page (in scope, not trapped): (URL, kind) pairs, kind `link`,
    `redirect` or `canonical`. A page is read-only; one built by hand (to test an
    extractor) takes the same values as keywords."""

    __slots__ = (
        "_cache",
        "_header_list",
        "_result",
        "body",
        "depth",
        "elapsed",
        "fetched_at",
        "followed",
        "status",
        "truncated",
        "url",
    )

    url: str
    status: int
    body: bytes
    depth: int
    fetched_at: float
    elapsed: float
    followed: tuple[tuple[str, str], ...]
    truncated: bool

    def __init__(
        self,
        url: str,
        status: int,
        header_list: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
        depth: int = 0,
        fetched_at: float = 0.0,
        elapsed: float = 0.0,
        followed: Iterable[tuple[str, str]] = (),
        truncated: bool = False,
    ) -> None:
        self.url = url
        self.status = status
        self._header_list: tuple[tuple[str, str], ...] | None = tuple(header_list)
        self._result: FetchResult | None = None
        self.body = body
        self.depth = depth
        self.fetched_at = fetched_at
        self.elapsed = elapsed
        self.followed = tuple(followed)
        self.truncated = truncated
        self._cache: dict[str, Any] = {}

    @classmethod
    def from_result(
        cls, result: FetchResult, depth: int, edges: Iterable[tuple[str, str]] = ()
    ) -> Page:
        """The page of a fetcher's result (the crawler's `FetchResult`); its headers are
        read from it when first asked for."""
        page = cls(
            result.url,
            result.status if result.status is not None else 0,
            (),
            result.body,
            depth,
            result.started_at,
            result.elapsed,
            edges,
            result.truncated,
        )
        page._header_list, page._result = None, result
        return page

    @property
    def header_list(self) -> tuple[tuple[str, str], ...]:
        """Every response header as (name, value), in order."""
        found = self._header_list
        if found is None:
            assert self._result is not None
            found = self._header_list = tuple(self._result.headers)
            self._result = None
        return found

    @property
    def final_url(self) -> str:
        """The URL the body came from (`url`: a redirect is a page of its own)."""
        return self.url

    @property
    def headers(self) -> Mapping[str, str]:
        """The response's headers: lower-case name → first value."""
        return self._memo("headers", self._first_headers)

    def _first_headers(self) -> dict[str, str]:
        first: dict[str, str] = {}
        for name, value in self.header_list:
            first.setdefault(name.lower(), value)
        return first

    @property
    def content_type(self) -> str | None:
        """The Content-Type header, or None."""
        return self.headers.get("content-type")

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    @property
    def is_html(self) -> bool:
        """Whether the page is HTML (its Content-Type, else its first bytes sniffed)."""
        return is_html(self.content_type, self.body)

    @property
    def redirect(self) -> str | None:
        """A 3xx page's target (the `redirect` edge the crawl followed), else None."""
        return next((url for url, kind in self.followed if kind == "redirect"), None)

    @property
    def encoding(self) -> str:
        """The encoding the body is decoded with (its BOM, Content-Type or `<meta>`)."""
        return str(self._charset()[1])

    @property
    def text(self) -> str:
        """The body decoded (`encoding`; bytes it cannot decode replaced)."""

        def decode() -> str:
            _, codec, bom = self._charset()
            return self.body[bom:].decode(codec, "replace")

        return str(self._memo("text", decode))

    def _charset(self) -> tuple[str, str, int]:
        found: tuple[str, str, int] = self._memo(
            "charset", lambda: detect_charset(self.body, self.content_type)
        )
        return found

    @property
    def title(self) -> str | None:
        """The text of the HTML page's first `<title>`, whitespace folded; None without."""

        def find() -> str | None:
            parsed = self._parsed()
            return parsed.title if parsed is not None else None

        return self._memo("title", find)

    def _set_followed(self, edges: list[tuple[str, str]]) -> None:
        """Set `followed` once the crawl has routed the page's links (the page is built
        before: an extractor's `follow` reads it)."""
        self.followed = tuple(edges)

    def _seed(self, *, title: str | None) -> None:
        """Give the page what the crawler read from it already (its title), so that reading
        it does not parse the page again."""
        self._cache.setdefault("title", title)

    @property
    def links(self) -> tuple[Link, ...]:
        """Every link of the HTML page, nofollow ones included, in document order
        (absolute and canonical; repeats kept), or a redirect's target; what the crawl
        followed of them is `followed`."""

        def find() -> tuple[Link, ...]:
            if self.redirect is not None:
                return (Link(self.redirect, "redirect"),)
            parsed = self._parsed()
            if parsed is None:
                return ()
            return tuple(Link(link.url, link.kind) for link in parsed.links)

        return self._memo("links", find)

    def css(self, selector: str) -> list[LexborNode]:
        """The HTML elements matching a CSS selector (selectolax nodes: `.text()`,
        `.attributes`, `.css(...)`); empty for a page that is not HTML."""
        tree = self.tree
        return [] if tree is None else list(tree.css(selector))

    def css_first(self, selector: str) -> LexborNode | None:
        """The first HTML element matching a CSS selector, or None."""
        tree = self.tree
        return None if tree is None else tree.css_first(selector)

    @property
    def tree(self) -> LexborHTMLParser | None:
        """The page's HTML tree (selectolax's Lexbor parser), None when it is not HTML."""

        def build() -> LexborHTMLParser | None:
            if not self.is_html:
                return None
            from selectolax.lexbor import LexborHTMLParser

            return LexborHTMLParser(self.text)

        return self._memo("tree", build)

    def xpath(self, query: str) -> list[Any]:
        """The results of an XPath 1.0 query on the page's HTML (lxml elements, strings or
        numbers, as lxml returns them); empty for a page that is not HTML. Needs lxml."""
        try:
            import lxml.html
        except ImportError as exc:  # (lxml: an optional dependency)
            raise ImportError("Page.xpath needs lxml: pip install lxml") from exc
        if not self.is_html or not self.body:
            return []
        root = self._memo("lxml", lambda: lxml.html.document_fromstring(self.text))
        found = root.xpath(query)
        return list(found) if isinstance(found, list) else [found]

    def _parsed(self) -> Any:
        def parse() -> Any:
            if self.status != 200 or not self.is_html:
                return None
            return parse_html(self.body, self.url, self.headers, _PARSE_OPTIONS)

        return self._memo("parsed", parse)

    def _memo(self, key: str, compute: Callable[[], _T]) -> _T:
        cache = self._cache
        if key not in cache:
            cache[key] = compute()
        value: _T = cache[key]
        return value

    def __repr__(self) -> str:
        return f"<Page {self.status} {self.url} depth={self.depth} {len(self.body)} bytes>"

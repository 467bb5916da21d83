"""What the simulated web answers: bytes and behaviour for every request target.

`respond()` is a pure function of (model, host, target, attempt, epoch, request headers):
the server only adds transport (latency, resets, trickling, streaming) and `Date`. Rendering
is the hot path of a benchmark, so HTML is assembled from a pre-built pool of sentences.
"""

from __future__ import annotations

import email.utils
import gzip
import html
import random
import zlib
from dataclasses import dataclass, field
from datetime import date as _date
from functools import lru_cache

import xxhash

from ._model import (
    DUP_KINDS,
    NO_CONTENT,
    HostFlag,
    Kind,
    Link,
    PageFlag,
    PagePlan,
    Resource,
    WebModel,
)

_WORDS = [
    "crawler",
    "web",
    "page",
    "link",
    "graph",
    "server",
    "index",
    "search",
    "archive",
    "frontier",
    "politeness",
    "host",
    "queue",
    "fetch",
    "parse",
    "robots",
    "sitemap",
    "delay",
    "budget",
    "coverage",
    "overlap",
    "quality",
    "partition",
    "worker",
    "shard",
    "lease",
    "token",
    "expiry",
    "redirect",
    "canonical",
    "fragment",
    "query",
    "path",
    "scheme",
    "domain",
    "address",
    "network",
    "latency",
    "bandwidth",
    "throughput",
    "bucket",
    "phase",
    "hash",
    "ring",
    "node",
    "cluster",
    "replica",
    "journal",
    "record",
    "river",
    "mountain",
    "garden",
    "kitchen",
    "window",
    "morning",
    "evening",
    "summer",
    "winter",
    "letter",
    "market",
    "station",
    "bridge",
    "forest",
    "harbour",
    "village",
    "valley",
    "island",
    "meadow",
    "library",
    "museum",
    "theatre",
    "circus",
    "planet",
    "quick",
    "bright",
    "quiet",
    "gentle",
    "simple",
    "modern",
    "ancient",
    "golden",
    "silver",
    "hidden",
    "open",
    "careful",
    "steady",
    "runs",
    "finds",
    "keeps",
    "reads",
    "writes",
    "builds",
    "sends",
    "holds",
    "takes",
    "gives",
    "shows",
    "tells",
    "moves",
    "waits",
    "sees",
]
_LATIN = [
    "café",
    "naïve",
    "Müller",
    "señor",
    "façade",
    "Ærø",
    "déjà",
    "über",
    "crème",
    "Straße",
    "Zürich",
    "Øresund",
]
_CP1252 = ["€5", "“quoted”", "—dash—", "™"]
_JAPANESE = ["日本語", "東京", "検索", "ウェブ", "クローラ", "索引", "文書", "京都"]


def _sentence_pool(charset: str, seed: int = 20261122, count: int = 1024) -> tuple[str, ...]:
    rng = random.Random(f"{seed}:{charset}")
    extra: list[str] = []
    if charset in ("utf-8", "iso-8859-1", "windows-1252"):
        extra += _LATIN
    if charset == "windows-1252":
        extra += _CP1252
    if charset in ("utf-8", "shift_jis"):
        extra += _JAPANESE
    out = []
    for _ in range(count):
        words = [rng.choice(_WORDS) for _ in range(rng.randrange(8, 22))]
        if extra and rng.random() < 0.3:
            words[rng.randrange(len(words))] = rng.choice(extra)
        s = " ".join(words)
        out.append(s[0].upper() + s[1:] + ".")
    return tuple(out)


_POOLS: dict[str, tuple[str, ...]] = {
    cs: _sentence_pool(cs) for cs in ("utf-8", "iso-8859-1", "windows-1252", "shift_jis")
}
_PARAGRAPHS: dict[str, tuple[str, ...]] = {
    cs: tuple(
        "<p>" + " ".join(pool[(k * 7 + j) % len(pool)] for j in range(3)) + "</p>\n"
        for k in range(len(pool))
    )
    for cs, pool in _POOLS.items()
}
_PARAGRAPH_BYTES: dict[str, tuple[bytes, ...]] = {
    cs: tuple(p.encode(cs) for p in paras) for cs, paras in _PARAGRAPHS.items()
}
_M64 = (1 << 64) - 1
_MEAN_PARAGRAPH = sum(map(len, _PARAGRAPHS["utf-8"])) // len(_PARAGRAPHS["utf-8"])


@dataclass(slots=True)
class Response:
    """An answer before transport. `action`: send, reset (RST without answering) or hang
    (never answer). A `stream_size` > 0 means the body is streamed: `body` is its head,
    then `filler` repeats until stream_size bytes, then `tail`."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    action: str = "send"
    first_byte_delay: float = 0.0
    trickle_s: float = 0.0
    stream_size: int = 0
    filler: bytes = b""
    tail: bytes = b""
    chunked: bool = False


_BASE_DATE = 1767225600  # 2026-01-01T00:00:00Z
_HTML = "text/html"


def _httpdate(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


@lru_cache(maxsize=4096)
def _parse_httpdate(value: str) -> float | None:
    try:
        dt = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return dt.timestamp() if dt.tzinfo else None


def content_version(model: WebModel, plan: PagePlan, epoch: int) -> int:
    return epoch if plan.flags & PageFlag.CHANGING else 0


def last_modified(model: WebModel, h: int, i: int, version: int) -> float:
    base = (
        _BASE_DATE
        + (xxhash.xxh64_intdigest(f"{model.spec.seed}|lm|{h}|{i}".encode()) % 200) * 86400
    )
    return float(base + version * 86400 * 7)


def render_page(
    model: WebModel,
    plan: PagePlan,
    *,
    epoch: int = 0,
    session: bool = False,
    printable: bool = False,
    mirror: bool = False,
) -> bytes:
    """The HTML of a page, encoded in its host's charset. `printable`: its printer-friendly
    copy (the same text, its link lists as plain text, no link); `mirror`: its copy under
    /mirror/ (a `<base href>` to the page, so its links are the page's)."""
    host = model.hosts[plan.host]
    flags = plan.flags
    charset = host.charset
    malformed = bool(flags & PageFlag.MALFORMED)
    paragraphs = _PARAGRAPH_BYTES[charset]
    npar = len(paragraphs)
    url = model.page_url(plan.host, plan.page)
    title = f"{host.name} page {plan.page}"
    head = ['<!DOCTYPE html>\n<html lang="en"><head>']
    if host.charset_decl in (1, 2):
        head.append(f'<meta charset="{charset}">')
    head.append(f"<title>{title}</title>")
    if plan.base_href:
        head.append(f'<base href="{plan.base_href}">')
    elif mirror:
        head.append(f'<base href="{url}">')
    if flags & PageFlag.META_NOFOLLOW:
        head.append('<meta name="robots" content="noindex,nofollow">')
    elif flags & PageFlag.META_NOINDEX:
        head.append('<meta name="robots" content="noindex">')
    if (session or plan.page % 5 == 0) and not printable:
        head.append(f'<link rel="canonical" href="{url}">')
    if printable:
        head.append('<link rel="stylesheet" href="/print.css" media="print">')
    head.append("</head>\n<body>\n")
    if malformed:
        head = [p.upper() if p.startswith("<title") else p for p in head]
        head.append("<div><table><tr><td>unclosed cell <b>bold <i>italic</b></i>\n")
    head.append(f"<h1>{title}</h1>\n")
    if flags & PageFlag.CHANGING and epoch:
        head.append(f'<p class="rev">Revision {epoch}: {_POOLS[charset][epoch % npar]}</p>\n')
    # Bytes are assembled directly: paragraphs are pre-encoded, links are ASCII.
    parts = ["".join(head).encode(charset)]
    links = plan.links
    nlinks = len(links)
    budget = max(1, plan.size // _MEAN_PARAGRAPH)
    groups = min(budget, 8, nlinks) if nlinks else 0
    # the page's paragraphs: a sequence of its own, a mix of (content seed, position) each,
    # so two pages share a paragraph only by chance (~budget² / pool). An arithmetic one
    # (start + j * step) made every two pages of one step shifted copies of each other:
    # ~0.4 % of a web's pages were near-duplicates of another (85-96 % the same text)
    seed = plan.content_seed
    bounds = [nlinks * g // groups for g in range(groups + 1)] if groups else [0]
    for j in range(max(budget, groups)):
        mixed = ((seed ^ (j * 0x9E3779B97F4A7C15)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        parts.append(paragraphs[(mixed >> 40) % npar])
        if j < groups:
            if printable:  # the list's text, as the page shows it, without the links
                listed = (
                    "<li></li>" if not links[n][2] and (n % 37 == 5 or n % 29 == 3)
                    else f"<li>link {n}</li>"  # (an iframe's and an area's: no text)
                    for n in range(bounds[j], bounds[j + 1])
                )  # fmt: skip
                parts.append(("<ul>" + "".join(listed) + "</ul>\n").encode(charset))
            else:
                parts.append(
                    _render_links(links, bounds[j], bounds[j + 1], malformed).encode(charset)
                )
    parts.append(b"</body></html>\n" if not malformed else b"<p>trailing <span>never closed\n")
    body = b"".join(parts)
    if flags & PageFlag.INVALID_UTF8 and charset == "utf-8":
        cut = len(body) // 2
        cut = body.rfind(b"<p>", 0, cut) if body.rfind(b"<p>", 0, cut) > 0 else cut
        body = body[:cut] + b"<p>broken \xff\xfe\xc3( bytes</p>" + body[cut:]
    return body


def _esc(href: str) -> str:
    if "&" in href or '"' in href or "<" in href or ">" in href:
        return html.escape(href)
    return href


def _render_links(links: tuple[Link, ...], start: int, end: int, malformed: bool) -> str:
    """A list of links. Tag variety (iframe, area) and malformed markup are decided by the
    link's index so the rendering stays a pure function of the plan."""
    if not malformed:
        out = ["<ul>"]
        for n in range(start, end):
            href = _esc(links[n][1])
            if links[n][2]:
                out.append(f'<li><a href="{href}" rel="nofollow">link {n}</a></li>')
            elif n % 37 == 5:
                out.append(f'<li><iframe src="{href}" title="frame {n}"></iframe></li>')
            elif n % 29 == 3:
                out.append(f'<li><map name="m{n}"><area href="{href}" alt="area {n}"></map></li>')
            else:
                out.append(f'<li><a href="{href}">link {n}</a></li>')
        out.append("</ul>\n")
        return "".join(out)
    out = ["<UL>"]
    for n in range(start, end):
        link = links[n]
        href = link.href
        if link.nofollow:
            out.append(f'<li><a href="{_esc(href)}" rel=nofollow>link {n}</a>')
        elif n % 3 == 0 and n + 1 < end and not any(c in href for c in " \t\n\"'=<>`"):
            # unquoted, upper case, unclosed: only when another <a> follows at once, or the
            # HTML5 adoption agency would clone the open <a> into the next paragraph
            out.append(f"<li><A HREF={href}>link {n}")
        elif n % 3 == 1 and "'" not in href:
            out.append(f"<li><a href='{href}'>link {n}</a>")  # raw & in a quoted attribute
        else:
            out.append(f'<li><a  class=x href="{_esc(href)}" >link {n}</A>')
    out.append("\n")
    return "".join(out)


def page_headers(model: WebModel, plan: PagePlan) -> list[tuple[str, str]]:
    host = model.hosts[plan.host]
    ctype = _HTML
    if host.charset_decl in (0, 2):
        ctype = f"{_HTML}; charset={host.charset}"
    headers = [("Content-Type", ctype)]
    if plan.flags & PageFlag.XROBOTS_NOFOLLOW:
        headers.append(("X-Robots-Tag", "nofollow"))
    elif plan.flags & PageFlag.XROBOTS_NOINDEX:
        headers.append(("X-Robots-Tag", "noindex"))
    return headers


def _html_doc(title: str, links: list[Link]) -> bytes:
    items = "".join(
        f'<li><a href="{html.escape(link.href)}">{link.href}</a></li>' for link in links
    )
    return (
        f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>"
        f"<h1>{title}</h1><ul>{items}</ul></body></html>\n"
    ).encode()


def _blob(kind: Kind, k: int) -> tuple[str, bytes]:
    rng = random.Random(f"blob:{kind.value}:{k}")
    filler = rng.randbytes(2000 + rng.randrange(6000))
    if kind in (Kind.PDF, Kind.LYING_HTML):
        return "application/pdf", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + filler + b"\n%%EOF\n"
    if kind is Kind.IMAGE:
        return "image/jpeg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + filler + b"\xff\xd9"
    return "image/png", b"\x89PNG\r\n\x1a\n" + filler


def sitemap_body(model: WebModel, h: int, part: int | None) -> bytes:
    host = model.hosts[h]
    parts = model.sitemap_parts(h)
    if part is None and parts:
        items = "".join(
            f"<sitemap><loc>http://{host.name}/sitemap-{k}.xml.gz</loc></sitemap>\n"
            for k in range(parts)
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{items}</sitemapindex>\n"
        ).encode()
    urls = []
    for i in model.sitemap_page_ids(h, part):
        lm = _httpdate_iso(last_modified(model, h, i, 0))
        loc = html.escape(model.page_url(h, i), quote=False)
        urls.append(f"<url><loc>{loc}</loc><lastmod>{lm}</lastmod></url>\n")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{''.join(urls)}</urlset>\n"
    ).encode()


def _httpdate_iso(ts: float) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d")


def _encode(body: bytes, accept_encoding: str, headers: list[tuple[str, str]]) -> bytes:
    ae = accept_encoding.lower()
    if "gzip" in ae:
        headers.append(("Content-Encoding", "gzip"))
        return gzip.compress(body, compresslevel=1, mtime=0)
    if "deflate" in ae:
        headers.append(("Content-Encoding", "deflate"))
        return zlib.compress(body, 1)
    return body


def _not_modified(etag: str, lm: float, if_none_match: str, if_modified_since: str) -> bool:
    if if_none_match:
        tags = [t.strip() for t in if_none_match.split(",")]
        return etag in tags or "*" in tags or f"W/{etag}" in tags
    if if_modified_since:
        ims = _parse_httpdate(if_modified_since)
        return ims is not None and lm <= ims
    return False


def respond(
    model: WebModel,
    res: Resource,
    *,
    attempt: int = 0,
    epoch: int = 0,
    accept_encoding: str = "",
    if_none_match: str = "",
    if_modified_since: str = "",
) -> Response:
    """The answer to a GET of `res` (the `attempt`-th request of that target, from 0)."""
    host = model.hosts[res.host]
    hf = host.flags
    kind = res.kind
    if hf & HostFlag.DEAD:
        return Response(0, action="hang")
    r = model.realism
    if kind is Kind.ROBOTS or kind is Kind.ROBOTS_MOVED:
        status = model.robots_status(res.host)
        if kind is Kind.ROBOTS and status == "404":
            return _text(404, b"not found\n")
        if kind is Kind.ROBOTS and status == "500":
            return _text(500, b"internal error\n")
        if kind is Kind.ROBOTS and status == "timeout":
            return Response(0, action="hang")
        if model.is_redirect(res):
            code, loc = model.redirect_location(res)
            return Response(code, [("Location", loc)], b"")
        return _text(200, model.robots_txt(res.host).encode())
    if kind is Kind.PAGE:
        plan = model.plan(res.host, res.a)
        f = plan.flags
        if f & PageFlag.HANG:
            return Response(0, action="hang")
        if f & PageFlag.RESET_ALWAYS or (f & PageFlag.RESET_ONCE and attempt == 0):
            return Response(0, action="reset")
        if f & PageFlag.ERROR_500:
            return _text(500, b"<html><body>Internal Server Error</body></html>\n", _HTML)
        if f & PageFlag.TRANSIENT_503 and attempt == 0:
            resp = _text(503, b"<html><body>Service Unavailable</body></html>\n", _HTML)
            if f & PageFlag.RETRY_AFTER:
                resp.headers.append(("Retry-After", "1"))
            return resp
        headers = page_headers(model, plan)
        version = content_version(model, plan, epoch)
        body = render_page(model, plan, epoch=version, session=res.session)
        if hf & HostFlag.CONDITIONAL:
            etag = f'"{xxhash.xxh64_hexdigest(body)}"'
            lm = last_modified(model, res.host, res.a, version)
            headers += [("ETag", etag), ("Last-Modified", _httpdate(lm))]
            if _not_modified(etag, lm, if_none_match, if_modified_since):
                return Response(304, [h for h in headers if h[0] != "Content-Type"], b"")
        if f & PageFlag.BROKEN_GZIP:
            headers.append(("Content-Encoding", "gzip"))
            body = gzip.compress(body[:64], mtime=0)[:10] + random.Random(len(body)).randbytes(
                max(64, len(body) // 3)
            )
        elif hf & HostFlag.GZIP:
            body = _encode(body, accept_encoding, headers)
        resp = Response(200, headers, body)
        if f & PageFlag.SLOW_FIRST_BYTE:
            resp.first_byte_delay = r.slow_first_byte_s
        if f & PageFlag.TRICKLE:
            resp.trickle_s = r.trickle_s
        return resp
    if kind in DUP_KINDS:
        return _near_duplicate(model, res)
    if kind is Kind.REDIRECT or kind is Kind.LOOP:
        code, loc = model.redirect_location(res)
        if (res.a + res.c) % 3 == 0 and loc.startswith(f"http://{host.name}/"):
            loc = loc[len(f"http://{host.name}") :]  # relative Location (RFC 9110 allows it)
        moved = f'<html><body>Moved to <a href="{html.escape(loc)}">here</a></body></html>\n'
        return Response(code, [("Location", loc), ("Content-Type", _HTML)], moved.encode())
    if kind is Kind.SITEMAP:
        return _text(200, sitemap_body(model, res.host, None), "application/xml")
    if kind is Kind.SITEMAP_PART:
        body = gzip.compress(sitemap_body(model, res.host, res.a), mtime=0)
        return _text(200, body, "application/gzip")
    if kind in (Kind.PDF, Kind.IMAGE, Kind.MEDIA, Kind.LYING_HTML):
        ctype, body = _blob(kind, res.a)
        return _text(200, body, ctype)
    if kind is Kind.LYING_PDF:
        doc = _html_doc(f"report {res.a}", model.resource_links(res))
        return _text(200, doc, f"{_HTML}; charset=utf-8")
    if kind is Kind.MISSING:
        return _text(404, b"<html><body>Not Found</body></html>\n", _HTML)
    if kind is Kind.GONE:
        return _text(410, b"<html><body>Gone</body></html>\n", _HTML)
    if kind is Kind.HUGE:
        links = model.resource_links(res)
        head = _html_doc(f"huge page {res.a}", links).replace(b"</body></html>\n", b"")
        filler = (("<p>" + " ".join(_POOLS["utf-8"][:40]) + "</p>\n") * 16).encode()
        tail = b"</body></html>\n"
        return Response(
            200,
            [("Content-Type", f"{_HTML}; charset=utf-8")],
            head,
            stream_size=max(r.huge_page_bytes, len(head) + len(tail)),
            filler=filler,
            tail=tail,
            chunked=res.a % 2 == 1,
        )
    if kind in (Kind.TRAP_CALENDAR, Kind.TRAP_DEEP, Kind.TRAP_SEARCH):
        title = {
            Kind.TRAP_CALENDAR: f"Calendar {res.a}-{res.b:02d}",
            Kind.TRAP_DEEP: "Deeper",
            Kind.TRAP_SEARCH: f"Search results page {res.a}",
        }[kind]
        return _text(200, _html_doc(title, model.resource_links(res)), f"{_HTML}; charset=utf-8")
    return _text(404, b"<html><body>Not Found</body></html>\n", _HTML)


def _near_duplicate(model: WebModel, res: Resource) -> Response:
    """A near-duplicate on a NEAR_DUPS host (model.DUP_KINDS): a copy of page `res.a`
    (printable, mirrored, under `?ref=`) or a day of the calendar."""
    if res.kind is Kind.DUP_CALENDAR:
        return _text(200, render_calendar_day(model, res), f"{_HTML}; charset=utf-8")
    plan = model.plan(res.host, res.a)
    if plan.flags & NO_CONTENT:
        return _text(404, b"<html><body>Not Found</body></html>\n", _HTML)
    body = render_page(
        model,
        plan,
        session=res.kind is Kind.DUP_SESSION,
        printable=res.kind is Kind.DUP_PRINT,
        mirror=res.kind is Kind.DUP_MIRROR,
    )
    return Response(200, page_headers(model, plan), body)


def render_calendar_day(model: WebModel, res: Resource) -> bytes:
    """A day's page of a NEAR_DUPS host's calendar: the day in its title and heading, the
    same ~40 paragraphs of events every day, and links to the days before and after."""
    host = model.hosts[res.host]
    day = _date.fromordinal(res.a).isoformat()
    paragraphs = _PARAGRAPHS["utf-8"]
    seed = xxhash.xxh64_intdigest(f"{model.spec.seed}|calendar|{res.host}".encode())
    text = "".join(
        paragraphs[(((seed ^ (j * 0x9E3779B97F4A7C15)) * 0xBF58476D1CE4E5B9) & _M64) >> 40 & 1023]
        for j in range(40)
    )
    links = "".join(
        f'<li><a href="{html.escape(link.href)}">{"home" if link.href == "/" else "another day"}'
        "</a></li>"
        for link in model.resource_links(res)
    )
    return (
        f"<!DOCTYPE html>\n<html><head><title>{host.name} events on {day}</title></head>"
        f"<body><h1>Events on {day}</h1>\n{text}<ul>{links}</ul></body></html>\n"
    ).encode()


def _text(status: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> Response:
    return Response(status, [("Content-Type", ctype)], body)


def page_outcome(model: WebModel, res: Resource) -> tuple[bool, list[Link], bool]:
    """For the truth: (is parseable HTML, its links, page-level nofollow) when fetched
    successfully (transient failures retried)."""
    kind = res.kind
    if kind is Kind.PAGE:
        plan = model.plan(res.host, res.a)
        if plan.flags & NO_CONTENT:
            return False, [], False
        return True, list(plan.links), plan.nofollow_page
    if kind in (Kind.LYING_PDF, Kind.HUGE, Kind.TRAP_CALENDAR, Kind.TRAP_DEEP, Kind.TRAP_SEARCH):
        return True, model.resource_links(res), False
    if kind is Kind.DUP_CALENDAR:
        return True, model.resource_links(res), False
    if kind in DUP_KINDS:  # a copy of a page: the page's links (a printable copy: none)
        plan = model.plan(res.host, res.a)
        if plan.flags & NO_CONTENT:
            return False, [], False
        if kind is Kind.DUP_PRINT:
            return True, [], False
        return True, list(plan.links), plan.nofollow_page
    return False, [], False

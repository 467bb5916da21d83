"""gossamer.urls against URL test vectors nobody on this project wrote (in
tests/data/conformance/url; sources and licences in tests/data/README.md).

- WHATWG urltestdata (891 cases): the parse path (`whatwg_href`: can_ada, with ada_url where
  can_ada refuses or the scheme is not http/https) must give exactly the expected
  serialisation, and `LinkResolver.resolve` must give the canonical form of the expected URL
  (None when the result is not http/https or parsing fails). All must pass.
- Canonicalisation vectors (iipc/urlcanon semantic-precise, idempotence, path dots, IPv4 forms;
  crawler-commons weird→normalised URLs, URL resolution, invalid URLs). A vector **agrees**
  when `canonicalize(input) == canonicalize(expected)`: both canonicalisers reach the same URL
  once our own documented steps (fragment removal, unreserved-escape decoding, session-id
  removal, empty-query and trailing-dot removal) are applied to theirs. Vectors whose expected
  value is not an http(s) URL must be rejected with URLError (our canonicaliser's domain is
  http/https). The rest differ on purpose: they are grouped by the kind of difference, each
  group an expected failure with its reason, and each member must differ in exactly that way
  (`KnownDifference`; any other mismatch fails). The group sizes are pinned, so a case moving
  into a group is noticed.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from gossamer.urls import LinkResolver, URLError, canonicalize, whatwg_href

CONFORMANCE = Path(__file__).resolve().parent / "data" / "conformance" / "url"


def _load_json(name: str) -> Any:
    return json.loads((CONFORMANCE / name).read_text(encoding="utf-8"))


def _canon(url: str) -> str | None:
    try:
        return canonicalize(url)
    except URLError:
        return None


# ------------------------------------------------------------------ WHATWG urltestdata


def _whatwg_cases() -> list[Any]:
    cases = [c for c in _load_json("whatwg-urltestdata.json") if isinstance(c, dict)]
    assert len(cases) == 891
    return [pytest.param(c, id=f"{i}") for i, c in enumerate(cases)]


@pytest.mark.parametrize("case", _whatwg_cases())
def test_whatwg_urltestdata(case: dict[str, Any]) -> None:
    base = case.get("base")
    try:
        href: str | None = whatwg_href(case["input"], base)
    except URLError:
        href = None
    assert href == (None if case.get("failure") else case["href"])
    # the crawler's paths over the same input
    if base is None:
        if href is not None and href.startswith(("http:", "https:")):
            assert _canon(case["input"]) == _canon(href)
        else:
            with pytest.raises(URLError):
                canonicalize(case["input"])
    if base is None or not base.lower().startswith(("http:", "https:")):
        return
    resolved = LinkResolver(base).resolve(case["input"])
    if not case["input"].strip():
        assert resolved is None  # an empty href is no link
    elif href is None or not href.startswith(("http:", "https:")):
        assert resolved is None
    else:
        assert resolved == _canon(href)
        if resolved is not None:
            assert canonicalize(resolved) == resolved


# ------------------------------------------------------------------ canonicalisation vectors


class KnownDifference(AssertionError):
    """A vector that differs from ours in exactly its group's documented way."""


def _split(url: str) -> tuple[str, str]:
    base, _, query = url.partition("?")
    return base, query


def _query_items(query: str) -> list[str]:
    return sorted(p.removesuffix("=") for p in query.split("&") if p and not p.startswith("="))


def _unquote_fully(text: str) -> str:
    for _ in range(10):
        decoded = unquote(text, errors="surrogateescape")
        if decoded == text:
            break
        text = decoded
    return text


_USERINFO = re.compile(r"^(https?://)[^/@]*@")


def _no_userinfo(url: str) -> str:
    return _USERINFO.sub(r"\1", url)


def _path_slashes(url: str) -> str:
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    path, q, query = path.partition("?")
    return f"{scheme}://{host}" + re.sub(r"/+", "/", slash + path) + q + query


@dataclass(frozen=True)
class Kind:
    """A documented way our canonical form differs from another canonicaliser's."""

    reason: str
    same: Callable[[str, str, str | None], bool]  # (input, their canonical, ours) -> is it this


KINDS: dict[str, Kind] = {
    "query-order": Kind(
        "the query is kept as sent: parameter order, empty parameters and '&' are meaningful "
        "to servers (they sort and prune it)",
        lambda i, e, o: (
            o is not None
            and _split(o)[0] == _split(e)[0]
            and _query_items(_split(o)[1]) == _query_items(_split(e)[1])
        ),
    ),
    "userinfo": Kind(
        "credentials in the URL are kept: they can change what the server answers",
        lambda i, e, o: o is not None and _no_userinfo(o) == e,
    ),
    "repeated-slashes": Kind(
        "repeated slashes in the path are kept: /a//b and /a/b can be different resources",
        lambda i, e, o: o is not None and _path_slashes(o) == _path_slashes(e),
    ),
    "percent-encoding": Kind(
        "percent-encoding is normalised once and only for unreserved characters (RFC 3986 "
        "6.2.2.2); reserved characters stay escaped, and characters WHATWG leaves raw (a '%' "
        "that starts no escape, ^ ` | [ ] in a query) are sent raw, as browsers send them",
        lambda i, e, o: o is not None and _unquote_fully(o) == _unquote_fully(e),
    ),
    "dot-host": Kind(
        "a host of only dots ('%2e', '..') is no host for us (URLError); urlcanon follows an "
        "older WHATWG draft that read it as IPv4 0.0.0.0",
        lambda i, e, o: o is None and "0.0.0.0" in e and "%2e" in i.lower(),
    ),
    "not-absolute": Kind(
        "an input without a scheme is not an absolute URL (URLError): seeds must be absolute "
        "and links are resolved against their page",
        lambda i, e, o: o is None and re.match(r"^\s*[A-Za-z][A-Za-z0-9+.-]*:", i) is None,
    ),
    "raw-bytes": Kind(
        "the vector feeds bytes that are not UTF-8; a Python str URL carries characters, so the "
        "byte itself cannot be given",
        lambda i, e, o: o is not None and any("\x80" <= c <= "\xff" for c in i),
    ),
}


@dataclass(frozen=True)
class Vector:
    suite: str
    input: str
    expected: str | None  # None: the other canonicaliser rejects it too


def _fix_mojibake(text: str) -> str:
    """urlcanon's JSON holds byte strings as Latin-1 text: give back the UTF-8 they encode."""
    if text.isascii() or any(ord(c) > 0xFF for c in text):
        return text
    try:
        return text.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        return text


def _vectors() -> Iterator[Vector]:
    for inp, exp in _load_json("urlcanon/semantic_precise.json").items():
        yield Vector("semantic_precise", _fix_mojibake(inp), _fix_mojibake(exp))
    for inp in _load_json("urlcanon/idempotence.json"):
        yield Vector("idempotence", inp, None)  # checked by idempotence below
    for path, exp in _load_json("urlcanon/path_dots.json")["special"].items():
        yield Vector("path_dots", f"http://h{path}", f"http://h{exp}")
    for host, exp in _load_json("urlcanon/funky_ipv4.json").items():
        yield Vector("funky_ipv4", f"http://{host}/", f"http://{exp or host}/")
    cc = CONFORMANCE / "crawler-commons"
    for row in _csv_rows(cc / "weirdToNormalizedUrls.csv"):
        yield Vector("cc_weird", row[0], row[1])
    for row in _csv_rows(cc / "url-resolve.csv"):
        yield Vector("cc_resolve", f"{row[1]}\x00{row[0]}", row[2])
    for row in _csv_rows(cc / "invalidUrls.csv"):
        yield Vector("cc_invalid", row[0], None)


def _csv_rows(path: Path) -> Iterator[list[str]]:
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.reader(f, skipinitialspace=True):
            if row and not row[0].startswith("#"):
                yield row


def _ours(v: Vector) -> str | None:
    if v.suite == "cc_resolve":
        base, _, href = v.input.partition("\x00")
        if not base:
            return _canon(href)
        try:
            return LinkResolver(base).resolve(href)
        except URLError:
            return None
    return _canon(v.input)


def _is_http(url: str) -> bool:
    return url.lower().startswith(("http://", "https://"))


def _classify(v: Vector) -> str:
    """'agree', 'rejected' (their result is not http(s): we must raise URLError), or a KINDS
    key, or 'unexplained'."""
    ours = _ours(v)
    if v.suite == "idempotence":
        return "agree" if ours is None or _canon(ours) == ours else "unexplained"
    if v.expected is None:
        return "agree" if ours is None else "unexplained"
    if not _is_http(v.expected):
        return "rejected" if ours is None else "unexplained"
    theirs = _canon(v.expected)
    if ours == theirs:
        return "agree"
    for key, kind in KINDS.items():
        if kind.same(v.input, v.expected, ours):
            return key
    return "unexplained"


def _all_vectors() -> list[Vector]:
    return list(_vectors())


VECTORS = _all_vectors()
CLASSES = {v: _classify(v) for v in VECTORS}

#: how many vectors differ in each documented way (a change here is a behaviour change)
EXPECTED_GROUPS = {
    ("cc_weird", "not-absolute"): 1,
    ("cc_weird", "percent-encoding"): 9,
    ("cc_weird", "query-order"): 11,
    ("cc_weird", "repeated-slashes"): 6,
    ("semantic_precise", "dot-host"): 12,
    ("semantic_precise", "not-absolute"): 2,
    ("semantic_precise", "percent-encoding"): 25,
    ("semantic_precise", "query-order"): 3,
    ("semantic_precise", "raw-bytes"): 1,
    ("semantic_precise", "repeated-slashes"): 3,
    ("semantic_precise", "userinfo"): 15,
}


def _ids(v: Vector) -> str:
    return f"{v.suite}:{v.input.replace(chr(0), ' <- ')[:60]!r}"


@pytest.mark.parametrize(
    "vector", [v for v in VECTORS if CLASSES[v] in ("agree", "rejected", "unexplained")], ids=_ids
)
def test_canonicalisation_vector(vector: Vector) -> None:
    ours = _ours(vector)
    if vector.suite == "idempotence":
        assert ours is None or canonicalize(ours) == ours
    elif vector.expected is None or not _is_http(vector.expected):
        assert ours is None, f"{vector.expected!r} is not an http(s) URL, we gave {ours!r}"
    else:
        assert ours == _canon(vector.expected), f"expected {vector.expected!r}"


def _groups() -> list[Any]:
    groups: dict[tuple[str, str], list[Vector]] = {}
    for v, cls in CLASSES.items():
        if cls in KINDS:
            groups.setdefault((v.suite, cls), []).append(v)
    return [
        pytest.param(
            key,
            members,
            id=f"{key[0]}-{key[1]}",
            marks=pytest.mark.xfail(
                raises=KnownDifference, strict=True, reason=KINDS[key[1]].reason
            ),
        )
        for key, members in sorted(groups.items())
    ]


@pytest.mark.parametrize(("group", "members"), _groups())
def test_known_differences(group: tuple[str, str], members: list[Vector]) -> None:
    assert len(members) == EXPECTED_GROUPS.get(group), (group, len(members))
    kind = KINDS[group[1]]
    for v in members:
        ours = _ours(v)
        assert v.expected is not None
        assert kind.same(v.input, v.expected, ours), (v, ours)
    raise KnownDifference(f"{len(members)} vectors: {kind.reason}")


def test_every_known_group_is_present() -> None:
    present = {(v.suite, c) for v, c in CLASSES.items() if c in KINDS}
    assert present == set(EXPECTED_GROUPS)


def test_summary_counts() -> None:
    """Enough vectors are read: nothing silently skipped."""
    suites: dict[str, int] = {}
    for v in VECTORS:
        suites[v.suite] = suites.get(v.suite, 0) + 1
    assert suites["semantic_precise"] == 280
    assert suites["idempotence"] == 43
    assert suites["path_dots"] == 376
    assert suites["funky_ipv4"] == 47
    assert suites["cc_weird"] >= 100
    assert suites["cc_resolve"] >= 20
    assert suites["cc_invalid"] == 2

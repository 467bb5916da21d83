"""The compiled SimHash (parse/_simhash.pyx) against its reference (`simhash_text_reference`,
numpy): the same value, or None, for every text; and built where `pip install -e .` (as
scripts/setup.sh runs it) builds it, so that a silent fallback to the reference fails here."""

from __future__ import annotations

import random
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gossamer.parse import simhash
from gossamer.parse.simhash import MAX_TEXT, MIN_TEXT, MIN_WORDS, SAMPLE, simhash_text_reference

# words of 1-, 2- and 4-byte code points (CPython's three kinds of str, read in place), of
# 1 to 4 UTF-8 bytes, and lone surrogates (encoded with surrogatepass)
_ALPHABETS = (
    ("a", "bb", "ccc", "word", "xy", "z" * 9),
    ("é", "Ø", "ab", "ç", "ÿ", "q"),
    ("—", "日本", "ab", "Ø", "\udc80", "\ud800x"),
    ("😀", "a", "𝕏y", "日", "é", "\U0010ffff"),
)


def _compiled() -> object:
    from gossamer.parse import _simhash

    return _simhash


def test_the_compiled_fingerprint_is_built_and_used() -> None:
    """Fails in a checkout whose `pip install -e .` did not build parse/_simhash.pyx (or built
    it before the .pyx last changed): run it again (./scripts/setup.sh)."""
    compiled = _compiled()  # ImportError: not built
    assert simhash.COMPILED
    assert simhash.simhash_text is compiled.simhash_text  # type: ignore[attr-defined]
    for name in ("MIN_TEXT", "MIN_WORDS", "MAX_TEXT", "SAMPLE"):
        assert getattr(compiled, name) == getattr(simhash, name)
    built = Path(compiled.__file__)  # type: ignore[attr-defined]
    source = built.with_name("_simhash.pyx")
    if source.exists():  # an editable install: the module is built from this .pyx
        assert built.stat().st_mtime >= source.stat().st_mtime, "stale: pip install -e ."


def test_the_compiled_fingerprint_imports_no_numpy() -> None:
    code = (
        "import sys\nfrom gossamer.parse.simhash import simhash_text\n"
        "assert simhash_text('one two three four five six seven eight nine ten ' * 9)\n"
        "print('numpy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.split() == ["False"]


def _same(text: str) -> int | None:
    got = _compiled().simhash_text(text)  # type: ignore[attr-defined]
    assert got == simhash_text_reference(text), repr(text[:200])
    return got  # type: ignore[no-any-return]


def test_random_word_streams() -> None:
    rng = random.Random(1)
    found = 0
    for _ in range(1500):
        alphabet = rng.choice(_ALPHABETS)
        vocabulary = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
            for _ in range(rng.randint(1, 30))
        ]
        # below MIN_WORDS, at it, around SAMPLE shingles, past the candidate buffer (4 SAMPLE)
        words = rng.choice((0, 1, 7, 8, 9, 10, 50, 159, 160, 161, 162, 641, 700, 3000))
        separator = rng.choice((" ", " ", "  ", "\n", " \t", "   "))
        text = separator.join(rng.choice(vocabulary) for _ in range(words))
        if rng.random() < 0.2:
            text = " " + text
        if rng.random() < 0.2:
            text += " " * rng.randint(1, 12)
        found += _same(text) is not None
    assert found > 700  # most have a fingerprint


def test_thresholds_and_degenerate_texts() -> None:
    for size in range(MIN_TEXT - 9, MIN_TEXT + 17):  # bytes, around MIN_TEXT
        for text in (
            "a" * size,  # no space
            " " * size,  # nothing but spaces: every shingle the same
            ("ab " * size)[:size],
            ("é " * size)[:size],  # 3 bytes a word
            ("abcdefg " * size)[:size],
            ("日本 " * size)[:size],
            (" 😀" * size)[:size],
        ):
            _same(text)
    # a window a space with 8 bytes after it; MIN_WORDS windows are too few
    assert _same("abcdefghij" + " wordxyzw" * (MIN_WORDS + 1)) is not None
    assert _same("abcdefghij" + " wordxyzw" * MIN_WORDS + " wordxyz") is None
    assert _same("abcdefghij" + " wordxyzw" * MIN_WORDS + "12345678") is None
    for repeat in (SAMPLE, 4 * SAMPLE + 1, 5000):  # many equal shingles
        assert _same(" ".join(["same"] * repeat)) is not None
        assert _same(" ".join(["same", "other"] * repeat)) is not None


def test_texts_past_max_text_are_cut_in_bytes() -> None:
    for unit in ("a", "é", "—", "😀"):  # the cut at MAX_TEXT bytes in every kind of str
        base = " ".join(f"w{k}{unit}" for k in range(MAX_TEXT // 4))
        assert len(base.encode("utf-8")) > MAX_TEXT
        for cut in range(0, 10):
            _same(base[: len(base) - cut])
        _same(base[: MAX_TEXT // 2])


def test_the_near_duplicate_tests_texts() -> None:
    # tests/test_neardup.py's texts, and pages of the benchmark web
    from selectolax.lexbor import LexborHTMLParser

    from gossamer.testweb import WebSpec, model_for
    from gossamer.testweb._content import render_page

    vocabulary = [
        "river", "mountain", "garden", "kitchen", "window", "morning", "evening", "summer",
        "winter", "letter", *(f"w{k}" for k in range(40)),
    ]  # fmt: skip
    for seed in range(1, 12):
        rng = random.Random(seed)
        body = " ".join(rng.choice(vocabulary) for _ in range(1500))
        for day in (1, 14, 28):
            _same(f"Events on 2026-07-{day:02d} {body}")
    model = model_for(WebSpec(seed=1, hosts=20, pages_mean=10.0))
    for k in range(40):
        host = k % len(model.hosts)
        page = k // len(model.hosts) % model.hosts[host].pages
        html = render_page(model, model._plan(host, page)).decode(model.hosts[host].charset)
        body_node = LexborHTMLParser(html).body
        assert body_node is not None
        assert _same(body_node.text(separator=" ", strip=True)) is not None


_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(st.one_of(st.characters(), _SURROGATES), max_size=12), max_size=120),
    st.sampled_from([" ", "  ", "\t "]),
)
def test_any_text(words: list[str], separator: str) -> None:
    _same(separator.join(words))


# --- a <body>'s fingerprint read from lexbor's nodes (simhash_node) ---------------------------


def _node_same(html: str | bytes) -> int | None:
    """The compiled `simhash_node` of the document's <body> against its definition,
    `simhash_node_text` (selectolax's text, then the fingerprint); the text itself too, where
    the walk reads it (valid UTF-8)."""
    from selectolax.lexbor import LexborHTMLParser

    body = LexborHTMLParser(html).body
    if body is None:
        return None
    want = body.text(separator=" ", strip=True)
    read = _compiled().node_text_utf8(body)  # type: ignore[attr-defined]
    if read is not None:
        assert read == want.encode("utf-8")[:MAX_TEXT], repr(want[:200])
    got = _compiled().simhash_node(body)  # type: ignore[attr-defined]
    assert got == simhash.simhash_node_text(body) == simhash_text_reference(want)
    return got  # type: ignore[no-any-return]


def test_the_node_walk_is_checked_and_used() -> None:
    """parse_html fingerprints with the compiled walk: the lexbor that selectolax has is the
    one whose node layout the walk reads (else this fails: the walk was silently left out)."""
    assert simhash.simhash_node is _compiled().simhash_node  # type: ignore[attr-defined]


def test_pages_of_the_simulated_web() -> None:
    from gossamer.testweb import WebSpec, model_for
    from gossamer.testweb._content import render_page

    model = model_for(WebSpec(seed=3, hosts=20, pages_mean=10.0))
    found = 0
    for k in range(60):
        host = k % len(model.hosts)
        page = k // len(model.hosts) % model.hosts[host].pages
        raw = render_page(model, model._plan(host, page))
        found += _node_same(raw) is not None  # the bytes, as parse_html gives UTF-8
        _node_same(raw.decode(model.hosts[host].charset))
    assert found > 50


def test_what_selectolax_strips_joins_and_leaves_out() -> None:
    words = " ".join(f"word{k}" for k in range(40))
    for html in (
        # Unicode spaces at both ends of a node are stripped, inside it kept
        f"<body><p>\u3000\u2028 {words}\u00a0\u205f</p><p>\x85x\u200ay\u202f</p></body>",
        # nodes of nothing but spaces still take a separator: two spaces in a row
        f"<body><p>{words}</p> \n <p> </p><b></b><i>\t</i>{words}</body>",
        # comments are no text; scripts, styles, <noscript> and SVG's text are
        f"<body><!-- {words} --><script>var a = 1;</script><style>p {{}}</style>{words}"
        f"<noscript>{words}</noscript><svg><text>{words}</text></svg></body>",
        # a <template>'s content is not among the body's nodes
        f"<body><template>{words}</template>{words} and more words here</body>",
        # deep nesting: the walk climbs back up several levels at once
        "<body>" + "<div>" * 40 + words + "</div>" * 40 + words + "<p>end</p></body>",
        # characters, entities, NUL
        f"<body>caf&eacute; &amp; &#x1F600; \x00 日本語 — Ø {words}</body>",
        # no body text at all, and very little
        "<html><head><title>t</title></head></html>",
        "<body>one two</body>",
    ):
        _node_same(html)
        _node_same(html.encode("utf-8"))


def test_bytes_that_are_not_utf8_fall_back_to_selectolax_text() -> None:
    """lexbor keeps bytes it cannot decode; selectolax's text puts U+FFFD for them (the walk
    does not read such a page: `node_text_utf8` is None, the fingerprint the same)."""
    from selectolax.lexbor import LexborHTMLParser

    words = b" ".join(b"w%d" % k for k in range(40))
    for bad in (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82",
                b"caf\xe9"):  # fmt: skip
        html = b"<body><p>" + words + b" " + bad + b" " + words + b"</p></body>"
        body = LexborHTMLParser(html).body
        assert body is not None
        assert _compiled().node_text_utf8(body) is None  # type: ignore[attr-defined]
        assert _node_same(html) is not None


def test_bodies_past_max_text_are_cut_in_bytes() -> None:
    for unit in ("a", "é", "日本", "😀"):
        cell = f"<p> w{unit} x{unit} </p>"
        html = "<body>" + cell * (MAX_TEXT // 5) + "</body>"
        for cut in range(0, 4):  # the cut moves across the code points and the separators
            _node_same(html[: len(html) - 7 - cut * len(unit)])


_HTML_PIECES = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
    st.sampled_from(["<p>", "</p>", "<b>", "</b>", "<div>", "</div>", "<!-- c -->", "<br>",
                     "<script>", "</script>", "&nbsp;", "&amp;", " ", "\u00a0", "\u3000",
                     "<svg>", "</svg>", "<table>", "<td>", "<template>", "</template>"]),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_HTML_PIECES, max_size=80), st.integers(0, 60))
def test_any_markup(pieces: list[str], repeat: int) -> None:
    filler = " ".join(f"f{k}" for k in range(repeat))
    _node_same("<body>" + filler + "".join(pieces) + filler + "</body>")


def test_what_is_not_a_node_is_refused() -> None:
    """An object without selectolax's `mem_id` raises before any buffer is used (and one
    whose node is gone, `mem_id` 0, a ValueError)."""
    for f in (_compiled().node_text_utf8, _compiled().simhash_node):  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            f("<body>text</body>")
        with pytest.raises(ValueError, match="not a parsed node"):
            f(types.SimpleNamespace(mem_id=0))

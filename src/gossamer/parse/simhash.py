"""A page's content fingerprint for near-duplicate detection: Charikar's SimHash (64 bits) of
the shingles of its text, markup ignored, as Manku, Jain and Das Sarma (WWW 2007) use it for a
web crawl: two pages whose fingerprints differ in at most 3 bits are near-duplicates.

The text is the `<body>`'s text nodes, each stripped, joined by spaces (parse_html). Each word
(after a space) has a window, the 8 bytes of UTF-8 from that space; a shingle is a word's
window and the next word's, two to three words as word 3-shingles are, so a changed word (a
date) changes about two shingles. A shingle's hash is a multiply and an add. The features are
a bottom-k sample: the SAMPLE shingles of smallest hash (`np.partition`), every shingle of a
shorter text — content-defined, so two texts that share most of their words share most of
their sample, whatever their length, and the cost past the hashing does not grow with the
page. The sample is mixed again (xor-shift, multiply, xor-shift: its top bits are all 0) and
each bit counted as one byte lane of a uint64 sum (SAMPLE < 256: no carry), the majority
taken in one big-int add. The fingerprint is a pure function of the text: the same in every
process and on every machine (no salted `hash()`, the bytes read as little-endian).

`simhash_text` is the compiled one (parse/_simhash.pyx, built by `pip install -e .`: a few
µs a page, no numpy) when it is importable, else `simhash_text_reference`: the definition,
in numpy over a zero-copy view of the bytes (a dozen calls; a Python loop over a page's
~2,000 words cost more than its whole parse), that the compiled one is tested against
(tests/test_neardup.py: the same value for every text). Why no library, why compiled:
docs/crawler.md, "Near-duplicates"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = [
    "COMPILED",
    "MIN_TEXT",
    "MIN_WORDS",
    "SIMHASH_BITS",
    "hamming",
    "simhash_node",
    "simhash_node_text",
    "simhash_text",
    "simhash_text_reference",
]

SIMHASH_BITS: Final = 64
#: a text of fewer bytes has no fingerprint (None): a few shingles give fingerprints that are
#: near one another by chance (a page of a title and three links)
MIN_TEXT: Final = 64
MIN_WORDS: Final = 8
#: text bytes read at most: the fingerprint of a longer page is its first MAX_TEXT bytes'
MAX_TEXT: Final = 1 << 20
#: the features: the SAMPLE shingles of smallest hash (bottom-k), every shingle of a shorter
#: text; at most 255, so a bit's count fits in a byte
SAMPLE: Final = 160

_K1: Final = 0xBF58476D1CE4E5B9
_K2: Final = 0x94D049BB133111EB
_BYTES: Final = (1 << 512) // 255  # 64 bytes of 1
_HIGH: Final = _BYTES << 7  # 64 bytes of 0x80
_DIGITS: Final = bytes.maketrans(b"\x00\x80", b"01")


def simhash_text_reference(text: str) -> int | None:
    """The 64-bit SimHash of `text`'s shingles (see the module docstring), or None for a text
    of fewer than MIN_TEXT bytes or MIN_WORDS words: the definition, in numpy (imported by
    the first call), that the compiled `simhash_text` computes the same value as."""
    import numpy as np

    k1, k2, s32 = np.uint64(_K1), np.uint64(_K2), np.uint64(32)
    raw = text.encode("utf-8", "surrogatepass")[:MAX_TEXT]
    n = len(raw) - 8
    if n < MIN_TEXT - 8:
        return None
    # every 8-byte window as one uint64, without a copy (unaligned: numpy reads them whole)
    # (little-endian whatever the machine: the same fingerprint everywhere)
    win = np.ndarray((n + 1,), dtype=np.dtype("<u8"), buffer=raw, strides=(1,))
    # a word's window: the 8 bytes from the space before it
    x = win[(np.frombuffer(raw, dtype=np.uint8, count=n) == 32).nonzero()[0]]
    if len(x) <= MIN_WORDS:
        return None
    # a shingle: a word's window and the next word's, two to three words (uint64 arithmetic
    # wraps around silently: mod 2**64)
    x = x[:-1] * k1 + x[1:]
    if len(x) > SAMPLE:  # bottom-k, by the top bits of the product, the best mixed
        x = np.partition(x, SAMPLE - 1)[:SAMPLE]
    x ^= x >> s32  # then mixed again (the sample's top bits are all 0)
    x *= k2
    x ^= x >> s32
    # each bit's count in a byte of its own: the 64 bits of each hash as 64 bytes (bit i of
    # the hash is byte i), added as 8 uint64 lanes of 8 bytes (at most 255 each: no carry)
    counts = np.unpackbits(x.view(np.uint8), bitorder="little").view(np.uint64)
    total = int.from_bytes(counts.reshape(-1, 8).sum(axis=0).tobytes(), "little")
    # bit i is 1 when more than half the hashes have it: byte i + 127 - len // 2 >= 128
    high = (total + (127 - len(x) // 2) * _BYTES) & _HIGH
    return int(high.to_bytes(64, "little").translate(_DIGITS)[::-1], 2)


def hamming(a: int, b: int) -> int:
    """The number of bits in which two fingerprints differ."""
    return (a ^ b).bit_count()


simhash_text: Callable[[str], int | None]
try:
    from ._simhash import simhash_text
except ImportError:  # not built (no C compiler at install): tests/test_neardup.py fails
    simhash_text = simhash_text_reference
#: whether `simhash_text` is the compiled one
COMPILED: Final = simhash_text is not simhash_text_reference

#: a page whose text has each case of selectolax's `text(separator=" ", strip=True)`: nested
#: and adjacent text nodes, a comment, Unicode spaces to strip, a node all spaces, a script
_LAYOUT_SAMPLE: Final = (
    "<body> <p>\u3000one <b>two\u00a0</b>three</p><!-- no --> \n<p>f\u00f4ur</p>"
    "<script>five()</script><svg><text>six</text></svg>\u2028</body>"
)


def simhash_node_text(node: Any) -> int | None:
    """The fingerprint of a selectolax node's text: `simhash_text(node.text(separator=" ",
    strip=True))`, the definition `simhash_node` computes the same value as."""
    return simhash_text(node.text(separator=" ", strip=True))


def _node_walk() -> Callable[[Any], int | None] | None:
    """The compiled fingerprint of a node (parse/_simhash.pyx: the text's UTF-8 read from
    lexbor's nodes, no str built) where it was built for the lexbor that selectolax has (its
    node layout: `LAYOUT`) and reads this module's sample as selectolax does, else None."""
    try:
        from selectolax import lexbor

        from ._simhash import LAYOUT, node_text_utf8, simhash_node
    except ImportError:
        return None
    if getattr(lexbor, "LEXBOR_VERSION_MAJOR", None) != LAYOUT:
        return None
    body = lexbor.LexborHTMLParser(_LAYOUT_SAMPLE).body
    if body is None or node_text_utf8(body) != body.text(separator=" ", strip=True).encode():
        return None
    return simhash_node


#: `simhash_node_text` of a selectolax `<body>` (parse_html): compiled where it can be
simhash_node: Callable[[Any], int | None] = _node_walk() or simhash_node_text

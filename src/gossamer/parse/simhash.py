"""A page's content fingerprint for near-duplicate detection: Charikar's SimHash (64 bits) of
the shingles of its text, markup ignored, as Manku, Jain and Das Sarma (WWW 2007) use it for a
web crawl: two pages whose fingerprints differ in at most 3 bits are near-duplicates.

The text is the `<body>`'s text nodes, each stripped, joined by spaces (parse_html). A shingle
starts at each word (after a space) and is the next 16 bytes of UTF-8: two to three words, as
word 3-shingles are, so a changed word (a date) changes about three shingles. Each is hashed
by a multiply and splitmix64's finaliser; past SAMPLE_FROM shingles one in SAMPLE is kept,
chosen by its hash (two texts keep the same shingles of what they share: a content-defined
sample). The per-page path is vectorised with numpy on a zero-copy view of the bytes: a page
of the benchmark web has ~2,000 words, and a Python loop hashing its word shingles cost more
than the page's whole parse. The fingerprint is a pure function of the text: the same in
every process and on every machine (no salted `hash()`). Why no library: docs/crawler.md,
"Near-duplicates"."""

from __future__ import annotations

from typing import Final

import numpy as np

__all__ = ["MIN_TEXT", "MIN_WORDS", "SIMHASH_BITS", "hamming", "simhash_text"]

SIMHASH_BITS: Final = 64
#: a text of fewer bytes has no fingerprint (None): a few shingles give fingerprints that are
#: near one another by chance (a page of a title and three links)
MIN_TEXT: Final = 64
MIN_WORDS: Final = 8
#: text bytes read at most: the fingerprint of a longer page is its first MAX_TEXT bytes'
MAX_TEXT: Final = 1 << 20
#: one window in SAMPLE is a feature (but every window of a text shorter than SAMPLE_FROM)
SAMPLE: Final = 4
SAMPLE_FROM: Final = 1024

_K1: Final = np.uint64(0xBF58476D1CE4E5B9)
_K2: Final = np.uint64(0x94D049BB133111EB)
_S31: Final = np.uint64(31)
_S29: Final = np.uint64(29)
_S32: Final = np.uint64(32)
_SPACE: Final = np.uint8(32)
_SAMPLE_BELOW: Final = np.uint64((1 << 64) // SAMPLE)


def simhash_text(text: str) -> int | None:
    """The 64-bit SimHash of `text`'s shingles (see the module docstring), or None for a text
    of fewer than MIN_TEXT bytes."""
    raw = text.encode("utf-8", "surrogatepass")[:MAX_TEXT]
    n = len(raw) - 16
    if n < MIN_TEXT - 16:
        return None
    # every 8-byte window as one uint64, without a copy (unaligned: numpy reads them whole)
    win = np.ndarray((n + 9,), dtype=np.uint64, buffer=raw, strides=(1,))
    # a shingle a word: the 16 bytes from the word's first, two to three words
    starts = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8, count=n) == _SPACE) + 1
    if len(starts) < MIN_WORDS:
        return None
    # (uint64 arrays wrap around silently: the arithmetic is mod 2**64)
    x = win[starts] * _K1
    x += win[starts + 8]
    if len(x) > SAMPLE_FROM:  # the sample: by the top bits of the product, the best mixed
        x = x[x < _SAMPLE_BELOW]
    x ^= x >> _S31  # then splitmix64's finaliser
    x *= _K2
    x ^= x >> _S29
    x *= _K1
    x ^= x >> _S32
    counts = np.unpackbits(x.view(np.uint8)).reshape(-1, SIMHASH_BITS).sum(axis=0)
    return int.from_bytes(np.packbits(counts * 2 > len(x)).tobytes(), "big")


def hamming(a: int, b: int) -> int:
    """The number of bits in which two fingerprints differ."""
    return (a ^ b).bit_count()

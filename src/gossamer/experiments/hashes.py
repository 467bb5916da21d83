"""The seeds' character-sum hashes, exactly as their papers state them.

KSpider sums a string's characters (each a byte of its UTF-8 encoding, as an unsigned C
`char`): a URL's for its node (equation 1), its host's for its phase (2) and bucket column
(3). The hash-URL paper sums a transfer value per character of the host (its Table 1's a→1,
b→2, … expanded the obvious way: a–z, 0–9, '-', '.', ':'), of the host's site (`site_of`, the
registrable domain). How each reading follows the papers: docs/experiments.md, sections 1
and 2."""

from __future__ import annotations

from typing import Final

from ..urls import registrable_domain

#: KSpider's bucket columns (equation 3): "1999 in our current implementation".
KSPIDER_COLUMNS: Final = 1999

TRANSFER: Final[dict[str, int]] = {
    **{chr(ord("a") + i): 1 + i for i in range(26)},
    **{chr(ord("0") + i): 27 + i for i in range(10)},
    "-": 37,
    ".": 38,
    ":": 39,
}


def char_sum(text: str) -> int:
    """Σ of the characters of `text`: its UTF-8 bytes as unsigned values."""
    return sum(text.encode("utf-8", "surrogatepass"))


def url_node(url: str, nodes: int) -> int:
    """KSpider equation (1): the node (0..nodes-1) that owns `url`."""
    return char_sum(url) % nodes


def host_phase(host: str, phases: int) -> int:
    """KSpider equation (2): the phase (0..phases-1) of every URL of `host`."""
    return char_sum(host) % phases


def bucket_column(host: str, columns: int = KSPIDER_COLUMNS) -> int:
    """KSpider equation (3): the scheduler bucket column of `host`."""
    return char_sum(host) % columns


def transfer_sum(host: str) -> int:
    """Hash-URL paper: Σ Transfer(c) over the characters of a lower-case host name.
    Raises ValueError for a character outside the (expanded) Table 1."""
    try:
        return sum(TRANSFER[c] for c in host)
    except KeyError as exc:
        raise ValueError(f"{host!r}: character {exc.args[0]!r} has no transfer value") from None


def site_of(host: str) -> str:
    """Hash-URL paper's `host()`: the site (registrable domain) a host name belongs to."""
    return registrable_domain(host)


def crawler_key(host: str, crawlers: int) -> int:
    """Hash-URL paper: Key = Σ Transfer(host) mod n, the crawler ID (0..n-1) of the host."""
    return transfer_sum(host) % crawlers

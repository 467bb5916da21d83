"""A robots.txt that cannot be fetched holds its host's URLs back (RFC 9309 §2.3.1.4:
disallow all while unreachable), and they are counted under the real cause —
`robots/unreachable/connect`, `…/dns`, `…/blocked-address` — not as `robots/disallowed`,
which is what the rules of a robots.txt that was read say."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from gossamer.config import load_settings
from gossamer.exitcodes import Exit
from gossamer.runner.run import run_crawl


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _crawl(out: Path, seeds: list[str], **flags: object) -> dict[str, object]:
    settings = load_settings(
        {"seeds": seeds, "output": out, "delay": 0.0, "connect_timeout": 2.0, **flags}
    )
    assert run_crawl(settings) == Exit.NOTHING_FETCHED
    stats: dict[str, object] = json.loads((out / "stats.json").read_text())
    return stats


def test_urls_held_back_by_an_unreachable_robots_txt_are_counted_under_its_cause(
    tmp_path: Path,
) -> None:
    refused = f"http://127.0.0.1:{_closed_port()}/"
    nowhere = "http://nowhere.invalid/"  # RFC 6761: never resolves
    # one URL a lease and two workers: the later leases of a host read the answer that the
    # first stored (robots.sqlite), its cause included
    stats = _crawl(
        tmp_path / "c1",
        [refused + "a", refused + "b", refused + "c", nowhere + "x", nowhere + "y"],
        allow_private=True,
        workers=2,
        per_host=1,
        scope="all",
    )
    assert stats["dropped"] == {"robots/unreachable/connect": 3, "robots/unreachable/dns": 2}
    errors = stats["errors"]
    assert isinstance(errors, dict)
    assert errors["robots/fetch/error/connect"] >= 1 and errors["robots/fetch/error/dns"] >= 1
    # a loopback address without --allow-private: refused before any connection
    stats = _crawl(tmp_path / "c2", [refused + "a", refused + "b"])
    assert stats["dropped"] == {"robots/unreachable/blocked-address": 2}

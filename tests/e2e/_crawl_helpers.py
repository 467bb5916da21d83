"""What the end-to-end crawl tests share: settings for crawling a simulated web on loopback."""

from __future__ import annotations

from pathlib import Path

from gossamer.config import CrawlSettings, load_settings

USER_AGENT = "gossamer-test/0.1"


def crawl_settings(
    web_dir: Path, out: Path, seeds: str | list[str], **extra: object
) -> CrawlSettings:
    """Settings for a fast crawl of the simulated web whose resolve file is in `web_dir`:
    scope all, no delay, short time-outs; `extra` overrides any of them."""
    flags: dict[str, object] = {
        "seeds": [seeds] if isinstance(seeds, str) else seeds,
        "output": out,
        "scope": "all",
        "resolve_file": web_dir / "resolve.txt",
        "allow_private": True,
        "delay": 0.0,
        "user_agent": USER_AGENT,
        "concurrency": 16,
        "connect_timeout": 2.0,
        "first_byte_timeout": 3.0,
        "total_timeout": 5.0,
    }
    flags.update(extra)
    return load_settings(flags)

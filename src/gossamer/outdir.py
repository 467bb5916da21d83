"""The rule for a directory a command writes new outputs into (`crawl -o`, `demo -o`, a cluster
worker's `DIR/<worker id>/`): it must not exist yet, or be an empty directory.

A directory that holds other files is refused before anything is written, so a command never
overwrites or mixes with files it did not write. Also the rule for the directory a re-crawl
reads (`crawl --recrawl OLD_DIR`, `check_recrawl_dir`), which the settings check (config.py
imports no engine). Imports nothing of gossamer but crawldir.py: the simulated web's commands
use it too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .crawldir import CRAWL_LOG, MANIFEST, STATS, CrawlDir


def new_directory_problem(
    out: Path,
    *,
    what: str | None = None,
    holds: str = "",
    fix: str = "give a new or empty directory",
) -> str | None:
    """Why `out` cannot take a command's new outputs (None when it can): the error line's
    text, naming the directory (`what`, default `-o OUT`), what is in it (then `holds`,
    e.g. ", not a gossamer crawl") and what to do (`fix`)."""
    what = what or f"-o {out}"
    try:
        if not out.exists():
            return None
        if not out.is_dir():
            return f"{what}: exists and is not a directory; {fix}"
        entries = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        return f"{what}: cannot read it ({exc.strerror or exc}); {fix}"
    if not entries:
        return None
    more = len(entries) - 3
    shown = ", ".join(entries[:3]) + (f" and {more} more" if more > 0 else "")
    return f"{what}: the directory holds other files ({shown}){holds}; nothing was written: {fix}"


def check_recrawl_dir(old: Path, new: Path | None = None) -> str | None:
    """Why `old` cannot be re-crawled into `new` (None when it can): it must be a finished or
    stopped gossamer crawl directory (crawl.json, crawl.log.jsonl and stats.json present, no
    crawler running in it) and differ from `new`."""
    if not old.is_dir():
        return f"{old} is not a directory"
    crawl = CrawlDir(old)
    for name, path in ((MANIFEST, crawl.manifest), (CRAWL_LOG, crawl.crawl_log)):
        if not path.is_file():
            return f"{old} is not a gossamer crawl directory (no {name})"
    if not crawl.stats.is_file():
        return (
            f"{old} holds an unfinished crawl (no {STATS}): finish it with "
            f"`gossamer crawl --resume {old}` first"
        )
    if new is not None and _same_place(old, new):
        return "the new crawl directory (-o) must differ from the one re-crawled"
    if crawl.locked():
        return f"a crawler is running in {old}: wait for it to finish or stop it"
    return None


def old_settings(old: Path) -> dict[str, Any]:
    """The settings recorded in OLD_DIR's crawl.json, by flat name (empty when unreadable)."""
    try:
        stored = json.loads(CrawlDir(old).manifest.read_text())
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def old_seeds(old: Path) -> list[str]:
    """The seeds recorded in OLD_DIR's crawl.json (empty when unreadable)."""
    seeds = old_settings(old).get("seeds", [])
    return [s for s in seeds if isinstance(s, str)] if isinstance(seeds, list) else []


def _same_place(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False

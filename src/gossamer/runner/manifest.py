"""A crawl directory's crawl.json: its settings, written when the crawl is created (and when a
resume takes new run-time settings) and read by a resume and by each of a pool's workers.

`write_manifest` replaces the file atomically: a reader sees the old settings or the new ones,
never a part. `load_manifest` raises CrawlError (no crawl.json, or not a JSON object) or
SettingsError (settings that no longer validate), and never writes.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config import CrawlSettings, SettingsError
from ..crawldir import MANIFEST, CrawlDir, CrawlError

__all__ = ["load_manifest", "write_manifest"]


def load_manifest(out: Path) -> CrawlSettings:
    """The settings stored in a crawl directory (CrawlError / SettingsError when unusable)."""
    manifest = CrawlDir(out).manifest
    if not manifest.is_file():
        raise CrawlError(f"{out} is not a crawl directory (no {MANIFEST}) — cannot resume")
    try:
        stored = json.loads(manifest.read_text())
    except (OSError, ValueError) as exc:
        raise CrawlError(f"cannot read {manifest}: {exc}") from exc
    if not isinstance(stored, dict):
        raise CrawlError(f"cannot read {manifest}: not a JSON object")
    stored["output"] = str(out)
    try:
        return CrawlSettings(**stored)
    except Exception as exc:
        raise SettingsError(f"{manifest}: {exc}") from exc


def write_manifest(settings: CrawlSettings) -> None:
    """Write `settings` as the crawl's crawl.json, atomically (a reader sees the old file or
    the new one)."""
    manifest = CrawlDir(settings.output).manifest
    tmp = manifest.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps(settings.manifest(), indent=2) + "\n")
    tmp.replace(manifest)

"""A crawl directory's crawl.json: its settings, written when the crawl is created (and when a
resume takes new run-time settings) and read by a resume and by each of a pool's workers.

`write_manifest` replaces the file atomically: a reader sees the old settings or the new ones,
never a part. `load_manifest` raises CrawlError (no crawl.json, or not a JSON object) or
SettingsError (settings that no longer validate), and never writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..config import CrawlSettings, SettingsError
from ..crawldir import MANIFEST, CrawlDir, CrawlError

__all__ = ["PRIVATE_MODE", "load_manifest", "write_manifest"]

#: crawl.json's mode: its owner's alone (it may hold a proxy's password)
PRIVATE_MODE = 0o600


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
    if stored.get("workers") == 0:  # written before `auto`: 0 meant one per core
        stored["workers"] = None
    try:
        return CrawlSettings(**stored)
    except Exception as exc:
        raise SettingsError(f"{manifest}: {exc}") from exc


def write_manifest(settings: CrawlSettings, path: Path | None = None) -> None:
    """Write `settings` as the crawl's crawl.json (or `path`), atomically (a reader sees the
    old file or the new one), readable by its owner alone: it holds the settings a resume
    needs, secrets included (a proxy's password, an Authorization header)."""
    manifest = CrawlDir(settings.output).manifest if path is None else path
    tmp = manifest.with_name(manifest.name + ".tmp")
    # 0600 from its creation (an old .tmp of another mode is made 0600 too): the secrets are
    # never readable by others, not even for a moment
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(fd, PRIVATE_MODE)
        f.write(json.dumps(settings.manifest(), indent=2) + "\n")
    tmp.replace(manifest)

"""crawl.json: private to its owner (it may hold a proxy's password or an Authorization
header), replaced atomically, and an old one's `"workers": 0` read as `auto`."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gossamer.config import CrawlSettings
from gossamer.runner.manifest import PRIVATE_MODE, load_manifest, write_manifest

SECRET_PROXY = "http://crawler:pr0xy-s3cret@127.0.0.1:3128"


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    old = os.umask(0o022)  # files 0644 unless made otherwise
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_crawl_json_is_its_owners_alone(tmp_path: Path) -> None:
    settings = CrawlSettings(
        seeds=["http://a.example/"], output=tmp_path, proxy=SECRET_PROXY,
        headers=["Authorization: Bearer t0ken"],
    )  # fmt: skip
    manifest = tmp_path / "crawl.json"
    write_manifest(settings)
    assert mode(manifest) == PRIVATE_MODE == 0o600
    assert json.loads(manifest.read_text())["proxy"] == SECRET_PROXY  # a resume needs it
    # an old crawl.json (0644) rewritten by a resume, over a stale temporary file of 0644
    manifest.chmod(0o644)
    stale = tmp_path / "crawl.json.tmp"
    stale.write_text("{}")
    stale.chmod(0o644)
    write_manifest(settings)
    assert mode(manifest) == 0o600 and not stale.exists()
    assert load_manifest(tmp_path).fetch.proxy == SECRET_PROXY


def test_a_cluster_workers_crawl_json_too(tmp_path: Path) -> None:
    """`path`: a cluster worker's own crawl.json (DIR/<worker id>/crawl.json)."""
    target = tmp_path / "w1" / "crawl.json"
    target.parent.mkdir()
    write_manifest(CrawlSettings(output=target.parent, proxy=SECRET_PROXY), target)
    assert mode(target) == 0o600


def test_workers_0_of_an_old_crawl_json_is_auto(tmp_path: Path) -> None:
    """Before `auto`, crawl.json stored one worker per core as 0, which now means none."""
    (tmp_path / "crawl.json").write_text(
        json.dumps({"seeds": ["http://a.example/"], "workers": 0})
    )
    assert load_manifest(tmp_path).workers is None

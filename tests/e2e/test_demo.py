"""The README's demo command, end to end: a real server subprocess, a real crawl, an audit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_demo_crawls_the_whole_truth_politely(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "gossamer", "testweb", "demo", "--hosts", "30", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: OK" in proc.stdout
    report = json.loads((out / "audit.json").read_text())
    assert report["pages"]["coverage"] == 1.0
    assert report["pages"]["overlap"] == 0.0
    assert (out / "web.log").stat().st_size > 0
    assert (out / "resolve.txt").read_text().count(":80:127.") == 30

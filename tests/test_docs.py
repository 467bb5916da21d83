"""Every public switch and command is documented."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from gossamer.experiments import EXPERIMENTS
from gossamer.testing import Realism

ROOT = Path(__file__).resolve().parents[1]


def test_every_realism_switch_is_documented() -> None:
    doc = (ROOT / "docs" / "testweb.md").read_text()
    missing = [f.name for f in dataclasses.fields(Realism) if f"`{f.name}`" not in doc]
    assert not missing, f"docs/testweb.md lacks {missing}"


def test_readme_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "./scripts/setup.sh && ./scripts/test.sh" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/setup.sh && ./scripts/test.sh" in ci


def test_experiments_are_documented_and_their_files_linked() -> None:
    doc = (ROOT / "docs" / "experiments.md").read_text()
    missing = [e.name for e in EXPERIMENTS if f"`{e.name}`" not in doc]
    assert not missing, f"docs/experiments.md lacks {missing}"
    links = re.findall(r"\]\((experiments/[^)]+)\)", doc)
    assert any(link.endswith(".png") for link in links)
    absent = [link for link in links if not (ROOT / "docs" / link).is_file()]
    assert not absent, f"run `gossamer experiment all -o docs/experiments/`: {absent} missing"
    assert "gossamer experiment all -o docs/experiments/" in (ROOT / "README.md").read_text()

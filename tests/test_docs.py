"""Every public switch and command is documented."""

from __future__ import annotations

import dataclasses
from pathlib import Path

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

"""docs/cli.md is what the code generates (gossamer._clidoc), so it cannot drift."""

from __future__ import annotations

from pathlib import Path

from gossamer._clidoc import REGENERATE, render
from gossamer.config import CrawlSettings
from gossamer.exitcodes import MEANINGS

ROOT = Path(__file__).resolve().parents[1]


def test_cli_md_is_generated_from_the_code() -> None:
    doc = ROOT / "docs" / "cli.md"
    assert doc.read_text() == render(), f"docs/cli.md is stale: run `.venv/bin/{REGENERATE}`"


def test_cli_md_holds_every_setting_exit_code_and_subcommand() -> None:
    text = render()
    for name in CrawlSettings.knob_fields():
        assert f"| `{name}` |" in text and f"`GOSSAMER_{name.upper()}`" in text
    for code in MEANINGS:
        assert f"\n| {int(code)} | `" in text
    for command in ("crawl", "worker", "status", "stop", "workers", "report", "testweb audit"):
        assert f"### `gossamer {command}`" in text
    assert "crawl-worker" not in text  # internal
    assert "`-i FILE, --seeds-file FILE`" in text and "`-s KEY=VALUE, --set KEY=VALUE`" in text


def test_readme_links_cli_md() -> None:
    assert "(docs/cli.md)" in (ROOT / "README.md").read_text()

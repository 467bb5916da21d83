"""Every public switch and command is documented."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from gossamer.experiments import EXPERIMENTS
from gossamer.testweb import Realism

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


def test_every_crawl_flag_and_setting_is_documented() -> None:
    """`gossamer crawl`'s flags are in docs/crawler.md, docs/cluster.md or the generated
    docs/cli.md (checked against the code by tests/test_cli_docs.py), and every crawl setting
    has its row in docs/crawler.md's settings table."""
    from gossamer.cli import build_parser
    from gossamer.config import CrawlSettings

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    crawl = sub.choices["crawl"]
    docs = "".join((ROOT / "docs" / f).read_text() for f in ("crawler.md", "cluster.md", "cli.md"))
    missing = sorted(
        a.option_strings[-1]
        for a in crawl._actions
        if a.option_strings
        and a.dest != "help"
        and not any(re.search(re.escape(f) + r"(?![\w-])", docs) for f in a.option_strings)
    )
    assert not missing, f"docs/crawler.md lacks {missing}"
    table = (ROOT / "docs" / "crawler.md").read_text()
    rows = [n for n in CrawlSettings.knob_fields() if f"| `{n}` |" not in table]
    assert not rows, f"docs/crawler.md's settings table lacks {rows}"


def test_architecture_layout_names_every_package_and_module() -> None:
    """docs/architecture.md's layout lists every package of src/gossamer and every module of
    the top level, engine/ and cluster/ (the data flow's parts), and names no module that
    does not exist."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    layout = text[text.index("## Layout") : text.index("## A crawl's data flow")]
    src = ROOT / "src" / "gossamer"
    for pkg in sorted(p for p in src.iterdir() if (p / "__init__.py").is_file()):
        assert f"  {pkg.name}/" in layout, pkg.name
    for d in (src, *(src / p for p in ("engine", "runner", "report", "cluster"))):
        for mod in sorted(d.glob("*.py")):
            if mod.name not in ("__init__.py", "__main__.py"):
                assert mod.name in layout, mod
    for name in re.findall(r"^ +(\w+\.py) ", layout, flags=re.MULTILINE):
        assert list(src.rglob(name)), f"docs/architecture.md names {name}, which is not in src"


def test_architecture_how_to_add_names_files_that_exist_and_calls_that_register() -> None:
    """docs/architecture.md's "How to add …" section: every file it names exists, every
    example module calls the registration the section names, and the registration
    functions it names exist."""
    import importlib

    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("## How to add a frontier backend, a fetcher, a sink or a partition")
    section = text[start : text.index("\n## ", start + 1)]
    files = set(re.findall(r"`((?:tests|src)/[\w/]+\.py)`", section))
    assert len(files) >= 8, files
    for name in files:
        assert (ROOT / name).is_file(), name
    calls = re.findall(r"`(gossamer[\w.]*)\.(register_\w+)\(", section)
    assert {c for _, c in calls} == {
        "register_frontier",
        "register_fetcher",
        "register_sink",
        "register_strategy",
    }
    for module, call in calls:
        assert callable(getattr(importlib.import_module(module), call)), (module, call)
    for example, call in (
        ("tests/engine/_dict_frontier.py", "register_frontier("),
        ("tests/engine/_streams_fetcher.py", "register_fetcher("),
        ("tests/engine/_titles_sink.py", "register_sink("),
        ("tests/e2e/_toy_partition.py", "register_strategy("),
    ):
        assert example in files and call in (ROOT / example).read_text(), example

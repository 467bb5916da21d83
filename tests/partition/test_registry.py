"""The partition strategies' registry: `--partition`'s choices, the stored crawl record and
docs/cluster.md all come from it; a strategy added by one module and its registration
(tests/e2e/_toy_partition.py) is found by name, refused options and all, and a worker's
`PartitionView` uses it by its `unrestricted` property, not by its class."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gossamer.cli import build_parser
from gossamer.cluster.members import PartitionView
from gossamer.partition import (
    SHARDS,
    Dynamic,
    Member,
    PartitionError,
    _registry,
    register_strategy,
    strategy_entries,
    strategy_named,
    strategy_names,
)

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = ("dynamic", "modulo", "consistent", "phase", "sized")


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The toy module imported (which registers `contiguous`) into a copy of the registry,
    restored afterwards: the other tests of the session (docs/cli.md's) see the built-ins."""
    monkeypatch.setattr(_registry, "_REGISTRY", dict(_registry._REGISTRY))
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "e2e"))
    sys.modules.pop("_toy_partition", None)
    yield importlib.import_module("_toy_partition").Contiguous
    sys.modules.pop("_toy_partition", None)


def builtin_names() -> list[str]:
    return [e.name for e in strategy_entries() if e.build.__module__.startswith("gossamer.")]


def test_builtin_strategies_registered_in_order(toy: Any) -> None:
    assert tuple(builtin_names()) == BUILTIN
    assert strategy_names()[: len(BUILTIN)] == BUILTIN
    assert "contiguous" in strategy_names()


def test_toy_strategy_by_name_with_option_checks(toy: Any) -> None:
    assert strategy_named("contiguous") == toy()
    with pytest.raises(PartitionError, match="takes no epsilon"):
        strategy_named("contiguous", epsilon=0.5)
    with pytest.raises(PartitionError, match="already registered"):
        register_strategy("contiguous", toy)
    with pytest.raises(PartitionError, match="unknown options"):
        register_strategy("other", toy, options=("speed",))
    with pytest.raises(PartitionError, match="unknown partition strategy 'random': choose dyn"):
        strategy_named("random")


def test_toy_strategy_is_exclusive_and_complete(toy: Any) -> None:
    members = [Member(f"w{k}") for k in range(3)]
    parts = [toy().shards_for(m.id, members, 0.0) or frozenset() for m in members]
    assert sum(len(p) for p in parts) == SHARDS
    assert frozenset().union(*parts) == frozenset(range(SHARDS))


def test_partition_view_asks_the_property_not_the_class(toy: Any) -> None:
    members = [Member("a", 1.0), Member("b", 3.0)]
    view = PartitionView(toy(), "b")
    view.update(members)
    assert view.partition(0.0)[0] == frozenset(range(SHARDS // 2, SHARDS))
    assert view.lease_size(10) == 10  # restricted: the lease size as asked
    dyn = PartitionView(Dynamic(), "b")
    dyn.update(members)
    assert dyn.partition(0.0) == (None, float("inf"))
    assert dyn.lease_size(10) == 15  # unrestricted: scaled by capacity 3 / mean 2


def test_cli_choices_come_from_the_registry(toy: Any) -> None:
    args = build_parser(with_testweb=False).parse_args(
        ["crawl", "--partition", "contiguous", "http://a.example/"]
    )
    assert args.partition == "contiguous"


def test_docs_list_every_builtin_strategy() -> None:
    """docs/cluster.md's table and `--partition` lists, and README.md's, name the registered
    strategies in order (docs/cli.md is generated from the parser, so from the registry)."""
    assert strategy_names() == BUILTIN  # the toy is gone with its fixture
    text = (ROOT / "docs" / "cluster.md").read_text()
    table = re.findall(r"^\| `(\w+)`[^|]*\|", text, flags=re.MULTILINE)
    assert [n for n in table if n in strategy_names()] == builtin_names(), table
    for doc in (text, (ROOT / "README.md").read_text()):
        line = re.search(r"`--partition ([\w|\n]+)`", doc)
        assert line is not None and line.group(1).replace("\n", "").split("|") == builtin_names()

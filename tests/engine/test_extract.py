"""engine/extract.py: what an extractor may be and what its return values become."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from gossamer.engine.extract import items_of, load_extractor
from gossamer.plugins import PluginError


@dataclasses.dataclass
class Item:
    title: str
    n: int


def test_items_of_every_shape() -> None:
    assert items_of(None) == []
    assert items_of({"a": 1}) == [{"a": 1}]
    assert items_of(Item("t", 1)) == [{"title": "t", "n": 1}]
    assert items_of(x for x in [{"a": 1}, Item("u", 2)]) == [{"a": 1}, {"title": "u", "n": 2}]
    for bad in ("text", 3, [1]):
        with pytest.raises(TypeError):
            items_of(bad)


def test_load_extractor_takes_a_callable_a_class_or_an_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mod = types.ModuleType("fake_extractors")

    def plain(page: object) -> dict[str, str]:
        return {"p": "x"}

    class WithFollow:
        def extract(self, page: object) -> None:
            return None

        def follow(self, page: object, link: object) -> bool:
            return True

    mod.plain = plain  # type: ignore[attr-defined]
    mod.WithFollow = WithFollow  # type: ignore[attr-defined]
    mod.not_one = 42  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_extractors", mod)
    e = load_extractor("fake_extractors:plain")
    assert e.extract is plain and e.follow is None
    e = load_extractor("fake_extractors:WithFollow")
    assert e.follow is not None
    with pytest.raises(PluginError, match="not callable"):
        load_extractor("fake_extractors:not_one")
    with pytest.raises(PluginError, match="expected MODULE:CALLABLE"):
        load_extractor("fake_extractors:")

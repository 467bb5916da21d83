"""`FrontierKnobs` is the one list of the frontier's knobs: each is a field of `FrontierOptions`
or of its `PolitenessPolicy` (which hold the defaults), and the settings map onto exactly them."""

from __future__ import annotations

from dataclasses import fields
from typing import get_type_hints

import pytest

from gossamer.config import CrawlSettings
from gossamer.frontier._options import FrontierKnobs, FrontierOptions
from gossamer.frontier._politeness import PolitenessPolicy

KNOBS = set(get_type_hints(FrontierKnobs))
OPTION_FIELDS = {f.name for f in fields(FrontierOptions)} - {"politeness"}
POLICY_FIELDS = {f.name for f in fields(PolitenessPolicy)}


def test_every_knob_is_an_options_or_politeness_field() -> None:
    assert KNOBS <= OPTION_FIELDS | POLICY_FIELDS, KNOBS - OPTION_FIELDS - POLICY_FIELDS
    # every politeness field is a knob; of the options only max_backlog_lead is not
    assert POLICY_FIELDS <= KNOBS
    not_knobs = OPTION_FIELDS - KNOBS
    assert not_knobs == {"max_backlog_lead"}


def test_of_defaults_are_the_dataclass_defaults() -> None:
    assert FrontierOptions.of() == FrontierOptions()
    assert FrontierOptions.of().politeness == PolitenessPolicy()


def test_of_routes_each_knob_to_its_place() -> None:
    o = FrontierOptions.of(lease_ttl=5.0, default_delay=0.25, max_host_errors=None, max_depth=2)
    assert (o.lease_ttl, o.max_depth) == (5.0, 2)
    assert o.politeness == PolitenessPolicy(default_delay=0.25, max_host_errors=None)
    with pytest.raises(ValueError, match="default_delay"):
        FrontierOptions.of(default_delay=-1.0)
    with pytest.raises(ValueError, match="lease_ttl"):
        FrontierOptions.of(lease_ttl=0.0)


def test_settings_map_onto_known_knobs() -> None:
    knobs = CrawlSettings(seeds=["http://a.example/"], delay=0.5).frontier_knobs()
    assert set(knobs) <= KNOBS
    assert FrontierOptions.of(**knobs).politeness.default_delay == 0.5

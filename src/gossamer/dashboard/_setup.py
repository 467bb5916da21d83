"""The Setup tab's words and defaults (docs/dashboard.md, "The page"): the form's fields, the
value each shows at first (what a crawl started now gets: the settings model's default, or the
dashboard's GOSSAMER_* environment, which the started command inherits), the command line's
refusals with the form's labels for its flags and settings, and what to change when a crawl
fetched no page, in the form's words ("tick Allow private addresses", not a flag).

Reads settings and statistics only; starts nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ..config import CrawlSettings, SettingsError, load_settings
from ..report.progress import diagnose
from ..runner.pool import MAX_POOL_WORKERS

__all__ = ["FIELDS", "form_defaults", "form_words", "problem_of"]

#: the form's fields: setting (its flat name) -> the label the page shows for it
FIELDS: Final = {
    "seeds": "Seed URLs",
    "allow_private": "Allow private addresses",
    "scope": "Scope",
    "delay": "Delay (s)",
    "max_depth": "Max depth",
    "max_pages": "Max pages",
    "workers": "Workers",
    "partition": "Partition",
    # not a setting: the machine list of `crawl --machines FILE` (a cluster crawl's)
    "machines": "Machines",
}
#: the settings the form shows a default for (seeds have none; the partition is a cluster's)
_DEFAULTED: Final = ("allow_private", "scope", "delay", "max_depth", "max_pages", "workers")


def form_defaults() -> dict[str, Any]:
    """The form's first values: `values` (setting -> value as crawl.json stores it; `workers`
    the processes a crawl gets, one per core for the default 0, at most the form's 64),
    `from_environment` (those the dashboard's GOSSAMER_* variables set) and `error` (why the
    environment's settings are invalid: the model's defaults are shown then)."""
    error = None
    try:
        settings = load_settings()
    except SettingsError as exc:
        settings, error = CrawlSettings.model_validate({}), str(exc)
    stored = settings.manifest()
    values = {name: stored[name] for name in _DEFAULTED}
    values["workers"] = min(settings.effective_workers(), MAX_POOL_WORKERS)
    given = settings.knobs_set() if error is None else set()
    return {
        "values": values,
        "from_environment": sorted(name for name in _DEFAULTED if name in given),
        "error": error,
    }


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# `argument --max-pages:` (argparse), `--max-pages`, `--no-allow-private`, and a setting's
# name where it starts a problem (`max_depth: Input should be …`, `seeds: invalid seed URL`)
_WORDS = re.compile(
    r"(?:argument )?(?<![\w-])(?:--(?:no-)?(?P<flag>[a-z-]+)|(?P<name>[a-z_]+)(?=:))"
)


def form_words(message: str) -> str:
    """`message` (a `gossamer crawl` refusal) with the form's labels for the flags and
    settings it has a field for; other words unchanged."""

    def label(m: re.Match[str]) -> str:
        name = (m.group("flag") or "").replace("-", "_") or m.group("name")
        if name not in FIELDS:
            return m.group(0)
        return FIELDS[name]

    return _WORDS.sub(label, message)


#: what to change for a failure kind (report.progress.diagnose's kinds), in the form's words;
#: a kind not here gets the command line's advice with the form's labels
_FIXES: Final = {
    "fetch/error/blocked-address": (
        "allow_private",
        "tick Allow private addresses and start again",
    ),
    "fetch/error/dns": (
        "seeds",
        "check the Seed URLs' host names (a name this machine cannot resolve can be mapped "
        "with GOSSAMER_RESOLVE=HOST:IP in the dashboard's environment)",
    ),
    "fetch/error/timeout": (
        None,
        "check the network, or raise GOSSAMER_CONNECT_TIMEOUT / GOSSAMER_FIRST_BYTE_TIMEOUT "
        "in the dashboard's environment",
    ),
    "fetch/error/too-slow": (
        None,
        "lower GOSSAMER_LOW_SPEED_LIMIT or raise GOSSAMER_LOW_SPEED_TIME in the dashboard's "
        "environment",
    ),
    "robots/disallowed": (
        None,
        "the site's robots.txt forbids it: crawl it only where you are allowed to "
        "(GOSSAMER_OBEY_ROBOTS=false in the dashboard's environment)",
    ),
}


def problem_of(stats: Mapping[str, Any] | None) -> dict[str, Any]:
    """Why a crawl fetched no page and what to change, from its statistics (stats.json):
    `{"message": one line, "kind": the main failure's key or None, "field": the form's
    setting to change or None}`."""
    found = diagnose(stats) if stats else None
    if found is None:
        return {
            "message": "No page was fetched: check the Seed URLs (the log below has each "
            "request's answer) and start again.",
            "kind": None,
            "field": None,
        }
    field, fix = _FIXES.get(found.kind, (None, form_words(found.fix)))
    what = found.what[0].upper() + found.what[1:]
    return {
        "message": f"No page was fetched. {what} ({found.kind} ×{found.count:,}): {fix}.",
        "kind": found.kind,
        "field": field,
    }

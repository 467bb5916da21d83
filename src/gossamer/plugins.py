"""Plugins found by entry points (docs/python.md, "Plugins"): a package that declares entry
points in one of `GROUPS` is found without touching gossamer. `gossamer.extractors` names
extractors (`--extract NAME`); the other groups register into the registries that exist —
`gossamer.sinks` (a sink factory, `register_sink`), `gossamer.frontiers` (a frontier
factory), `gossamer.fetchers` (a fetcher factory), `gossamer.strategies` (a partition
strategy) — and are loaded by `load_registered()` where the composition root needs them.

Nothing here imports a plugin until asked; a plugin that fails to import, or is not what
its group takes, raises `PluginError` with one line naming it (group, name, value,
distribution) and the reason."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Final

__all__ = [
    "EXTRACTORS",
    "GROUPS",
    "Plugin",
    "PluginError",
    "installed",
    "load",
    "load_object",
    "rescan",
]

EXTRACTORS: Final = "gossamer.extractors"
SINKS: Final = "gossamer.sinks"
FRONTIERS: Final = "gossamer.frontiers"
FETCHERS: Final = "gossamer.fetchers"
STRATEGIES: Final = "gossamer.strategies"

#: every group gossamer reads, and what an entry point of it names
GROUPS: Final = {
    EXTRACTORS: "an extractor: a callable taking a Page, or a class (docs/python.md)",
    SINKS: "a sink factory (SinkContext) -> PageSink | None, registered under its name",
    FRONTIERS: "a frontier factory (settings, place) -> Frontier, registered under its name",
    FETCHERS: "a fetcher factory (settings, resolver) -> Fetcher, registered under its name",
    STRATEGIES: "a partition strategy class, registered under its name",
}


class PluginError(Exception):
    """A plugin that cannot be loaded; the message is one line naming it and why."""


@dataclass(frozen=True, slots=True)
class Plugin:
    """One installed entry point of a gossamer group: its group, name and value
    (`module:attr`), and the distribution (and version) that declares it."""

    group: str
    name: str
    value: str
    distribution: str | None
    version: str | None

    def describe(self) -> str:
        where = f" from {self.distribution} {self.version}" if self.distribution else ""
        return f"{self.group} {self.name} = {self.value}{where}"

    def load(self) -> Any:
        """The object the entry point names (PluginError: one line)."""
        for ep in _entry_points(self.group).select(name=self.name):
            if ep.value == self.value:
                try:
                    return ep.load()
                except Exception as exc:
                    raise PluginError(
                        f"plugin {self.describe()} failed to load: {type(exc).__name__}: {exc}"
                    ) from exc
        raise PluginError(f"plugin {self.describe()} is not installed any more")


_SCANNED: list[Any] = []  # every installed entry point (importlib.metadata's), read once


def _entry_points(group: str) -> metadata.EntryPoints:
    # reading every distribution's metadata takes tens of milliseconds (more with many
    # packages): once a process, and only when a plugin is looked for
    if not _SCANNED:
        _SCANNED.append(metadata.entry_points())
    selected: metadata.EntryPoints = _SCANNED[0].select(group=group)
    return selected


def rescan() -> None:
    """Forget the entry points read so far (a package installed since is found next)."""
    _SCANNED.clear()


def installed(group: str | None = None) -> list[Plugin]:
    """The entry points of gossamer's groups (or of `group`) installed, sorted by group
    and name (their modules not imported; the installed packages read once a process)."""
    found = []
    for g in [group] if group is not None else list(GROUPS):
        for ep in _entry_points(g):
            dist = ep.dist
            found.append(
                Plugin(
                    g,
                    ep.name,
                    ep.value,
                    dist.metadata["Name"] if dist is not None else None,
                    dist.version if dist is not None else None,
                )
            )
    return sorted(found, key=lambda p: (p.group, p.name, p.value))


def load(group: str, name: str) -> Any:
    """The object of the entry point `name` of `group`. PluginError when none is installed
    (naming those that are), when two distributions declare it, or when it fails to load."""
    plugins = [p for p in installed(group) if p.name == name]
    if not plugins:
        names = ", ".join(sorted({p.name for p in installed(group)})) or "none"
        raise PluginError(
            f"no plugin {name!r} in {group} (installed: {names}; or give MODULE:CALLABLE)"
        )
    if len({(p.value, p.distribution) for p in plugins}) > 1:
        shown = "; ".join(p.describe() for p in plugins)
        raise PluginError(f"plugin {name!r} of {group} is declared twice: {shown}")
    return plugins[0].load()


def load_object(spec: str, group: str) -> Any:
    """`MODULE:ATTR` (dotted attributes allowed) imported, or else the entry point `spec`
    of `group`. PluginError (one line) when it cannot be loaded."""
    module_name, colon, attr = spec.partition(":")
    if not colon:
        return load(group, spec)
    if not module_name or not attr:
        raise PluginError(f"{spec!r}: expected MODULE:CALLABLE, e.g. mypackage.extract:titles")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise PluginError(
            f"{spec}: cannot import {module_name}: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"{spec}: {module_name} has no {attr}") from None
    return obj


#: a group's registration: (name, loaded object) -> None
Registrar = Callable[[str, Any], None]


def register_group(group: str, register: Registrar, known: Callable[[], list[str]]) -> int:
    """Register every installed entry point of `group` not registered yet (`known()`), by
    its name, with `register(name, obj)`; how many. PluginError (one line) for one that
    fails to load."""
    done = 0
    names = set(known())
    for plugin in installed(group):
        if plugin.name in names:
            continue
        register(plugin.name, plugin.load())
        names.add(plugin.name)
        done += 1
    return done

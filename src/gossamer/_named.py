"""`Named`: the registry behind the frontier backends and the fetchers by name (a name is
registered once; an unknown one is looked for among the installed plugins of the registry's
entry-point group, then refused with the choices in the message)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Named", "NamedEntry"]

_F = TypeVar("_F")


@dataclass(frozen=True, slots=True)
class NamedEntry(Generic[_F]):
    """A registered factory, with `summary`: one line saying what it makes."""

    name: str
    factory: _F
    summary: str


class Named(Generic[_F]):
    """Factories by name, in registration order. `what` names one in messages ("fetcher");
    `error` is the exception raised for a name registered twice or not registered."""

    def __init__(self, what: str, error: type[Exception], group: str | None = None) -> None:
        self.what = what
        self.error = error
        #: the entry-point group of the plugins that add to it (plugins.py): a name not
        #: registered is looked for there, loaded and registered (a failure: the error)
        self.group = group
        self._entries: dict[str, NamedEntry[_F]] = {}

    def register(self, name: str, factory: _F, *, summary: str = "") -> None:
        """Register `factory` as `name` (the error when the name is taken)."""
        if name in self._entries:
            raise self.error(f"a {self.what} named {name!r} is registered already")
        self._entries[name] = NamedEntry(name, factory, summary)

    def unregister(self, name: str) -> None:
        """Remove `name` (KeyError when it is not registered)."""
        del self._entries[name]

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order (the built-in ones first)."""
        return tuple(self._entries)

    def entries(self) -> tuple[NamedEntry[_F], ...]:
        return tuple(self._entries.values())

    def factory(self, name: str) -> _F:
        """The factory registered as `name` (the error, with the choices, when none is)."""
        entry = self._entries.get(name)
        if entry is None and self.group is not None:
            entry = self._from_plugin(name)
        if entry is None:
            names = self.names()
            choices = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
            raise self.error(f"unknown {self.what} {name!r}: choose {choices}")
        return entry.factory

    def _from_plugin(self, name: str) -> NamedEntry[_F] | None:
        """The installed plugin `name` of the group, registered; None when none is."""
        from .plugins import PluginError, installed

        assert self.group is not None
        for plugin in installed(self.group):
            if plugin.name == name:
                try:
                    factory = plugin.load()
                except PluginError as exc:
                    raise self.error(str(exc)) from None
                self.register(name, factory, summary=f"plugin {plugin.describe()}")
                return self._entries[name]
        return None

"""`Named`: the registry behind the frontier backends and the fetchers by name (a name is
registered once; an unknown one is refused with the choices in the message)."""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["Named"]

_T = TypeVar("_T")


class Named(Generic[_T]):
    """Entries by name, in registration order. `what` names an entry in messages ("fetcher");
    `error` is the exception raised for a name registered twice or not registered."""

    def __init__(self, what: str, error: type[Exception]) -> None:
        self.what = what
        self.error = error
        self._entries: dict[str, _T] = {}

    def register(self, name: str, entry: _T) -> None:
        if name in self._entries:
            raise self.error(f"a {self.what} named {name!r} is registered already")
        self._entries[name] = entry

    def unregister(self, name: str) -> None:
        """KeyError when `name` is not registered."""
        del self._entries[name]

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entries(self) -> tuple[_T, ...]:
        return tuple(self._entries.values())

    def __getitem__(self, name: str) -> _T:
        entry = self._entries.get(name)
        if entry is None:
            names = self.names()
            choices = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
            raise self.error(f"unknown {self.what} {name!r}: choose {choices}")
        return entry

"""The Lua scripts of the Redis frontier (lua/*.lua), as sent to Redis: every per-shard
script after lua/shard.lua, the functions they share; lua/global.lua (the crawl-wide index)
alone."""

from __future__ import annotations

from importlib import resources
from typing import Final

__all__ = ["lua_source", "script_sources"]

#: the per-shard scripts (each with lua/shard.lua before it)
_SCRIPTS: Final = ("put", "lease", "leasemany", "complete", "reclaim", "misc", "depth")


def lua_source(name: str) -> str:
    """The text of lua/`name`.lua."""
    return (resources.files(__package__) / "lua" / f"{name}.lua").read_text("utf-8")


def script_sources() -> dict[str, str]:
    """Every script the frontier loads, by name."""
    prelude = lua_source("shard")
    sources = {name: prelude + "\n" + lua_source(name) for name in _SCRIPTS}
    sources["global"] = lua_source("global")
    return sources

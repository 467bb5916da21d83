"""The partition strategies by name: `--partition NAME`, a cluster crawl's stored record and
the docs' list all come from here. A new strategy is one module defining it plus one
`register_strategy` call (the built-in five register at the end of this module)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._strategies import Consistent, Dynamic, Modulo, PartitionError, Phase, Sized, Strategy

#: The options a strategy may take (`strategy_named`'s keywords, the crawl record's keys).
STRATEGY_OPTIONS: Final = ("epsilon", "period", "phases", "weights")


@dataclass(frozen=True, slots=True)
class StrategyEntry:
    """A registered strategy: `build(**options)` gets only the `options` given (each one of
    `STRATEGY_OPTIONS`); `summary` is its line in docs/cluster.md's list and `--help`."""

    name: str
    build: Callable[..., Strategy]
    options: frozenset[str]
    summary: str


_REGISTRY: dict[str, StrategyEntry] = {}


def register_strategy(
    name: str, build: Callable[..., Strategy], *, options: Sequence[str] = (), summary: str = ""
) -> None:
    """Make `--partition NAME` build a strategy with `build`. A name is registered once."""
    unknown = set(options) - set(STRATEGY_OPTIONS)
    if unknown:
        raise PartitionError(f"partition {name!r}: unknown options {sorted(unknown)}")
    if name in _REGISTRY:
        raise PartitionError(f"partition strategy {name!r} is already registered")
    _REGISTRY[name] = StrategyEntry(name, build, frozenset(options), summary)


def strategy_names() -> tuple[str, ...]:
    """The registered names, in registration order (the built-in ones first)."""
    return tuple(_REGISTRY)


def plugin_strategy_names() -> tuple[str, ...]:
    """The names of the installed strategy plugins (gossamer.strategies) not registered yet
    (their modules not imported): `--partition` takes them too."""
    from ..plugins import STRATEGIES, installed

    return tuple(p.name for p in installed(STRATEGIES) if p.name not in _REGISTRY)


def _from_plugin(name: str) -> StrategyEntry | None:
    """The installed strategy plugin `name` registered: an entry point naming a strategy
    class (built with no option) or a `StrategyEntry`; None when none is installed."""
    from ..plugins import STRATEGIES, PluginError, installed

    for plugin in installed(STRATEGIES):
        if plugin.name == name:
            try:
                obj = plugin.load()
            except PluginError as exc:
                raise PartitionError(str(exc)) from None
            if isinstance(obj, StrategyEntry):
                register_strategy(name, obj.build, options=tuple(obj.options),
                                  summary=obj.summary)  # fmt: skip
            else:
                register_strategy(name, obj, summary=f"plugin {plugin.describe()}")
            return _REGISTRY[name]
    return None


def strategy_entries() -> tuple[StrategyEntry, ...]:
    return tuple(_REGISTRY.values())


def strategy_named(
    name: str,
    *,
    epsilon: float | None = None,
    period: float | None = None,
    phases: int | None = None,
    weights: Sequence[Sequence[float]] | None = None,
) -> Strategy:
    """The strategy for `--partition NAME` with its options (those not None); an option the
    strategy does not take, or a name not registered, is refused (PartitionError)."""
    entry = _REGISTRY.get(name)
    if entry is None:
        entry = _from_plugin(name)
    if entry is None:
        names = strategy_names()
        choices = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise PartitionError(f"unknown partition strategy {name!r}: choose {choices}")
    named = {"epsilon": epsilon, "period": period, "phases": phases, "weights": weights}
    given = {k: v for k, v in named.items() if v is not None}
    extra = set(given) - entry.options
    if extra:
        raise PartitionError(f"partition {name!r} takes no {', '.join(sorted(extra))}")
    return entry.build(**given)


def _sized(weights: Sequence[Sequence[float]] | None = None) -> Sized:
    if weights is None:
        raise PartitionError("partition 'sized' needs weights: (shard, size) pairs")
    try:
        pairs = tuple((int(s), float(w)) for s, w in weights)
    except (TypeError, ValueError) as exc:
        raise PartitionError(f"sized: weights must be (shard, size) pairs: {exc}") from None
    return Sized(weights=pairs)


def _builtin() -> None:
    # option defaults are the dataclasses' (consistent: epsilon 0.25; phase: a 60 s period)
    builtin: tuple[tuple[str, Callable[..., Any], tuple[str, ...], str], ...] = (
        ("dynamic", Dynamic, (), "any worker leases any ready host, largest sites first"),
        ("modulo", Modulo, (), "a host's shard mod the number of workers picks the worker"),
        ("consistent", Consistent, ("epsilon",), "weighted rendezvous hashing, bounded loads"),
        ("phase", Phase, ("period", "phases"), "workers take turns at phases of the shards"),
        ("sized", _sized, ("weights",), "known site sizes, largest first to the least loaded"),
    )
    for name, build, options, summary in builtin:
        register_strategy(name, build, options=options, summary=summary)


_builtin()

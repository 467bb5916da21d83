"""GraphBench's one small interface per family, their registries by name, and the trusted
references every algorithm is validated against (docs/graphbench.md, "The interface").

An algorithm is made for `n` vertices (`make(n)`), fed `add_edge(src, tgt)` once per edge in
order (self-loops and repeated edges change nothing), and `flush()`ed after every `threshold`
insertions and at the end (a batch algorithm may defer its work until then). Its answer is read
after the last flush: `distances()` (APSD: an n × n float64 array, inf when unreachable) or
`components()` (SCC: labels equal exactly within a component). Modules register their
algorithms with `register_apsd` / `register_scc` when imported."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse import csgraph

__all__ = [
    "APSD",
    "FAMILIES",
    "SCC",
    "APSDAlgorithm",
    "AlgorithmInfo",
    "Family",
    "SCCAlgorithm",
    "apsd_named",
    "canonical",
    "names",
    "reference_components",
    "reference_distances",
    "register_apsd",
    "register_scc",
    "scc_named",
]

Family = Literal["apsd", "scc"]
FAMILIES: tuple[Family, ...] = ("apsd", "scc")
Distances = npt.NDArray[np.float64]
Labels = npt.NDArray[np.int64]


@runtime_checkable
class APSDAlgorithm(Protocol):
    """A dynamic all-pairs shortest distances algorithm (module docstring)."""

    def add_edge(self, src: int, tgt: int) -> None: ...

    def flush(self) -> None: ...

    def distances(self) -> Distances: ...


@runtime_checkable
class SCCAlgorithm(Protocol):
    """A dynamic strongly connected components algorithm (module docstring)."""

    def add_edge(self, src: int, tgt: int) -> None: ...

    def flush(self) -> None: ...

    def components(self) -> Labels: ...


@dataclass(frozen=True, slots=True)
class AlgorithmInfo:
    """A registered algorithm: its name, what it is (one line), whether it batches, and
    `max_n`, the largest graph it is meant for (a dense n × n structure), or None."""

    name: str
    summary: str
    batch: bool = False
    max_n: int | None = None


_A = TypeVar("_A")
_FA = TypeVar("_FA", bound=Callable[[int], APSDAlgorithm])
_FS = TypeVar("_FS", bound=Callable[[int], SCCAlgorithm])
APSD: dict[str, tuple[AlgorithmInfo, Callable[[int], APSDAlgorithm]]] = {}
SCC: dict[str, tuple[AlgorithmInfo, Callable[[int], SCCAlgorithm]]] = {}


def register_apsd(
    name: str, summary: str, *, batch: bool = False, max_n: int | None = None
) -> Callable[[_FA], _FA]:
    """Class decorator (or function decorator on a factory taking n): register an APSD
    algorithm under `name`; the class is returned unchanged."""

    def add(make: _FA) -> _FA:
        if name in APSD:
            raise ValueError(f"algorithm {name!r} registered twice")
        APSD[name] = (AlgorithmInfo(name, summary, batch, max_n), make)
        return make

    return add


def register_scc(
    name: str, summary: str, *, batch: bool = False, max_n: int | None = None
) -> Callable[[_FS], _FS]:
    """The same for an SCC algorithm."""

    def add(make: _FS) -> _FS:
        if name in SCC:
            raise ValueError(f"algorithm {name!r} registered twice")
        SCC[name] = (AlgorithmInfo(name, summary, batch, max_n), make)
        return make

    return add


def names(family: Family) -> list[str]:
    """The registered algorithms of `family`, in registration order."""
    return list(APSD if family == "apsd" else SCC)


def _named(
    table: dict[str, tuple[AlgorithmInfo, Callable[[int], _A]]], family: str, name: str
) -> tuple[AlgorithmInfo, Callable[[int], _A]]:
    try:
        return table[name]
    except KeyError:
        raise KeyError(
            f"no {family} algorithm {name!r} (known: {', '.join(table) or 'none'})"
        ) from None


def apsd_named(name: str) -> tuple[AlgorithmInfo, Callable[[int], APSDAlgorithm]]:
    """(info, factory) of the APSD algorithm `name`; KeyError listing the known ones."""
    return _named(APSD, "apsd", name)


def scc_named(name: str) -> tuple[AlgorithmInfo, Callable[[int], SCCAlgorithm]]:
    """(info, factory) of the SCC algorithm `name`; KeyError listing the known ones."""
    return _named(SCC, "scc", name)


def _adjacency(n: int, edges: Sequence[tuple[int, int]]) -> sp.csr_array:
    if not edges:
        return sp.csr_array((n, n), dtype=np.int8)
    arr = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    keep = arr[:, 0] != arr[:, 1]
    src, dst = arr[keep, 0], arr[keep, 1]
    adj = sp.csr_array((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1
    return adj


def reference_distances(n: int, edges: Sequence[tuple[int, int]]) -> Distances:
    """The trusted answer: unweighted shortest distances by scipy's BFS (csgraph)."""
    if n == 0:
        return np.zeros((0, 0), dtype=np.float64)
    d: Distances = csgraph.shortest_path(
        _adjacency(n, edges), method="D", directed=True, unweighted=True
    )
    return d


def reference_components(n: int, edges: Sequence[tuple[int, int]]) -> Labels:
    """The trusted answer: strongly connected components by scipy (csgraph)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, labels = csgraph.connected_components(
        _adjacency(n, edges), directed=True, connection="strong"
    )
    return canonical(labels)


def canonical(labels: npt.ArrayLike) -> Labels:
    """Component labels renumbered 0, 1, … by first occurrence: two labelings of the same
    partition become equal arrays."""
    arr = np.asarray(labels)
    _, first, inverse = np.unique(arr, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    out: Labels = order[inverse].astype(np.int64)
    return out

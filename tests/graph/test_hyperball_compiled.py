"""The compiled HyperBall (graph/_hyperball.pyx) against its reference (`hyperball_reference`,
numpy): the same registers after every iteration, the same estimates and N(t) to the bit, the
same distance statistics; and built where `pip install -e .` (as scripts/setup.sh runs it)
builds it, so that a silent fallback to the reference fails here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from gossamer.graph import _distances
from gossamer.graph._distances import (
    _Estimator,
    _initial_registers,
    distance_statistics,
    hyperball,
    hyperball_reference,
)


def _compiled() -> Any:
    from gossamer.graph import _hyperball

    return _hyperball


def test_the_compiled_hyperball_is_built_and_used() -> None:
    """Fails in a checkout whose `pip install -e .` did not build graph/_hyperball.pyx (or
    built it before the .pyx last changed): run it again (./scripts/setup.sh)."""
    compiled = _compiled()  # ImportError: not built
    assert _distances.COMPILED and _distances._hyperball is compiled
    built = Path(compiled.__file__)
    source = built.with_name("_hyperball.pyx")
    if source.exists():  # an editable install: the module is built from this .pyx
        assert built.stat().st_mtime >= source.stat().st_mtime, "stale: pip install -e ."


def _csr(n: int, edges: list[tuple[int, int]]) -> sp.csr_array:
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([v for _, v in edges], dtype=np.int64)
    graph = sp.csr_array((np.ones(len(edges)), (src, dst)), shape=(n, n))
    graph.sum_duplicates()
    return graph


def _random(n: int, degree: float, seed: int) -> sp.csr_array:
    """Web-like: hosts of 40 pages, most links on the host, a few nodes with hundreds of
    links (the reference's wide out-lists), a tenth of the nodes dangling."""
    rng = np.random.default_rng(seed)
    out = rng.poisson(degree, n)
    out[rng.random(n) < 0.1] = 0
    out[rng.choice(n, 3, replace=False)] = [40, 150, 700]
    src = np.repeat(np.arange(n), out)
    near = src // 40 * 40 + (40 * rng.random(len(src)) ** 2).astype(np.int64)
    far = (n * rng.random(len(src)) ** 2).astype(np.int64)
    dst = np.minimum(np.where(rng.random(len(src)) < 0.8, near, far), n - 1)
    return _csr(n, list(zip(src.tolist(), dst.tolist(), strict=True)))


def _graphs() -> list[tuple[str, sp.csr_array]]:
    star_out = [(0, v) for v in range(1, 50)]
    return [
        ("single node", _csr(1, [])),
        ("no edges", _csr(5, [])),
        ("one arc", _csr(2, [(0, 1)])),
        ("cycle", _csr(9, [(v, (v + 1) % 9) for v in range(9)])),
        ("path", _csr(12, [(v, v + 1) for v in range(11)])),
        ("star out", _csr(50, star_out)),
        ("star in", _csr(50, [(v, u) for u, v in star_out])),
        ("self-loops", _csr(6, [(0, 0), (0, 1), (1, 1), (1, 2), (3, 3), (4, 5)])),
        ("disconnected", _csr(10, [(0, 1), (1, 2), (2, 0), (5, 6), (6, 7), (8, 9)])),
        ("dangling", _csr(8, [(0, 7), (1, 7), (2, 0), (3, 2), (4, 3)])),
        ("random 3000", _random(3000, 3.0, 1)),
        ("random 5000", _random(5000, 5.0, 2)),
    ]


def _structure(graph: sp.csr_array) -> tuple[int, Any, Any]:
    return graph.shape[0], graph.indptr.astype(np.int64), graph.indices.astype(np.int64)


@pytest.mark.parametrize(("name", "graph"), _graphs(), ids=[g[0] for g in _graphs()])
@pytest.mark.parametrize(("p", "groups"), [(5, 16), (6, 16), (6, 8), (8, 16)])
def test_the_same_neighbourhood_function_to_the_bit(
    name: str, graph: sp.csr_array, p: int, groups: int
) -> None:
    n, indptr, indices = _structure(graph)
    for seed in (0, 7):
        got, _ = hyperball(n, indptr, indices, p=p, seed=seed, groups=groups)
        want, _ = hyperball_reference(n, indptr, indices, p=p, seed=seed, groups=groups)
        assert got.shape == want.shape, name
        assert np.array_equal(got, want), name


@pytest.mark.parametrize(("name", "graph"), _graphs(), ids=[g[0] for g in _graphs()])
def test_the_same_registers_after_every_iteration(name: str, graph: sp.csr_array) -> None:
    """The compiled iteration against the definition, written here in numpy: each counter
    becomes the register-wise max of itself and its out-neighbours, all at once; the
    changed flags and the list of moved nodes (in node order) follow."""
    n, indptr, indices = _structure(graph)
    m = 64
    registers = np.zeros((n + 1, m), dtype=np.uint8)
    registers[:n] = _initial_registers(n, 6, seed=3)
    want = registers.copy()
    scratch = np.empty_like(registers)
    changed = np.ones(n + 1, dtype=np.uint8)
    changed[n] = 0
    moved = np.empty(n, dtype=np.int64)
    sources = np.repeat(np.arange(n), np.diff(indptr))
    for _ in range(n + 2):
        count = _compiled().iterate(registers, scratch, indptr, indices, changed, moved)
        before = want.copy()
        np.maximum.at(want, sources, before[indices])
        rows = np.flatnonzero((want != before).any(axis=1))
        assert np.array_equal(registers, want), name
        assert moved[:count].tolist() == rows.tolist()
        assert np.flatnonzero(changed).tolist() == rows.tolist()
        if count == 0:
            break
    else:
        pytest.fail("more iterations than nodes")


@pytest.mark.parametrize(("p", "groups"), [(4, 8), (5, 16), (6, 16), (6, 4), (8, 16)])
def test_the_same_estimates_to_the_bit(p: int, groups: int) -> None:
    """Counters from empty to full, most of them in linear counting's range."""
    m = 1 << p
    rng = np.random.default_rng(p * 100 + groups)
    rows = 20_000
    registers = rng.integers(0, 12, size=(rows, m), dtype=np.uint8)
    # empty registers in every proportion, and some huge values
    registers[rng.random((rows, m)) < rng.random((rows, 1))] = 0
    registers[rng.random((rows, m)) < 0.001] = 60
    registers[:3] = np.array([0, 1, 64], dtype=np.uint8)[:, None]
    estimator = _Estimator(m, groups)
    want = estimator.estimate(registers)
    # in place, a random half of the rows at a time, in node order, over earlier estimates
    got = np.zeros_like(want)
    before = got.copy()
    picked = np.flatnonzero(rng.random(rows) < 0.5)
    got[picked] = rng.random((len(picked), groups + 1), dtype=np.float32)
    before[picked] = got[picked]
    picked = np.flatnonzero(rng.random(rows) < 0.5)
    change = np.empty(groups + 1, dtype=np.float64)
    _compiled().estimate(registers, picked, got, change, *estimator.kernel_tables())
    assert np.array_equal(got[picked].view(np.uint32), want[picked].view(np.uint32))
    others = np.setdiff1d(np.arange(rows), picked)
    assert np.array_equal(got[others], before[others])
    # the changes summed as the reference sums them
    totals = [np.zeros(groups + 1)]
    _distances._add_changes(totals, before, picked, want[picked])
    assert np.array_equal(totals[-1], change)


@pytest.mark.parametrize(("n", "p", "seed"), [(0, 5, 0), (1, 5, 3), (5000, 5, 0), (5000, 8, 2**40)])
def test_the_same_initial_registers(n: int, p: int, seed: int) -> None:
    registers = np.full((n + 1, 1 << p), 99, dtype=np.uint8)
    salt = _distances._splitmix64(np.array([seed], dtype=np.uint64))[0]
    _compiled().initial(registers, p, int(salt))
    assert np.array_equal(registers[:n], _initial_registers(n, p, seed))
    assert not registers[n].any()


@pytest.mark.parametrize("name", ["dangling", "disconnected", "random 3000", "random 5000"])
def test_the_same_distance_statistics(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = dict(_graphs())[name]
    kwargs: dict[str, Any] = {"exact_limit": 0, "seed": 2, "runs": 2, "bfs_scc_min": 8}
    got = distance_statistics(graph, **kwargs)
    monkeypatch.setattr(_distances, "_hyperball", None)
    want = distance_statistics(graph, **kwargs)
    for figures in (got, want):  # what the two differ in: time and the lists' memory
        del figures["seconds"], figures["counter_bytes"]
    assert got == want


def test_bad_structure_is_refused() -> None:
    indptr = np.array([0, 1, 2], dtype=np.int64)
    with pytest.raises(ValueError, match="in \\[0, n\\)"):
        hyperball(2, indptr, np.array([0, 2], dtype=np.int64))
    with pytest.raises(ValueError, match="n \\+ 1 entries"):
        hyperball(3, indptr, np.array([0, 1], dtype=np.int64))

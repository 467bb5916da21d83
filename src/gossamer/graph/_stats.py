"""Statistics of a crawled web graph (all but distances, which `._distances` computes).

`graph_statistics(adj, pending=…, distances=…)` returns one JSON-ready dict; every figure is
exact except the power-law fits (estimates with a standard error) and the distance figures
when the distance function says they are estimated. `exact` maps each key to whether it is.
See docs/graph.md for what each figure means.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy import optimize, special
from scipy.sparse import csgraph

from ._rank import DAMPING, TOLERANCE, TOP_K, pagerank, top_pages

__all__ = [
    "DISTANCE_KEYS",
    "DistanceFunction",
    "degree_histogram",
    "fit_power_law",
    "format_table",
    "graph_statistics",
]

DistanceFunction = Callable[[sp.csr_array], Mapping[str, object]]
DISTANCE_KEYS = ("average_distance", "effective_diameter", "diameter")

# the power-law fit: xmin is chosen among at most this many candidate degrees (log-spaced),
# each needing a one-dimensional MLE (~30 Hurwitz zeta calls): 200 keep the fit under 50 ms
# (measured on the 1M-node benchmark graph) while spacing candidates ≤ 5 % apart up to 10^4.
_XMIN_CANDIDATES = 200
_MIN_TAIL = 50  # fewer degrees in the tail than this: no fit (CSN's advice, section 3.3)
POWER_LAW_METHOD = (
    "discrete power-law MLE (Clauset, Shalizi & Newman 2009, eq. 3.5, Hurwitz zeta); xmin "
    "minimises the Kolmogorov-Smirnov distance over at most 200 log-spaced candidate degrees "
    "(tail of at least 50); sigma = (alpha - 1) / sqrt(n_tail), the asymptotic standard "
    "error of alpha (eq. 3.2), not counting the uncertainty of xmin"
)


def degree_histogram(degrees: npt.NDArray[Any]) -> list[dict[str, int]]:
    """Counts in log bins: degree 0, then [1, 2), [2, 4), [4, 8), … ([lo, hi] inclusive)."""
    out = [{"min": 0, "max": 0, "count": int(np.count_nonzero(degrees == 0))}]
    positive = degrees[degrees > 0]
    if len(positive):
        exponent = np.frexp(positive.astype(np.float64))[1] - 1  # floor(log2(d))
        counts = np.bincount(exponent)
        for k, c in enumerate(counts):
            out.append({"min": 1 << k, "max": (1 << (k + 1)) - 1, "count": int(c)})
    return out


def _zeta(alpha: float, x: Any) -> Any:
    return special.zeta(alpha, x)


def _fit_at(values: npt.NDArray[np.float64], counts: npt.NDArray[np.int64], start: int) -> tuple[
    float, float
]:
    """(alpha, KS distance) of the discrete MLE on the tail values[start:]."""
    u = values[start:]
    c = counts[start:]
    n = float(c.sum())
    xmin = float(u[0])
    log_sum = float(np.dot(c, np.log(u)))

    def neg_log_likelihood(alpha: float) -> float:
        return n * math.log(_zeta(alpha, xmin)) + alpha * log_sum

    res = optimize.minimize_scalar(
        neg_log_likelihood, bounds=(1.0001, 10.0), method="bounded", options={"xatol": 1e-6}
    )
    alpha = float(res.x)
    z = _zeta(alpha, xmin)
    emp = np.cumsum(c) / n  # empirical CDF at each support value
    model_at = 1.0 - _zeta(alpha, u + 1.0) / z  # model CDF at u_j
    before_next = np.append(u[1:] - 1.0, u[-1])  # the model rises until the next support value
    model_before = 1.0 - _zeta(alpha, before_next + 1.0) / z
    ks = float(max(np.max(np.abs(emp - model_at)), np.max(np.abs(emp - model_before))))
    return alpha, ks


def fit_power_law(degrees: npt.NDArray[Any]) -> dict[str, object] | None:
    """The power-law fit of the positive `degrees` (see POWER_LAW_METHOD), or None when too
    few are positive."""
    positive = degrees[degrees > 0]
    if len(positive) < _MIN_TAIL:
        return None
    counts_by_degree = np.bincount(positive)
    values = np.flatnonzero(counts_by_degree)
    counts = counts_by_degree[values].astype(np.int64)
    tail = np.cumsum(counts[::-1])[::-1]  # degrees ≥ values[i]
    eligible = np.flatnonzero(tail >= _MIN_TAIL)
    eligible = eligible[eligible < len(values) - 1]  # at least two distinct values in the tail
    if not len(eligible):
        return None
    if len(eligible) > _XMIN_CANDIDATES:
        grid = np.geomspace(values[eligible[0]], values[eligible[-1]], _XMIN_CANDIDATES)
        picks = np.searchsorted(values[eligible], grid)
        eligible = np.unique(eligible[np.clip(picks, 0, len(eligible) - 1)])
    fvalues = values.astype(np.float64)
    best: tuple[float, float, int] | None = None
    for candidate in eligible.tolist():
        start = int(candidate)
        alpha, ks = _fit_at(fvalues, counts, start)
        if best is None or ks < best[1]:
            best = (alpha, ks, start)
    assert best is not None
    alpha, ks, chosen = best
    n_tail = int(tail[chosen])
    return {
        "alpha": round(alpha, 4),
        "sigma": round((alpha - 1.0) / math.sqrt(n_tail), 4),
        "xmin": int(values[chosen]),
        "n_tail": n_tail,
        "ks": round(ks, 4),
        "exact": False,
    }


def _degree_summary(degrees: npt.NDArray[Any]) -> dict[str, object]:
    return {
        "max": int(degrees.max()) if len(degrees) else 0,
        "mean": round(float(degrees.mean()), 4) if len(degrees) else 0.0,
        "histogram": degree_histogram(degrees),
        "power_law": fit_power_law(degrees),
    }


def _weak_components(
    scc_count: int, scc_labels: npt.NDArray[Any], rows: npt.NDArray[Any], cols: npt.NDArray[Any]
) -> tuple[int, int]:
    """(count, largest) of the weakly connected components, found on the condensation (one
    node per SCC, the edges between SCCs): a web graph's edges are mostly inside its giant
    SCC, so this graph is small. 0.9 s → 0.1 s on the 1M-node benchmark graph."""
    a, b = scc_labels[rows], scc_labels[cols]
    across = a != b
    k = int(scc_count)
    data = np.ones(int(np.count_nonzero(across)), dtype=np.int8)
    condensed = sp.csr_array((data, (a[across], b[across])), shape=(k, k))
    count, labels = csgraph.connected_components(condensed, connection="weak")
    sizes = np.bincount(labels, weights=np.bincount(scc_labels, minlength=k))
    return int(count), int(sizes.max())


def graph_statistics(
    adj: sp.csr_array | sp.csr_matrix,
    *,
    pending: int | None = None,
    distances: DistanceFunction | None = None,
    ids: Sequence[Any] | npt.NDArray[Any] | None = None,
    urls: Sequence[str | None] | None = None,
    top: int = TOP_K,
) -> dict[str, object]:
    """Every statistic of the graph whose adjacency is `adj` (n × n CSR, one entry per
    distinct edge): see docs/graph.md. `pending` (an online graph's links to pages not
    crawled) is reported as given; `distances`, when given, computes the distance figures;
    `ids` and `urls` (one per node, in node order) name the `top` pages of the ranking."""
    started = time.perf_counter()
    n = int(adj.shape[0])
    indptr, indices = adj.indptr, adj.indices
    out_degree = np.diff(indptr)
    in_degree = np.bincount(indices, minlength=n)
    rows = np.repeat(np.arange(n, dtype=np.int32), out_degree)
    if n:
        # csgraph converts its input to float64 (a copy of data, indices and indptr): a
        # float64 view sharing our index arrays is converted for free (0.9 → 0.7 s, 10M edges;
        # 80 MB while it runs)
        view = sp.csr_array(
            (np.ones(len(indices)), indices, indptr), shape=adj.shape, copy=False
        )
        scc_count, scc_labels = csgraph.connected_components(view, connection="strong")
        del view
        largest_scc = int(np.bincount(scc_labels).max())
        wcc_count, largest_wcc = _weak_components(scc_count, scc_labels, rows, indices)
    else:
        scc_count = wcc_count = largest_scc = largest_wcc = 0
    self_loops = int(np.count_nonzero(indices == rows))
    result: dict[str, object] = {
        "nodes": n,
        "edges": int(adj.nnz),
        "pending": pending,
        "self_loops": self_loops,
        "scc_count": int(scc_count),
        "largest_scc": largest_scc,
        "wcc_count": int(wcc_count),
        "largest_wcc": largest_wcc,
        "dangling": int(np.count_nonzero(out_degree == 0)),
        "in_degree": _degree_summary(in_degree),
        "out_degree": _degree_summary(out_degree),
    }
    exact: dict[str, object] = {key: True for key in result}
    exact["in_degree"] = exact["out_degree"] = {"histogram": True, "power_law": False}
    seconds = {"structure": round(time.perf_counter() - started, 3)}
    rank = pagerank(adj)
    result["pagerank"] = {
        "damping": DAMPING,
        "tolerance": TOLERANCE,
        "iterations": rank.iterations,
        "max": float(rank.values.max()) if n else None,
    }
    result.update(top_pages(rank.values, in_degree, out_degree, ids=ids, urls=urls, k=top))
    exact["pagerank"] = False  # within the tolerance (docs/graph.md, "Ranking")
    exact["top_pages"] = False
    exact["top_pages_by_in_degree"] = True
    seconds["pagerank"] = round(rank.seconds, 3)
    if distances is None:
        result.update(dict.fromkeys(DISTANCE_KEYS))
        result["distances"] = "not computed"
        exact.update(dict.fromkeys(DISTANCE_KEYS))
    else:
        started = time.perf_counter()
        figures = dict(distances(adj))
        given_exact = figures.pop("exact", None)
        result.update(figures)
        result["distances"] = "computed"
        if isinstance(given_exact, Mapping):
            exact.update(given_exact)
        else:
            keys = [k for k in figures if k.startswith(("average", "effective", "diameter"))]
            exact.update(dict.fromkeys(keys, given_exact))
        seconds["distances"] = round(time.perf_counter() - started, 3)
    result["exact"] = exact
    result["seconds"] = seconds
    return result


def _num(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


def plus_minus(value: float, error: float) -> str:
    """`value ± error`, the error to two significant digits and the value to the same
    decimals (6.939, 0.153 -> "6.94 ± 0.15"; 305692.3, 39740 -> "305,692 ± 39,740")."""
    decimals = max(0, 1 - math.floor(math.log10(error))) if error > 0 else 0
    return f"{value:,.{decimals}f} ± {error:,.{decimals}f}"


def format_table(stats: Mapping[str, Any]) -> str:
    """The statistics as a human table (figure, value, exact or estimated); an estimate
    with a standard error in `error` is shown with it (`value ± error`)."""
    exact = stats.get("exact", {})
    errors = stats.get("error") or {}
    rows: list[tuple[str, str, str]] = []

    def row(label: str, key: str, value: object = None, how: str | None = None) -> None:
        shown = stats.get(key) if value is None else value
        if how is None:
            flag = exact.get(key)
            how = "exact" if flag is True else "estimate" if flag is False else ""
        error = errors.get(f"{key}_standard_error") if value is None else None
        if isinstance(shown, int | float) and isinstance(error, int | float):
            rows.append((label, plus_minus(shown, error), how))
        else:
            rows.append((label, _num(shown), how))

    row("nodes", "nodes")
    row("edges", "edges")
    if stats.get("pending") is not None:
        row("pending edges", "pending")
    row("self-loops", "self_loops")
    row("strongly connected components", "scc_count")
    row("largest SCC (nodes)", "largest_scc")
    row("weakly connected components", "wcc_count")
    row("largest WCC (nodes)", "largest_wcc")
    row("dangling nodes (no out-edge)", "dangling")
    for key, label in (("in_degree", "in-degree"), ("out_degree", "out-degree")):
        deg = stats[key]
        row(f"{label} max", key, deg["max"], "exact")
        row(f"{label} mean", key, deg["mean"], "exact")
        fit = deg["power_law"]
        if fit is None:
            row(f"{label} power-law alpha", key, "too few degrees to fit", "")
        else:
            text = f"{fit['alpha']:.3f} ± {fit['sigma']:.3f} (xmin {fit['xmin']})"
            row(f"{label} power-law alpha", key, text, "estimate")
    if stats.get("distances") == "not computed":
        rows.append(("distances", "not computed", ""))
    else:
        for key in (*DISTANCE_KEYS, "reachable_pairs"):
            if key in stats:
                row(key.replace("_", " "), key)
        for key in ("diameter_lower_bound", "diameter_upper_bound"):
            if key in stats:  # they hold with certainty (docs/graph.md): not estimates
                row(key.replace("_", " "), key, how="bound")
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(r[1]) for r in rows)
    lines = [f"{a:<{width}}  {b:>{vwidth}}  {c}".rstrip() for a, b, c in rows]
    for key, label in (("in_degree", "in-degree"), ("out_degree", "out-degree")):
        bins = [b for b in stats[key]["histogram"] if b["count"]]
        cells = ", ".join(
            f"{b['min']}: {b['count']:,}" if b["min"] == b["max"] else
            f"{b['min']}-{b['max']}: {b['count']:,}"
            for b in bins
        )  # fmt: skip
        lines.append(f"{label} histogram (log bins): {cells}")
    lines.extend(_top_lines(stats))
    return "\n".join(lines)


def _top_lines(stats: Mapping[str, Any]) -> list[str]:
    """The ranking's lines: the top pages by PageRank, then by in-degree, each with its URL
    (or its id, for an edge list)."""
    rank = stats.get("pagerank")
    lines: list[str] = []
    for key, title in (
        ("top_pages", "top pages by PageRank"),
        ("top_pages_by_in_degree", "top pages by in-degree"),
    ):
        pages = stats.get(key)
        if not pages:
            continue
        if key == "top_pages" and isinstance(rank, Mapping):
            title += f" (damping {rank['damping']}, {rank['iterations']} iterations)"
        lines.append(f"{title}:")
        width = max(len(f"{p['in_degree']:,}") for p in pages)
        for i, p in enumerate(pages, 1):
            name = p["url"] if p.get("url") is not None else f"id {p['id']}"
            lines.append(
                f"{i:>4}  PageRank {p['pagerank']:.6f}  in-degree {p['in_degree']:>{width},}"
                f"  {name}"
            )
    return lines

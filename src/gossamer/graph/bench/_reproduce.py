"""`gossamer graphbench reproduce`: SPAWC's Figure 9 (APSD) and Figure 15 (SCC) again, with
the memory of each algorithm, on graphs that double in size until each algorithm hits the
timeout (docs/graphbench.md, "Reproducing SPAWC's findings").

For each family and kind of graph, n doubles; every algorithm still in the race runs `trials`
times on the same graph and leaves at its first timeout or error. Every run up to n = 512 is
validated against the reference: a wrong answer is marked and makes the command exit non-zero.
The whole run is bounded by `budget` seconds. It writes `apsd.md`, `scc.md`, a PNG per kind and
`results.json` into DIR."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ._api import Family, names
from ._graphs import EdgeSequence, ausiello, complete, dense, road, sparse, web
from ._harness import RunResult, run

__all__ = ["APSD_FIGURE", "SCC_FIGURE", "ReproduceOptions", "reproduce"]

APSD_FIGURE: Final = ("algorithm1", "ausiello")
SCC_FIGURE: Final = (
    "algorithm1-8", "algorithm1-16", "algorithm1-32", "algorithm1-64", "algorithm2",
    "algorithm3", "tarjan", "yellin", "naive",
)  # fmt: skip
VALIDATE_UP_TO: Final = 512


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of graph: its name, generator, and the largest n tried (full run)."""

    name: str
    title: str
    make: Callable[[int], EdgeSequence]
    largest: int


KINDS: Final[dict[Family, tuple[Kind, ...]]] = {
    "apsd": (
        Kind("ausiello", "Θ(n³)-update sequences (Appendix C.1)", ausiello, 8192),
        Kind("sparse", "random sparse, m = 3n", sparse, 16384),
        Kind("road", "road network (grid substitute for Georgia/Idaho)", road, 16384),
        Kind("web", "crawled web graph (cnr-2000, BFS order)", web, 16384),
        Kind("complete", "complete graphs", complete, 1024),
    ),
    "scc": (
        Kind("sparse", "random sparse, m = 3n", sparse, 65536),
        Kind("road", "road network (grid substitute for Georgia/Idaho)", road, 65536),
        Kind("web", "crawled web graph (cnr-2000, BFS order)", web, 65536),
        Kind("dense", "random dense, density 0.5", dense, 2048),
        Kind("complete", "complete graphs", complete, 1024),
    ),
}


@dataclass(frozen=True, slots=True)
class ReproduceOptions:
    out: Path
    quick: bool = False
    timeout: float | None = None  # default: 5 s, or 2 s with quick
    budget: float = 25 * 60.0
    algorithms: tuple[str, ...] | None = None  # None: SPAWC's figures' (algorithms_of)

    @property
    def run_timeout(self) -> float:
        return self.timeout if self.timeout is not None else (2.0 if self.quick else 5.0)

    @property
    def trials(self) -> int:
        return 1 if self.quick else 3  # SPAWC ran 3 trials

    @property
    def first(self) -> int:
        return 8 if self.quick else 32

    def largest(self, kind: Kind) -> int:
        return min(kind.largest, 32) if self.quick else kind.largest


def algorithms_of(family: Family, only: tuple[str, ...] | None = None) -> list[str]:
    """`only`'s names registered in `family`; without `only`, the algorithms of SPAWC's figure
    that are registered, else every registered one."""
    registered = names(family)
    if only is not None:
        return [a for a in only if a in registered]
    figure = APSD_FIGURE if family == "apsd" else SCC_FIGURE
    chosen = [a for a in figure if a in registered]
    return chosen or registered


@dataclass(slots=True)
class Series:
    """The runs of one family on one kind of graph, size by size."""

    family: Family
    kind: Kind
    algorithms: list[str]
    runs: list[RunResult]
    note: str = ""


def _run_kind(family: Family, kind: Kind, options: ReproduceOptions, deadline: float) -> Series:
    algorithms = algorithms_of(family, options.algorithms)
    series = Series(family, kind, algorithms, [])
    racing = list(algorithms)
    n = options.first
    while racing and n <= options.largest(kind):
        if time.monotonic() > deadline:
            series.note = f"stopped at n = {n}: the run's time budget was spent"
            break
        try:
            seq = kind.make(n)
        except ValueError as exc:  # ausiello without _apsd, web past the graph's size
            series.note = f"n = {n}: {exc}"
            break
        for algorithm in list(racing):
            result = run(
                family, algorithm, seq, trials=options.trials, timeout=options.run_timeout,
                validate=n <= VALIDATE_UP_TO,
            )  # fmt: skip
            series.runs.append(result)
            if result.status != "ok":
                racing.remove(algorithm)
        n *= 2
    return series


def _cell(result: RunResult | None) -> str:
    if result is None:
        return ""
    if result.status == "ok":
        mean, stdev = result.mean or 0.0, result.stdev or 0.0
        return f"{mean:.4g} ± {stdev:.2g}" if stdev else f"{mean:.4g}"
    if result.status == "failed":
        return f"**WRONG** ({result.mean or 0.0:.4g})"
    return result.status


def _memory_cell(result: RunResult | None) -> str:
    if result is None or result.memory is None:
        return ""
    return f"{result.memory / 2**20:.1f}"


def _table(series: Series, cell: Callable[[RunResult | None], str]) -> list[str]:
    sizes = sorted({r.n for r in series.runs})
    found = {(r.n, r.algorithm): r for r in series.runs}
    lines = ["| n | m | " + " | ".join(series.algorithms) + " |"]
    lines.append("|---:|---:|" + "---:|" * len(series.algorithms))
    for n in sizes:
        m = next(r.m for r in series.runs if r.n == n)
        cells = [cell(found.get((n, a))) for a in series.algorithms]
        lines.append(f"| {n} | {m} | " + " | ".join(cells) + " |")
    return lines


def _largest_finished(series: Series, algorithm: str) -> str:
    done = [r.n for r in series.runs if r.algorithm == algorithm and r.status == "ok"]
    stopped = [r for r in series.runs if r.algorithm == algorithm and r.status != "ok"]
    text = str(max(done)) if done else "none"
    if stopped:
        text += f" ({stopped[0].status} at {stopped[0].n})"
    return text


def _markdown(family: Family, all_series: list[Series], options: ReproduceOptions) -> str:
    title = "all-pairs shortest distances (SPAWC's Figure 9)" if family == "apsd" else (
        "strongly connected components (SPAWC's Figures 14 and 15)"
    )
    lines = [
        f"# GraphBench: {title}",
        "",
        f"Written by `gossamer graphbench reproduce{' --quick' if options.quick else ''}`: "
        f"{options.trials} trial(s) per run, timeout {options.run_timeout:g} s per trial, "
        f"mean seconds ± stdev to insert every edge; runs up to n = {VALIDATE_UP_TO} validated "
        "against scipy (**WRONG** marks a difference). Memory: the child's peak resident set "
        "above its start, MiB.",
        "",
    ]
    for series in all_series:
        lines += [f"## {series.kind.name}: {series.kind.title}", ""]
        if series.note:
            lines += [f"Note: {series.note}.", ""]
        if not series.runs:
            lines += ["(no run)", ""]
            continue
        lines += [f"![{family} {series.kind.name}]({family}-{series.kind.name}.png)", ""]
        lines += ["Seconds:", "", *_table(series, _cell), ""]
        lines += ["Peak memory (MiB):", "", *_table(series, _memory_cell), ""]
        lines += ["Largest n finished within the timeout:", ""]
        lines += ["| algorithm | largest n |", "|---|---|"]
        lines += [f"| {a} | {_largest_finished(series, a)} |" for a in series.algorithms]
        lines.append("")
    return "\n".join(lines)


def _plot(series: Series, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for algorithm in series.algorithms:
        done = [r for r in series.runs if r.algorithm == algorithm and r.status == "ok"]
        if not done:
            continue
        ns = [r.n for r in done]
        left.plot(ns, [max(r.mean or 0.0, 1e-6) for r in done], marker="o", label=algorithm)
        right.plot(
            ns, [max((r.memory or 0) / 2**20, 0.01) for r in done], marker="o", label=algorithm
        )
    for axis, ylabel in ((left, "seconds (mean)"), (right, "peak memory (MiB)")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("n (vertices)")
        axis.set_ylabel(ylabel)
        axis.grid(True, which="both", alpha=0.3)
    left.set_title(f"{series.family}: {series.kind.title}", fontsize=9)
    right.set_title("lines end where the timeout was hit", fontsize=9)
    handles, labels = left.get_legend_handles_labels()
    if handles:
        right.legend(handles, labels, fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


@dataclass(frozen=True, slots=True)
class ReproduceResult:
    files: list[Path]
    wrong: list[str]  # "family algorithm graph" of each run whose answer was wrong
    seconds: float


def reproduce(options: ReproduceOptions, progress: Callable[[str], None] | None = None) -> (
    ReproduceResult
):
    """Run every series, write the tables, plots and results.json; see the module docstring."""
    start = time.monotonic()
    deadline = start + options.budget
    options.out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    everything: list[RunResult] = []
    for family in ("apsd", "scc"):
        all_series = []
        for kind in KINDS[family]:
            if not algorithms_of(family, options.algorithms):
                break
            series = _run_kind(family, kind, options, deadline)
            all_series.append(series)
            everything += series.runs
            if progress is not None:
                stops = ", ".join(f"{a} {_largest_finished(series, a)}" for a in series.algorithms)
                progress(f"{family} {kind.name}: largest n finished: {stops or 'none'}")
            if series.runs:
                png = options.out / f"{family}-{kind.name}.png"
                _plot(series, png)
                files.append(png)
        md = options.out / f"{family}.md"
        if not all_series:
            text = f"# GraphBench: {family}\n\nNo {family} algorithm is registered.\n"
        else:
            text = _markdown(family, all_series, options)
        md.write_text(text, encoding="utf-8")
        files.append(md)
    results = options.out / "results.json"
    results.write_text(
        json.dumps([r.as_json() for r in everything], indent=1, default=_finite) + "\n",
        encoding="utf-8",
    )
    files.append(results)
    wrong = [f"{r.family} {r.algorithm} {r.graph}" for r in everything if r.status == "failed"]
    return ReproduceResult(files, wrong, time.monotonic() - start)


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"not JSON: {value!r}")

"""What every experiment shares: options, the result record and the writers."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run an experiment: where its files go, the small `quick` size, the web's seed."""

    out: Path
    quick: bool = False
    seed: int = 1


@dataclass(frozen=True, slots=True)
class ExperimentResult:
    """What a run produced: the files written (JSON, Markdown, PNG) and a few headline
    figures for the command line to print."""

    name: str
    files: tuple[Path, ...]
    headline: Mapping[str, str]
    seconds: float


#: An experiment's entry point: computes everything, writes its files into `options.out`.
Runner = Callable[[RunOptions], ExperimentResult]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table; numbers already formatted by the caller."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
    return "\n".join(lines) + "\n"


def markdown_document(parts: Sequence[str]) -> str:
    """Markdown blocks joined with one blank line between them, ending in a newline."""
    return "\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"


def write_json(path: Path, data: Mapping[str, Any]) -> Path:
    """`data` as indented JSON (non-finite floats refused: JSON has none)."""
    path.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
    return path


def new_figure(width: float = 10.0, height: float = 4.0) -> Figure:
    """A matplotlib figure on the Agg backend (no display), without pyplot's global state."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save_png(fig: Figure, path: Path) -> Path:
    """Write `fig` as PNG (fixed DPI and no timestamp metadata, so reruns give equal files)."""
    fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    return path


def machine() -> dict[str, Any]:
    """The machine a run happened on, for the record."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


@dataclass(slots=True)
class Outputs:
    """Files experiment `name` writes into one directory, in the order written. Made when
    the run starts: `started` is the clock `finish` measures the run's seconds from."""

    out: Path
    name: str
    started: float = field(default_factory=time.perf_counter)
    files: list[Path] = field(default_factory=list)

    def path(self, name: str) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        p = self.out / name
        self.files.append(p)
        return p

    def finish(
        self,
        data: dict[str, Any],
        markdown: Callable[[dict[str, Any]], str],
        headline: Mapping[str, str],
    ) -> ExperimentResult:
        """Record the run in `data` (seconds since `started`, the machine), write
        <name>.json and <name>.md (`markdown(data)`); the result, with every file written."""
        seconds = time.perf_counter() - self.started
        data["run"] = {"seconds": round(seconds, 2), "machine": machine()}
        write_json(self.path(f"{self.name}.json"), data)
        self.path(f"{self.name}.md").write_text(markdown(data))
        return ExperimentResult(self.name, tuple(self.files), headline, seconds)

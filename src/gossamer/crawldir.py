"""The crawl directory: where a crawl keeps its files, and its lock. The names are spelled
here and nowhere else: `CrawlDir(path)` gives each file's path (docs/crawler/outputs.md).

    crawl.json            the settings (also the `testweb audit --crawl` contract)
    frontier.sqlite       queues, dedupe, leases, host state (WAL)
    robots.sqlite         robots.txt answers, shared by the workers (WAL)
    neardup.sqlite        the pages' text fingerprints, shared by the workers (WAL)
    warc/                 WARC 1.1 files, per-record gzip, rotated by size
    warc/index.cdxj       their CDXJ index (pywb), written as each run ends
    warc/cdx/             each WARC file's own index, merged into index.cdxj
    crawl.log.jsonl       one line per fetch, every run appended
    gossamer.log.jsonl    the crawl's diagnostics (logs.py)
    graph/                nodes.tsv + edges.tsv (a pool: nodes-w0.tsv + edges-w0.tsv, …)
    graph/stats.json      the live graph's statistics
    graph/follow.lock     held by the live graph's process
    graph/stats-on-demand.json  an ended crawl's graph statistics the dashboard computed
    stats.json            final statistics of the last run (a pool's workers: stats-w0.json, …)
    runs.jsonl            a line as each run starts and ends (`gossamer report` sums the runs)
    lock                  held while a crawler runs in the directory (its pid inside)
    locks/                per-IP slots of pool workers run by hand (`gossamer crawl-worker`)
    workers/<id>.json     each crawling process's heartbeat (engine/heartbeat.py)
    control.json          a running pool's worker count (`gossamer workers --scale N DIR`)
    worker.json           a cluster worker's directory only: its id, crawl and machine
    resolve.txt           a cluster worker's directory only: the crawl's --resolve lines
    items/                an extractor's items, a part per worker (items-main.jsonl, …)
    items.jsonl           … merged as each run ends, each page's items once

`ClusterDir(path)`: the -o directory of a cluster crawl's workers on one machine: a crawl
directory per worker (`w1/`, `w2/`, …), `logs/` (the output of local workers: detached
ones', and attached ones' while `crawl --redis` shows its progress; `worker-<pid>.log`;
workers started over SSH by `crawl --machines`: `machine-<machine>-<k>.log`),
`graph/` (the graph consumer's state: `follow.log`, and per crawl `<id>/journal.bin` and
`<id>/stats.json`), `items-<id>.jsonl`, an extractor's items of the crawl `<id>` merged
from its workers' parts by `gossamer report`, and after `gossamer gather` every machine's
worker directories and `index.cdxj`, the merged CDXJ index of their WARCs.

Imports nothing of gossamer, so every package may use it.
"""

from __future__ import annotations

import fcntl
import fnmatch
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "CDX_INDEX",
    "CDX_PARTS",
    "CONTROL",
    "CRAWL_LOG",
    "DIAGNOSTICS",
    "FOLLOW_LOCK",
    "FOLLOW_LOG",
    "FRONTIER",
    "GRAPH_DIR",
    "GRAPH_EDGE_FILES",
    "GRAPH_NODE_FILES",
    "GRAPH_ON_DEMAND",
    "GRAPH_STATS",
    "HEARTBEATS",
    "IP_LOCKS",
    "ITEMS",
    "ITEMS_DIR",
    "JOURNAL",
    "LOCK",
    "MANIFEST",
    "NEAR_DUPS",
    "RESOLVE",
    "ROBOTS",
    "RUNS",
    "SPAWN_LOGS",
    "STATS",
    "WARC_DIR",
    "WORKER_RECORD",
    "ClusterDir",
    "CrawlDir",
    "CrawlError",
    "dir_lock",
    "flock_held",
    "graph_part",
    "stats_part",
]

MANIFEST: Final = "crawl.json"
FRONTIER: Final = "frontier.sqlite"
ROBOTS: Final = "robots.sqlite"
NEAR_DUPS: Final = "neardup.sqlite"
WARC_DIR: Final = "warc"
#: in the WARC directory: the index of every WARC file, and the directory of each one's
CDX_INDEX: Final = "index.cdxj"
CDX_PARTS: Final = "cdx"
CRAWL_LOG: Final = "crawl.log.jsonl"
_CRAWL_LOGS: Final = "crawl*.log.jsonl"
DIAGNOSTICS: Final = "gossamer.log.jsonl"
GRAPH_DIR: Final = "graph"
_NODES: Final = "nodes"
_EDGES: Final = "edges"
_TSV: Final = ".tsv"
#: in the graph directory: every writer part's nodes file, and edges file (globs)
GRAPH_NODE_FILES: Final = f"{_NODES}*{_TSV}"
GRAPH_EDGE_FILES: Final = f"{_EDGES}*{_TSV}"
#: a live graph's statistics, in the graph directory (or a graph consumer's state)
GRAPH_STATS: Final = "stats.json"
FOLLOW_LOCK: Final = "follow.lock"
#: an ended crawl's graph statistics computed by the dashboard, in the graph directory
GRAPH_ON_DEMAND: Final = "stats-on-demand.json"
STATS: Final = "stats.json"
_STATS_PART: Final = "stats-"
_JSON: Final = ".json"
RUNS: Final = "runs.jsonl"
LOCK: Final = "lock"
IP_LOCKS: Final = "locks"
HEARTBEATS: Final = "workers"
CONTROL: Final = "control.json"
WORKER_RECORD: Final = "worker.json"
RESOLVE: Final = "resolve.txt"
SPAWN_LOGS: Final = "logs"
_SPAWN_LOG: Final = "worker-"  # in the logs directory: worker-<pid>.log
_MACHINE_LOG: Final = "machine-"  # … and machine-<machine>-<k>.log (a worker over SSH)
_LOG: Final = ".log"
FOLLOW_LOG: Final = "follow.log"
#: a graph consumer's journal, in its state directory (cluster/stream.py)
JOURNAL: Final = "journal.bin"
ITEMS: Final = "items.jsonl"  # an extractor's items, merged from the workers' parts
ITEMS_DIR: Final = "items"  # their parts: items-<part>.jsonl, appended by each worker
_ITEMS_PART: Final = "items-"
_JSONL: Final = ".jsonl"


#: every top-level entry a crawl directory's layout may hold (names and globs): the files
#: above, a database's own files beside it (`frontier.sqlite-wal`, `-shm`, `-writer.lock`, …)
_LAYOUT_ENTRIES: Final = (
    MANIFEST,
    FRONTIER,
    f"{FRONTIER}-*",
    ROBOTS,
    f"{ROBOTS}-*",
    NEAR_DUPS,
    f"{NEAR_DUPS}-*",
    WARC_DIR,
    _CRAWL_LOGS,
    DIAGNOSTICS,
    GRAPH_DIR,
    STATS,
    f"{_STATS_PART}*{_JSON}",
    RUNS,
    LOCK,
    IP_LOCKS,
    HEARTBEATS,
    CONTROL,
    WORKER_RECORD,
    RESOLVE,
    ITEMS,
    f"{ITEMS}.*",
    ITEMS_DIR,
)


class CrawlError(RuntimeError):
    """A crawl could not start or continue; the message says why. Nothing is lost."""


@dataclass(frozen=True, slots=True)
class CrawlDir:
    """The files of the crawl directory `path` (module docstring). Paths only: nothing is
    read or made until a method says so."""

    path: Path

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST

    @property
    def frontier(self) -> Path:
        return self.path / FRONTIER

    @property
    def robots(self) -> Path:
        return self.path / ROBOTS

    @property
    def near_dups(self) -> Path:
        return self.path / NEAR_DUPS

    @property
    def warc_dir(self) -> Path:
        return self.path / WARC_DIR

    @property
    def cdx_index(self) -> Path:
        return self.path / WARC_DIR / CDX_INDEX

    @property
    def crawl_log(self) -> Path:
        return self.path / CRAWL_LOG

    def crawl_logs(self) -> list[Path]:
        """Every crawl log in the directory (`crawl*.log.jsonl`), sorted."""
        return sorted(self.path.glob(_CRAWL_LOGS))

    @property
    def diagnostics(self) -> Path:
        return self.path / DIAGNOSTICS

    @property
    def graph_dir(self) -> Path:
        return self.path / GRAPH_DIR

    def graph_nodes(self, part: str = "") -> Path:
        """`graph/nodes.tsv`, or the writer `part`'s `graph/nodes-<part>.tsv`."""
        return self.graph_dir / (_NODES + (f"-{part}" if part else "") + _TSV)

    def graph_edges(self, part: str = "") -> Path:
        """`graph/edges.tsv`, or the writer `part`'s `graph/edges-<part>.tsv`."""
        return self.graph_dir / (_EDGES + (f"-{part}" if part else "") + _TSV)

    def graph_node_files(self) -> list[Path]:
        """Every part's nodes file (`graph/nodes*.tsv`), sorted."""
        return sorted(self.graph_dir.glob(GRAPH_NODE_FILES))

    def graph_edge_files(self) -> list[Path]:
        """Every part's edges file (`graph/edges*.tsv`), sorted."""
        return sorted(self.graph_dir.glob(GRAPH_EDGE_FILES))

    @property
    def live_graph_stats(self) -> Path:
        return self.graph_dir / GRAPH_STATS

    @property
    def graph_on_demand(self) -> Path:
        """An ended crawl's graph statistics, computed on demand (dashboard/_graphstats.py)."""
        return self.graph_dir / GRAPH_ON_DEMAND

    @property
    def follow_lock(self) -> Path:
        """Held (flock) by an embedded crawl's live-graph child for its whole life, and by the
        fork computing the final statistics after the crawl (runner/livegraph.py)."""
        return self.graph_dir / FOLLOW_LOCK

    @property
    def stats(self) -> Path:
        return self.path / STATS

    @property
    def items(self) -> Path:
        """The extractor's items, one JSON line each, merged from the parts."""
        return self.path / ITEMS

    @property
    def items_dir(self) -> Path:
        return self.path / ITEMS_DIR

    def items_part(self, part: str = "") -> Path:
        """The items a worker appends: `items/items-<part>.jsonl` (`items-main.jsonl` for
        the embedded crawl's one worker and a cluster worker)."""
        return self.items_dir / f"{_ITEMS_PART}{part or 'main'}{_JSONL}"

    def items_parts(self) -> list[Path]:
        """Every worker's items part, sorted by name."""
        return sorted(self.items_dir.glob(f"{_ITEMS_PART}*{_JSONL}"))

    def worker_stats(self, part: str) -> Path:
        """A pool worker's statistics, `stats-<part>.json`."""
        return self.path / f"{_STATS_PART}{part}{_JSON}"

    def worker_stats_files(self) -> list[Path]:
        """Every pool worker's statistics (`stats-w*.json`), sorted by name."""
        return sorted(self.path.glob(f"{_STATS_PART}w*{_JSON}"))

    @property
    def runs(self) -> Path:
        return self.path / RUNS

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    def locked(self) -> bool:
        """Whether a crawler holds the directory's lock now."""
        return flock_held(self.lock)

    def lock_pid(self) -> int | None:
        """The pid in the lock file: the process that holds it, or held it last."""
        try:
            return int(self.lock.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    @property
    def ip_locks(self) -> Path:
        """The per-IP slots' lock files of pool workers run by hand (engine/ipgate.py)."""
        return self.path / IP_LOCKS

    @property
    def heartbeats(self) -> Path:
        return self.path / HEARTBEATS

    def heartbeat(self, worker_id: str) -> Path:
        return self.heartbeats / f"{worker_id}{_JSON}"

    @property
    def control(self) -> Path:
        return self.path / CONTROL

    @property
    def worker_record(self) -> Path:
        return self.path / WORKER_RECORD

    @property
    def resolve_file(self) -> Path:
        return self.path / RESOLVE

    def entries(self) -> tuple[list[Path], list[Path]]:
        """The directory's top-level entries, sorted: (those of the layout, the others).
        OSError when it cannot be read."""
        ours: list[Path] = []
        others: list[Path] = []
        for entry in sorted(self.path.iterdir()):
            layout = any(fnmatch.fnmatchcase(entry.name, p) for p in _LAYOUT_ENTRIES)
            (ours if layout else others).append(entry)
        return ours, others


@dataclass(frozen=True, slots=True)
class ClusterDir:
    """The -o directory of a cluster crawl's workers on one machine (module docstring)."""

    path: Path

    def worker(self, worker_id: str) -> CrawlDir:
        return CrawlDir(self.path / worker_id)

    def workers(self) -> list[CrawlDir]:
        """The workers' directories (`w*/`; a worker's holds its `worker_record`), sorted."""
        return [CrawlDir(d) for d in sorted(self.path.glob("w*")) if d.is_dir()]

    @property
    def spawn_logs(self) -> Path:
        return self.path / SPAWN_LOGS

    def spawn_log(self, pid: int) -> Path:
        """The output (stdout and stderr) of the local worker of process id `pid`."""
        return self.spawn_logs / f"{_SPAWN_LOG}{pid}{_LOG}"

    def machine_log(self, machine: str, k: int) -> Path:
        """The output of the k-th worker started over SSH on `machine` (`[user@]host[:port]`,
        its other characters than letters, digits and `.-_` as `_`)."""
        safe = "".join(c if c.isalnum() or c in ".-_" else "_" for c in machine)
        return self.spawn_logs / f"{_MACHINE_LOG}{safe}-{k}{_LOG}"

    @property
    def merged_index(self) -> Path:
        """The CDXJ index of every worker's WARCs (`gossamer gather`), its file names
        relative to this directory."""
        return self.path / CDX_INDEX

    @property
    def graph_state(self) -> Path:
        """The graph consumer's state directory (`gossamer graph follow --state`)."""
        return self.path / GRAPH_DIR

    @property
    def follow_log(self) -> Path:
        return self.graph_state / FOLLOW_LOG

    def items(self, crawl_id: str) -> Path:
        """The items of the crawl `crawl_id`'s workers here, merged (`gossamer report`)."""
        return self.path / f"{_ITEMS_PART}{crawl_id}{_JSONL}"


def graph_part(path: Path) -> str:
    """The writer part a graph file belongs to: "" for `nodes.tsv`, "w0" for `edges-w0.tsv`."""
    return path.name.removeprefix(_NODES).removeprefix(_EDGES).removesuffix(_TSV).lstrip("-")


def stats_part(path: Path) -> str:
    """The pool worker a statistics part belongs to: "w0" for `stats-w0.json`."""
    return path.stem.removeprefix(_STATS_PART)


def flock_held(path: Path) -> bool:
    """Whether a process holds an exclusive flock on `path` (False when there is no such
    file): a shared lock tried on the file opened read-only, neither created nor changed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock taken, if any
    return False


@contextmanager
def dir_lock(out: Path) -> Iterator[None]:
    """Hold the crawl directory's lock, writing this process's pid into it; CrawlError when
    another process holds it."""
    path = CrawlDir(out).lock
    fh = path.open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise CrawlError(f"another crawler is running in {out} (lock held)") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()

"""What a worker costs its machine (ResourceSampler) and the --disk-margin check (DiskGuard)."""

from __future__ import annotations

from pathlib import Path

from gossamer.cluster.control import format_status, human_bytes, machine_totals
from gossamer.cluster.members import WorkerStatus
from gossamer.engine.machine import MB, DiskGuard, ResourceSampler, disk_free, rss_bytes


def test_a_sample_measures_cpu_and_bytes_over_the_interval(tmp_path: Path) -> None:
    now = [100.0]
    cpu = [5.0]
    sampler = ResourceSampler(tmp_path, clock=lambda: now[0], cpu=lambda: cpu[0])
    now[0], cpu[0] = 102.0, 6.0  # one CPU second in two seconds
    s = sampler.sample(4000, 1000)
    assert s.cpu_percent == 50.0
    assert (s.bytes_in_per_s, s.bytes_out_per_s) == (2000.0, 500.0)
    assert s.rss_bytes > MB
    assert s.disk_free_bytes is not None and s.disk_free_bytes > 0
    now[0] = 104.0
    s = sampler.sample(4000, 1000)  # nothing since
    assert (s.cpu_percent, s.bytes_in_per_s, s.bytes_out_per_s) == (0.0, 0.0, 0.0)


def test_disk_free_reads_the_nearest_existing_directory(tmp_path: Path) -> None:
    assert disk_free(tmp_path / "not" / "yet") == disk_free(tmp_path)
    assert rss_bytes() > 0


def test_the_guard_trips_under_the_margin_and_stays_tripped(tmp_path: Path) -> None:
    free = [50 * MB]
    now = [0.0]
    guard = DiskGuard(tmp_path, 20 * MB, every=1.0, clock=lambda: now[0], free=lambda _: free[0])
    assert not guard.low()
    free[0] = 10 * MB
    assert not guard.low()  # read at most every second
    now[0] = 1.0
    assert guard.low()
    free[0] = 50 * MB
    now[0] = 5.0
    assert guard.low()  # latched: the worker stops
    assert "only 10.0 MB free" in guard.message() and "margin of 20 MB" in guard.message()
    off = DiskGuard(tmp_path, 0, free=lambda _: 0)
    assert not off.low()


def test_status_shows_resources_per_worker_and_per_machine() -> None:
    a = WorkerStatus("w1", "m1", 1, "crawling", cpu_percent=40.0, rss_bytes=50_000_000,
                     disk_free_bytes=9_000_000, bytes_in_per_s=2e6, bytes_out_per_s=1e3,
                     disk_low=True)  # fmt: skip
    b = WorkerStatus("w2", "m1", 2, "crawling", cpu_percent=30.0, rss_bytes=60_000_000,
                     disk_free_bytes=7_000_000_000, bytes_in_per_s=1e6)  # fmt: skip
    c = WorkerStatus("w3", "m2", 3, "idle", cpu_percent=5.0, rss_bytes=40_000_000)
    machines = machine_totals([a, b, c])
    assert [m["machine"] for m in machines] == ["m1", "m2"]
    m1 = machines[0]
    assert (m1["workers"], m1["cpu_percent"], m1["rss_bytes"]) == (2, 70.0, 110_000_000)
    assert (m1["disk_free_bytes"], m1["bytes_in_per_s"], m1["disk_low"]) == (9_000_000, 3e6, 1)
    assert machines[1]["disk_free_bytes"] is None
    data = {
        "crawl": {"id": "c", "state": "running", "partition": {"name": "dynamic"},
                  "created": 0.0, "max_pages": None, "heartbeat_ttl": 5.0},
        "frontier": None, "frontier_error": "x",
        "totals": {"pages_per_s": 0.0, "pages_per_s_since_start": 0.0, "workers": 3},
        "workers": [{**{k: getattr(w, k) for k in w.__dataclass_fields__}, "hosts": [],
                     "beat_age_s": 0.5} for w in (a, b, c)],
        "machines": machines,
        "server_time": 10.0,
    }  # fmt: skip
    text = format_status(data)
    assert "CPU  RSS      DISK FREE" in text
    assert "9.0 MB LOW" in text
    assert "m1       2        70%  110.0 MB  9.0 MB LOW (1 stopped)  3.0 MB  1.0 kB" in text
    assert human_bytes(None) == "-" and human_bytes(999) == "999 B"

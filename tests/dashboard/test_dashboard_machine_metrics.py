"""/metrics carries what each live worker costs its machine."""

from __future__ import annotations

from prometheus_client import generate_latest

from gossamer.dashboard._metrics import metrics_registry


def test_live_workers_resources_are_gauges() -> None:
    def snapshot() -> dict[str, object]:
        worker = {"id": "w1", "machine": "m1", "state": "crawling", "pages": 5,
                  "pages_per_s": 1.0, "errors": 0, "beat_age_s": 0.4, "cpu_percent": 42.5,
                  "rss_bytes": 123, "disk_free_bytes": 456, "bytes_in_per_s": 7.0,
                  "bytes_out_per_s": 8.0}  # fmt: skip
        dead = {**worker, "id": "w2", "state": "dead"}
        return {
            "crawl": {"id": "c1", "state": "running", "max_pages": None},
            "totals": {"pages": 5, "requests": 5, "bytes": 0, "errors": 0, "pages_per_s": 1.0,
                       "workers": 1},
            "workers": [worker, dead],
        }  # fmt: skip

    text = generate_latest(metrics_registry(snapshot)).decode()
    key = 'crawl="c1",machine="m1",worker="w1"'
    for line in (
        f"gossamer_worker_cpu_percent{{{key}}} 42.5",
        f"gossamer_worker_resident_memory_bytes{{{key}}} 123.0",
        f"gossamer_worker_disk_free_bytes{{{key}}} 456.0",
        f"gossamer_worker_received_bytes_per_second{{{key}}} 7.0",
        f"gossamer_worker_sent_bytes_per_second{{{key}}} 8.0",
    ):
        assert line in text, text
    assert 'gossamer_worker_cpu_percent{crawl="c1",machine="m1",worker="w2"}' not in text

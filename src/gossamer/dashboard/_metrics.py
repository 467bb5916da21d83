"""`/metrics`: the status snapshot in Prometheus' text format (prometheus-client).

A custom Collector turns one snapshot into metric families at each scrape, in a registry of
the dashboard's own (`metrics_registry`): nothing is registered in prometheus-client's global
REGISTRY, so two dashboards (or tests) in one process never clash, and no counter is kept
here — the crawl's files or Redis hold the truth, the scrape reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

__all__ = ["StatusCollector", "metrics_registry"]

#: the live graph's figures exported as gauges (docs/graph.md)
GRAPH_GAUGES = (
    ("nodes", "pages in the web graph"),
    ("edges", "links in the web graph"),
    ("pending", "links to pages not crawled yet"),
    ("scc_count", "strongly connected components"),
    ("largest_scc", "nodes of the largest strongly connected component"),
    ("dangling", "nodes without out-links"),
    ("average_distance", "average distance between connected nodes"),
    ("diameter", "graph diameter"),
    ("diameter_lower_bound", "a lower bound of the graph diameter (sampled graphs)"),
    ("effective_diameter", "the graph's effective diameter (90th percentile distance)"),
)
#: the degree distributions' figures exported as gauges (graph.in_degree, graph.out_degree)
DEGREE_GAUGES = (("max", "largest"), ("mean", "mean"))


class StatusCollector(Collector):
    """The metric families of one snapshot, taken at each scrape."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self._snapshot()
        crawl, totals = s["crawl"], s["totals"]
        labels = ["crawl"]
        cid = [str(crawl["id"])]

        def gauge(name: str, doc: str, value: float | None) -> Iterator[Metric]:
            if value is not None:
                g = GaugeMetricFamily(f"gossamer_{name}", doc, labels=labels)
                g.add_metric(cid, float(value))
                yield g

        def counter(name: str, doc: str, value: float | None) -> Iterator[Metric]:
            if value is not None:
                c = CounterMetricFamily(f"gossamer_{name}", doc, labels=labels)
                c.add_metric(cid, float(value))
                yield c

        running = GaugeMetricFamily(
            "gossamer_crawl_state", "1 for the crawl's current state", labels=["crawl", "state"]
        )
        running.add_metric([*cid, str(crawl["state"])], 1.0)
        yield running
        yield from counter("pages", "pages crawled (page fetches)", totals["pages"])
        yield from counter("requests", "requests made (crawl log lines)", totals["requests"])
        yield from counter("body_bytes", "response body bytes received", totals["bytes"])
        yield from counter("errors", "fetch errors", totals["errors"])
        yield from gauge("pages_per_second", "pages per second now", totals["pages_per_s"])
        yield from gauge(
            "body_bytes_per_second", "response body bytes per second now",
            totals.get("bytes_per_s"),
        )  # fmt: skip
        yield from gauge("workers", "live workers", totals["workers"])
        yield from gauge("max_pages", "the crawl's page limit", crawl["max_pages"])
        if totals.get("statuses") is not None:
            by_status = CounterMetricFamily(
                "gossamer_responses", "responses by HTTP status", labels=["crawl", "status"]
            )
            for status, n in totals["statuses"].items():
                by_status.add_metric([*cid, str(status)], float(n))
            yield by_status
        if totals.get("outcomes") is not None:
            by_outcome = CounterMetricFamily(
                "gossamer_outcomes", "requests by outcome key", labels=["crawl", "outcome"]
            )
            for outcome, n in totals["outcomes"].items():
                by_outcome.add_metric([*cid, str(outcome)], float(n))
            yield by_outcome
        fr = s.get("frontier")
        if fr:
            urls = GaugeMetricFamily(
                "gossamer_frontier_urls", "URLs in the frontier by state", labels=["crawl", "state"]
            )
            for key in ("queued", "leased", "done", "failed"):
                if fr.get(key) is not None:
                    urls.add_metric([*cid, key], float(fr[key]))
            yield urls
            yield from gauge("frontier_hosts", "hosts known to the frontier", fr.get("hosts"))
            yield from gauge(
                "frontier_dead_hosts", "hosts given up (too many errors)", fr.get("dead_hosts")
            )
            yield from counter("frontier_retries", "fetches retried", fr.get("retries"))
        workers = s.get("workers") or []
        if workers:
            w_pages = CounterMetricFamily(
                "gossamer_worker_pages", "pages crawled by each worker",
                labels=["crawl", "worker", "machine"],
            )  # fmt: skip
            w_rate = GaugeMetricFamily(
                "gossamer_worker_pages_per_second", "each worker's pages per second",
                labels=["crawl", "worker", "machine"],
            )  # fmt: skip
            w_errors = CounterMetricFamily(
                "gossamer_worker_errors", "fetch errors of each worker",
                labels=["crawl", "worker", "machine"],
            )  # fmt: skip
            w_up = GaugeMetricFamily(
                "gossamer_worker_up", "1 for a live worker, 0 for one that exited or died",
                labels=["crawl", "worker", "machine"],
            )  # fmt: skip
            w_age = GaugeMetricFamily(
                "gossamer_worker_heartbeat_age_seconds", "seconds since each worker's last beat",
                labels=["crawl", "worker", "machine"],
            )  # fmt: skip
            # what each live worker costs its machine (its last heartbeat's)
            resources = {
                key: GaugeMetricFamily(
                    f"gossamer_worker_{name}", doc, labels=["crawl", "worker", "machine"]
                )
                for key, name, doc in WORKER_RESOURCES
            }
            for w in workers:
                wkey = [*cid, str(w["id"]), str(w["machine"])]
                w_pages.add_metric(wkey, float(w["pages"]))
                w_rate.add_metric(wkey, float(w["pages_per_s"] or 0.0))
                w_errors.add_metric(wkey, float(w.get("errors") or 0))
                up = w.get("state") not in ("dead", "stopped", "exited", "ended", "killed")
                w_up.add_metric(wkey, 1.0 if up else 0.0)
                if w.get("beat_age_s") is not None:
                    w_age.add_metric(wkey, float(w["beat_age_s"]))
                for key, family in resources.items():
                    if isinstance(w.get(key), int | float) and up:
                        family.add_metric(wkey, float(w[key]))
            yield from (w_pages, w_rate, w_errors, w_up, w_age, *resources.values())
        g = s.get("graph")
        if g:
            for key, doc in GRAPH_GAUGES:
                value = g.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    yield from gauge(f"graph_{key}", doc, value)
            for side in ("in", "out"):
                dist = g.get(f"{side}_degree")
                if isinstance(dist, dict):
                    for key, what in DEGREE_GAUGES:
                        value = dist.get(key)
                        if isinstance(value, int | float) and not isinstance(value, bool):
                            yield from gauge(
                                f"graph_{side}_degree_{key}", f"{what} {side}-degree", value
                            )
        top = s.get("top_hosts")
        if top:
            queued = GaugeMetricFamily(
                "gossamer_top_host_queued", "URLs queued on each of the top hosts (at most 20)",
                labels=["crawl", "host"],
            )  # fmt: skip
            for h in top:
                queued.add_metric([*cid, str(h["host"])], float(h["queued"]))
            yield queued


#: (status key, metric name, help) of the resources a worker's heartbeat carries
WORKER_RESOURCES = (
    ("cpu_percent", "cpu_percent", "each worker's CPU, percent of one core"),
    ("rss_bytes", "resident_memory_bytes", "each worker's resident memory"),
    ("disk_free_bytes", "disk_free_bytes", "free bytes on each worker's output disk"),
    ("bytes_in_per_s", "received_bytes_per_second", "each worker's HTTP bytes received a second"),
    ("bytes_out_per_s", "sent_bytes_per_second", "each worker's HTTP bytes sent a second"),
)


def metrics_registry(snapshot: Callable[[], dict[str, Any]]) -> CollectorRegistry:
    """A registry of its own holding one StatusCollector over `snapshot`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(snapshot))
    return registry

"""A graph consumer process for tests/e2e/test_cluster_graph_stream.py: `follow` (cluster/
stream.py) into a set-based graph that counts its `update` calls per page, written as JSON
at the end. Usage: python _follow_counting.py REDIS_URL CRAWL_ID STATE_DIR OUT_JSON"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import redis

from gossamer.cluster.stream import follow

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/: run as a script
from graph_helpers import CountingGraph


def main() -> None:
    url, crawl, state, out = sys.argv[1:5]
    graph = CountingGraph()
    with redis.Redis.from_url(url) as client:
        result = follow(client, crawl, graph, Path(state))
    Path(out).write_text(
        json.dumps(
            {
                "links": {p: sorted(ds) for p, ds in graph.links.items()},
                "updates": dict(graph.updates),
                "replayed": result.replayed,
                "applied": result.applied,
                "events": result.events,
                "state": result.state,
            }
        )
    )


if __name__ == "__main__":
    main()

"""What a cluster worker's fetch sample (cluster/fetchstream.py) costs a page, in parts.

    .venv/bin/python bench/bench_fetch_tail.py [--pages 200000] [--per-tick 1000]

1. The event loop's share: `FetchTailSink.log` (the tuple handed to the deque) per call, over
   real `FetchResult`s, the deque drained now and then as the sender does.
2. The sender thread's share: `FetchTail.send_tick` on ticks of `--per-tick` fetches (1,000:
   a worker at 2,000 pages/s, a tick of 0.5 s; 1 % of them warnings), sampled and sent as one
   XADD to a real redis-server started for the run: CPU (thread time) per tick and per fetch.

A whole crawl's CPU a page does not show these (bench_crawl.py --only none --cluster 1: the
runs' spread, ±5 %, is ~50 times larger); these are the figures docs/cluster.md quotes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from gossamer.cluster.fetchstream import FetchTail, FetchTailSink
from gossamer.fetch import FetchResult
from gossamer.testweb.redisd import RedisServer


def _result(k: int) -> FetchResult:
    status = 404 if k % 100 == 0 else 200
    return FetchResult(url=f"http://www.h{k % 400}.example/p{k}", status=status, headers=(),
                       body=b"", raw_body_len=0, truncated=False, error=None, ip=None,
                       port=None, started_at=time.time(), elapsed=0.01, request_head=b"",
                       response_head=b"", http_version="1.1")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pages", type=int, default=200_000)
    p.add_argument("--per-tick", type=int, default=1_000)
    p.add_argument("--ticks", type=int, default=200)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
        client = server.client()
        results = [_result(k) for k in range(args.per_tick)]
        # 1. the hand-over, on the event loop's thread
        tail = FetchTail(client, "bench", "w1", start=False)
        sink = FetchTailSink(tail)
        log = sink.log
        best = float("inf")
        for _ in range(5):
            t0 = time.thread_time()
            done = 0
            while done < args.pages:
                for r in results:
                    log(r, depth=1, parent=None, outcome="ok")
                done += len(results)
                tail._queue.clear()  # (as the sender drains it)
            best = min(best, (time.thread_time() - t0) / done)
        print(f"hand-over (FetchTailSink.log): {best * 1e6:.3f} µs a page, best of 5 runs "
              f"of {args.pages:,} pages (thread CPU)")  # fmt: skip
        # 2. the sender's tick
        cpu = 0.0
        for _ in range(args.ticks):
            for r in results:
                outcome = "ok" if r.status == 200 else "fetch/status/404"
                log(r, depth=1, parent=None, outcome=outcome)
            t0 = time.thread_time()
            tail.send_tick()
            cpu += time.thread_time() - t0
        s = tail.statistics()
        print(f"sender (send_tick, {args.per_tick:,} fetches a tick, one XADD): "
              f"{cpu / args.ticks * 1e3:.3f} ms a tick = "
              f"{cpu / (args.ticks * args.per_tick) * 1e6:.3f} µs a "
              f"fetch (thread CPU); {s.entries} entries, {s.sent:,} sent, "
              f"{s.sampled_out:,} sampled out")  # fmt: skip
        size = client.memory_usage(tail.key) or 0
        print(f"the stream: {client.xlen(tail.key)} entries, {size / 1e3:.0f} KB in Redis")
        client.close()


if __name__ == "__main__":
    main()

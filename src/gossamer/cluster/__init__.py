"""Cluster mode: many workers on many machines around one crawl stored in Redis.

- `crawls`: crawls (`create_crawl`, `load_crawl`, states running → stopping → stopped,
  or finished), their settings, seeds and partition strategy;
- `members`: worker registration (`w<N>`), heartbeats with a TTL, the live member list and
  the partition function a worker's frontier leases under (`PartitionView`);
- `ipgate`: `RedisIpGate`, per-IP politeness across every worker of a crawl;
- `worker`: `gossamer worker`, one worker joining a crawl;
- `control`: `crawl --redis`, `status`, `stop`, `workers --scale`.

Documentation: docs/cluster.md. Every coordination key of a crawl is `gs:<crawl>:{m}:…`
(one hash slot, so the Lua scripts work on Redis Cluster), plus the crawl list `gs:crawls`.
"""

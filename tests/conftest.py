"""Plugins for every test: the Redis server fixtures (tests/redis_fixtures.py), the
library's log configuration of the command (tests/log_fixtures.py), the headless Chromium
of the browser tests (tests/browser_fixtures.py) and a finished crawl of two runs
(tests/crawl_fixtures.py)."""

import os

# before anything imports numpy: OpenBLAS's threads would not block the signals the crawl
# holds while it starts (src/gossamer/graph/__init__.py says why)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

pytest_plugins = ["redis_fixtures", "log_fixtures", "browser_fixtures", "crawl_fixtures"]

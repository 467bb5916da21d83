"""Plugins for every test: the Redis server fixtures (tests/redis_fixtures.py) and the
library's log configuration of the command (tests/log_fixtures.py)."""

pytest_plugins = ["redis_fixtures", "log_fixtures"]

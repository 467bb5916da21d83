"""Plugins for every test: the Redis server fixtures (tests/redis_fixtures.py)."""

pytest_plugins = ["redis_fixtures"]

"""`gossamer dashboard`: watch and stop a crawl from a browser, `/api/status`, server-sent
events and Prometheus `/metrics` (docs/dashboard.md)."""

from ._app import dashboard_main, make_app
from ._sources import ClusterSource, EmbeddedSource, SourceError, StatusSource

__all__ = [
    "ClusterSource",
    "EmbeddedSource",
    "SourceError",
    "StatusSource",
    "dashboard_main",
    "make_app",
]

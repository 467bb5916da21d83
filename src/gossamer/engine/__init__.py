"""The worker loop: lease, fetch, parse, route, record. Imports no runner, cluster or report."""

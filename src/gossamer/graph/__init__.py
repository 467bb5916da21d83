"""The web graph: compact arrays and its statistics."""

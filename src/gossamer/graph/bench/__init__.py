"""GraphBench: SPAWC's dynamic all-pairs shortest distance and strongly connected components
algorithms behind one small interface each, and the harness that times and validates them
(docs/graphbench.md). `_api.py`: the interfaces, the registries by name and the trusted
references (scipy)."""

from __future__ import annotations

from . import _apsd, _scc  # noqa: F401  (importing them registers their algorithms)
from ._api import (
    APSD,
    FAMILIES,
    SCC,
    AlgorithmInfo,
    APSDAlgorithm,
    Family,
    SCCAlgorithm,
    apsd_named,
    canonical,
    names,
    reference_components,
    reference_distances,
    register_apsd,
    register_scc,
    scc_named,
)

__all__ = [
    "APSD",
    "FAMILIES",
    "SCC",
    "APSDAlgorithm",
    "AlgorithmInfo",
    "Family",
    "SCCAlgorithm",
    "apsd_named",
    "canonical",
    "names",
    "reference_components",
    "reference_distances",
    "register_apsd",
    "register_scc",
    "scc_named",
]

"""The simulated web: a deterministic web on loopback that knows the right answer.

Public API (see docs/testweb.md): `WebSpec`, `Realism`, `WebModel`, `model_for`;
serving: `serve_in_thread`, `serve_subprocess` (context managers yielding a `RunningWeb`).
"""

from ._api import RunningWeb, serve_in_thread, serve_subprocess, start_in_thread
from ._audit import AuditReport, NearDupScore, Violation, audit, near_duplicate_scores
from ._logread import LogRecord, LogSet, read_logs
from ._model import HostFlag, Kind, Link, PageFlag, WebModel, model_for
from ._spec import PROFILES, Realism, WebSpec
from ._truth import Truth, TruthRules, canonical_url, compute_truth, near_duplicate_group

__all__ = [
    "PROFILES",
    "AuditReport",
    "HostFlag",
    "Kind",
    "Link",
    "LogRecord",
    "LogSet",
    "NearDupScore",
    "PageFlag",
    "Realism",
    "RunningWeb",
    "Truth",
    "TruthRules",
    "Violation",
    "WebModel",
    "WebSpec",
    "audit",
    "canonical_url",
    "compute_truth",
    "model_for",
    "near_duplicate_group",
    "near_duplicate_scores",
    "read_logs",
    "serve_in_thread",
    "serve_subprocess",
    "start_in_thread",
]

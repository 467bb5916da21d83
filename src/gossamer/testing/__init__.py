"""The simulated web: a deterministic web on loopback that knows the right answer.

Public API (see docs/testweb.md): `WebSpec`, `Realism`, `WebModel`, `model_for`.
"""

from ._model import HostFlag, Kind, Link, PageFlag, WebModel, model_for
from ._spec import PROFILES, Realism, WebSpec

__all__ = [
    "PROFILES",
    "HostFlag",
    "Kind",
    "Link",
    "PageFlag",
    "Realism",
    "WebModel",
    "WebSpec",
    "model_for",
]

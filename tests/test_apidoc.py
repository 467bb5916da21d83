"""The Python API's reference builds (scripts/apidoc.py, pdoc, warnings as errors) and
documents every public name; every public name has a docstring and type annotations."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gossamer

ROOT = Path(__file__).resolve().parents[1]


def test_the_api_reference_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    pytest.importorskip("pdoc")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    r = subprocess.run(
        [sys.executable, "-W", "error", str(ROOT / "scripts" / "apidoc.py"), str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "gossamer.html").read_text()
    for name in gossamer.__all__:
        if name != "graph":
            assert f'id="{name}"' in page, name
    graph = (tmp_path / "gossamer" / "graph.html").read_text()
    for name in ("load", "stats", "to_networkx"):
        assert f'id="{name}"' in graph, name
    assert not list(tmp_path.glob("gossamer/*/*.html"))  # no internals


def _public(obj: object) -> list[tuple[str, object]]:
    return [
        (n, m)
        for n, m in vars(obj).items()
        if not n.startswith("_") and (inspect.isfunction(m) or isinstance(m, property))
    ]


def test_every_public_name_has_a_docstring_and_types() -> None:
    for name in gossamer.__all__:
        obj = getattr(gossamer, name)
        if name == "__version__":
            assert isinstance(obj, str)
            continue
        assert inspect.getdoc(obj), f"gossamer.{name} has no docstring"
        if inspect.isfunction(obj):
            sig = inspect.signature(obj)
            assert sig.return_annotation is not inspect.Signature.empty, name
            assert all(
                p.annotation is not inspect.Parameter.empty for p in sig.parameters.values()
            ), name
        if inspect.isclass(obj):
            for member, m in _public(obj):
                fn = m.fget if isinstance(m, property) else m
                assert inspect.getdoc(fn), f"gossamer.{name}.{member} has no docstring"
                sig = inspect.signature(fn)  # type: ignore[arg-type]
                assert sig.return_annotation is not inspect.Signature.empty, (name, member)
    for name in ("load", "stats", "to_networkx"):
        fn = getattr(gossamer.graph, name)
        assert inspect.getdoc(fn) and inspect.signature(fn).return_annotation, name

"""A plugin package as its author ships it — its modules beside its own `pyproject.toml`
declaring the entry points — installed by pip into a directory (`pip install --target`:
the modules and a `NAME-VERSION.dist-info` with METADATA, entry_points.txt, INSTALLER and
RECORD), for the tests of plugins found by entry points: put the directory on PYTHONPATH and
importlib.metadata finds the distribution."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def install_plugin(
    site: Path,
    name: str,
    version: str,
    modules: dict[str, str],
    entry_points: dict[str, dict[str, str]],
) -> Path:
    """Write a project of `modules` (relative path → source) with a pyproject.toml naming
    `entry_points` ({group: {name: "module:attr"}}), pip-install it into `site` (build
    isolation: setuptools from the package index, as a user's `pip install` does); returns
    `site`."""
    project = site.parent / f"{site.name}-project-{name}"
    project.mkdir(parents=True)
    packages, py_modules = set(), []
    for rel, source in modules.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        parts = Path(rel).parts
        if len(parts) == 1:
            py_modules.append(Path(rel).stem)
        else:
            packages.add(".".join(parts[:-1]))
    eps = "".join(
        f"\n[project.entry-points.{_toml_string(group)}]\n"
        + "".join(f"{_toml_string(k)} = {_toml_string(v)}\n" for k, v in names.items())
        for group, names in entry_points.items()
    )
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f"\n[project]\nname = {_toml_string(name)}\nversion = {_toml_string(version)}\n"
        + eps
        + "\n[tool.setuptools]\n"
        + f"packages = [{', '.join(map(_toml_string, sorted(packages)))}]\n"
        + f"py-modules = [{', '.join(map(_toml_string, py_modules))}]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
         "--target", str(site), str(project)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"pip install of {name} failed:\n{proc.stdout}\n{proc.stderr}"
    assert any(site.glob("*.dist-info/entry_points.txt")), "pip installed no entry points"
    return site


def with_path(env: dict[str, str], *dirs: Path) -> dict[str, str]:
    """`env` with `dirs` first on PYTHONPATH."""
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join(
        [*map(str, dirs), *filter(None, [env.get("PYTHONPATH")])]
    )
    return out

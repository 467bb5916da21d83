"""A plugin package installed into a directory as pip installs one (its modules beside a
`NAME-VERSION.dist-info` with METADATA, entry_points.txt, INSTALLER and RECORD), for the
tests of plugins found by entry points: put the directory on PYTHONPATH and
importlib.metadata finds the distribution."""

from __future__ import annotations

import os
from pathlib import Path


def install_plugin(
    site: Path,
    name: str,
    version: str,
    modules: dict[str, str],
    entry_points: dict[str, dict[str, str]],
) -> Path:
    """Write `modules` (relative path → source) and the distribution's metadata into
    `site`; returns `site`."""
    site.mkdir(parents=True, exist_ok=True)
    for rel, source in modules.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    )
    (dist / "INSTALLER").write_text("pip\n")
    eps = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in names.items()) + "\n"
        for group, names in entry_points.items()
    )
    (dist / "entry_points.txt").write_text(eps)
    files = [*modules, *(f"{dist.name}/{f}" for f in ("METADATA", "INSTALLER", "entry_points.txt"))]
    (dist / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{dist.name}/RECORD"]))
    return site


def with_path(env: dict[str, str], *dirs: Path) -> dict[str, str]:
    """`env` with `dirs` first on PYTHONPATH."""
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join(
        [*map(str, dirs), *filter(None, [env.get("PYTHONPATH")])]
    )
    return out

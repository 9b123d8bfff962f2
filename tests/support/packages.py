"""Installed packages for tests: a module and its ``.dist-info`` written into a site directory.

This is what ``pip install`` leaves behind (``METADATA`` and ``entry_points.txt`` next to the
code), so ``importlib.metadata`` finds the entry points exactly as it would in a deployment once
the directory is on ``sys.path`` (in-process) or ``PYTHONPATH`` (a subprocess).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def install(
    site: Path,
    distribution: str,
    *,
    modules: Mapping[str, str],
    tools: Mapping[str, str],
    version: str = "0.1.0",
) -> Path:
    """Write ``modules`` (dotted name → source) and a dist-info declaring ``tools`` (entry-point
    name → ``module:attribute``) in the ``horismos.tools`` group; returns ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        path = site.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(site).parents:
            if parent != Path("."):
                (site / parent / "__init__.py").touch()
        path.write_text(source, encoding="utf-8")
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = ["[horismos.tools]", *(f"{name} = {target}" for name, target in tools.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return site

"""Where the files that ship beside the code live: the bundled ontologies and the migrations.

In a source checkout (or an editable install of one) they are the ``ontologies/`` and
``migrations/`` folders of the tree. An installed wheel carries them as data files under
``<prefix>/share/horismos/`` (``[tool.setuptools.data-files]`` in ``pyproject.toml``), so a
non-editable install (the Docker image) migrates and serves the same files.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parents[1]


def resource_dir(name: str) -> Path:
    """The folder ``name`` (``ontologies`` or ``migrations``) of this installation."""
    if (_SOURCE_ROOT / "pyproject.toml").is_file() and (_SOURCE_ROOT / name).is_dir():
        return _SOURCE_ROOT / name
    return Path(sysconfig.get_path("data")) / "share" / "horismos" / name


def alembic_ini() -> Path | None:
    """The source tree's ``alembic.ini`` (logging for the ``alembic`` command), when present."""
    ini = _SOURCE_ROOT / "alembic.ini"
    return ini if ini.is_file() else None

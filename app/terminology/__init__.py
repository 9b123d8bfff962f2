"""The terminology the service knows without a terminology server: the HL7 Terminology (THO)
FHIR package, installed beside the service by ``scripts/install-terminology`` (``make
terminology``) and read from files only: no network, no database, no clock.

``load_terminology(folder)`` gives a ``Terminology`` (once per process and folder):
``canonical_system`` maps what an EHR sends (OIDs, older URIs, ``|version``) to the canonical
code-system URI, ``subsumes`` answers from the code systems' is-a hierarchies, ``display`` gives
a code's name, and ``packages`` says which package versions the answers came from.

The terminology port the core asks at hook time (``$expand``, ``$validate-code``, ``$lookup``,
``$subsumes``, ``$translate``) is ``app.terminology.port``; its embedded implementation, over this
package and a deployment's own ValueSet and ConceptMap files, ``app.terminology.embedded``; the
choice between it and a FHIR terminology server (``HORISMOS_TERMINOLOGY_URL``,
``adapters.terminology.http``) ``app.terminology.choice``.

Raised here: ``TerminologyNotInstalled`` (a ``RuntimeError``) when the folder holds no package;
its message is one line naming the install command.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Final

from app.resources import resource_dir
from app.terminology._build import INDEX_FILE, INDEX_FORMAT, IndexData, build_index
from app.terminology._terminology import Terminology, TerminologyPackage

__all__ = [
    "INSTALL_COMMAND",
    "Terminology",
    "TerminologyNotInstalled",
    "TerminologyPackage",
    "default_packages_dir",
    "load_terminology",
    "package_dirs",
]

INSTALL_COMMAND: Final = "make terminology (scripts/install-terminology)"


class TerminologyNotInstalled(RuntimeError):
    """The terminology folder holds no FHIR package: the install step has not run."""


def default_packages_dir() -> Path:
    """``terminology/packages`` of this installation (the source tree, or ``share/horismos``
    of an installed wheel), where ``scripts/install-terminology`` puts the packages."""
    return resource_dir("terminology") / "packages"


def package_dirs(folder: Path) -> list[Path]:
    """The FHIR packages installed in ``folder``: each ``NAME#VERSION/package`` holding a
    ``package.json``."""
    return sorted(p.parent for p in folder.glob("*#*/package/package.json"))


def _index_of(folder: Path, packages: list[Path]) -> IndexData:
    """The index written at install time when it matches the installed packages; otherwise
    one built from the packages now (slower, same answers)."""
    installed = sorted(
        (str(m["name"]), str(m["version"]))
        for m in (json.loads((p / "package.json").read_text(encoding="utf-8")) for p in packages)
    )
    written = folder / INDEX_FILE
    if written.is_file():
        index: IndexData = json.loads(written.read_text(encoding="utf-8"))
        if index.get("format") == INDEX_FORMAT and installed == sorted(
            (p["name"], p["version"]) for p in index["packages"]
        ):
            return index
    return build_index(packages)


@lru_cache(maxsize=4)
def load_terminology(folder: Path | None = None) -> Terminology:
    """The terminology of the packages in ``folder`` (default: ``default_packages_dir()``)."""
    folder = folder if folder is not None else default_packages_dir()
    packages = package_dirs(folder)
    if not packages:
        raise TerminologyNotInstalled(
            f"no HL7 terminology package is installed in {folder}: run {INSTALL_COMMAND}"
        )
    return Terminology(_index_of(folder, packages))

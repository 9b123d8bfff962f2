"""A deployment's files as data: what a change replaces, what a candidate version is built from.

:class:`Material` holds the text of every file a deployment loads — its own Turtle files, the
files it imports and the value sets beside them — by path relative to the deployment's folder
(the folder of its first own file; an imported file elsewhere has a path starting with ``../``).
A change is a few of those paths with new text; its candidate is the base's material with them
replaced (:meth:`Material.with_files`). :func:`build` loads and verifies material exactly as
files on disk are loaded (it writes them to a temporary folder with the same layout), so a
candidate's digest is comparable with the served version's: the release's own material builds
to the release's digest.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from app.deployments.registry import Deployment, build_deployment
from app.ontology.conceptmaps import FOLDER as MAP_FOLDER
from app.ontology.conceptmaps import map_folders_beside
from app.ontology.deployments import find_deployments
from app.ontology.loader import vocabulary_path
from app.ontology.valuesets import FOLDER, HISTORY, SUPPLEMENTS, folders_beside
from app.tools.packaged import PackagedTools


@dataclass(frozen=True, kw_only=True)
class Material:
    """Every file of one deployment version, as text, by relative path."""

    own: tuple[str, ...]
    imports: tuple[str, ...]
    files: Mapping[str, str]

    def editable(self, path: str) -> bool:
        """Whether a change to this deployment may write ``path``: one of its own Turtle files,
        or a value set (``valuesets/*.json``, an earlier expansion in ``valuesets/history``, a
        supplement in ``valuesets/supplements``) or
        concept map (``conceptmaps/*.json``) beside one of them. Imported files are shared
        with other deployments and are not this deployment's to change."""
        if path in self.own:
            return True
        pure = PurePosixPath(path)
        folders = {
            str(PurePosixPath(own).parent / sub)
            for own in self.own
            for sub in (FOLDER, f"{FOLDER}/{HISTORY}", f"{FOLDER}/{SUPPLEMENTS}", MAP_FOLDER)
        }
        return pure.suffix == ".json" and str(pure.parent) in {
            f.removeprefix("./") for f in folders
        }

    def with_files(self, changed: Mapping[str, str]) -> Material:
        """This material with ``changed`` paths holding new text."""
        return replace(self, files={**self.files, **changed})

    def to_json(self) -> dict[str, Any]:
        return {"own": list(self.own), "imports": list(self.imports), "files": dict(self.files)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Material:
        return cls(
            own=tuple(data["own"]), imports=tuple(data["imports"]), files=dict(data["files"])
        )


def _rel(path: Path, root: Path) -> str:
    return PurePosixPath(os.path.relpath(path.resolve(), root)).as_posix()


def release_material(deployment: Deployment) -> Material:
    """The material of a deployment loaded from files on disk."""
    own = [Path(p) for p in deployment.files]
    imports = [Path(p) for p in deployment.imports]
    root = own[0].resolve().parent
    files: dict[str, str] = {}
    for path in [*own, *imports]:
        files[_rel(path, root)] = path.read_text(encoding="utf-8")
    for folder in [*folders_beside([*own, *imports]), *map_folders_beside([*own, *imports])]:
        extra = [*(folder / HISTORY).glob("*.json"), *(folder / SUPPLEMENTS).glob("*.json")]
        for vs in sorted([*folder.glob("*.json"), *extra]):
            files[_rel(vs, root)] = vs.read_text(encoding="utf-8")
    return Material(
        own=tuple(_rel(p, root) for p in own),
        imports=tuple(_rel(p, root) for p in imports),
        files=files,
    )


def write(material: Material, folder: Path) -> Path:
    """Write ``material`` under ``folder`` with its layout (a file ``../x`` of the deployment's
    folder lands beside it); returns the deployment's folder, which its own paths are
    relative to."""
    depth = max(
        (len([p for p in PurePosixPath(f).parts if p == ".."]) for f in material.files),
        default=0,
    )
    root = folder.joinpath(*[f"up{i}" for i in range(depth)]) if depth else folder
    for relative, text in material.files.items():
        target = (root / relative).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def build(material: Material, packaged: PackagedTools, *, like: Deployment) -> Deployment:
    """Load and verify ``material`` as the deployment ``like`` (its id and file names are kept;
    its IRI, version, digest, services and status are the material's own)."""
    with tempfile.TemporaryDirectory(prefix="horismos-version-") as tmp:
        root = write(material, Path(tmp))
        sources = find_deployments([root / p for p in material.own], skip=vocabulary_path())
        own = {(root / p).resolve() for p in material.own}
        chosen = next((s for s in sources if {p.resolve() for p in s.files} == own), sources[0])
        imports = tuple((root / p) for p in material.imports)
        if set(chosen.imports) != set(imports):
            chosen = replace(chosen, imports=imports)
        built = build_deployment(chosen, packaged)
    return replace(built, id=like.id, files=like.files, imports=like.imports)


__all__ = ["Material", "build", "release_material", "write"]

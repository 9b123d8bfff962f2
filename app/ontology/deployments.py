"""Which Turtle files make up which deployment.

A **deployment** is a set of Turtle files with one canonical IRI — the ``owl:Ontology`` node its
files declare — and a version, that node's ``owl:versionInfo``. What it builds on (the shared
vocabulary of a guideline, a common file) it names with ``owl:imports``; an ontology some other
loaded file imports is such a common file, not a deployment of its own unless it declares CDS
services. A file that declares no ``owl:Ontology`` is a deployment by itself, named after the
file.

:func:`find_deployments` reads the headers of the given files (each file parsed once per
content, cached by path, size and modification time) and returns each deployment's own files
and the files of everything it imports, transitively. An import no given file declares is
looked for among the ``*.ttl`` files beside the importing file; one found nowhere is left to the
loader, which reports it as a dangling ``owl:imports``. A file that does not parse is a
deployment of its own whose problem is that file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from rdflib import Graph, Literal, URIRef
from rdflib.namespace import OWL, RDF

from app.ontology.errors import Problem
from app.ontology.names import HORIS

_CDS_SERVICE = URIRef(HORIS + "CdsService")
_COMBINED_SERVICE = URIRef(HORIS + "CombinedService")
_WORKFLOW = URIRef(HORIS + "Workflow")
_ID = URIRef(HORIS + "id")


@dataclass(frozen=True, kw_only=True)
class FileHeader:
    """What one Turtle file declares about the ontology it belongs to."""

    path: Path
    #: the ``owl:Ontology`` IRIs the file declares (usually one), each with its imports
    ontologies: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    version: str | None = None
    #: ``horis:id`` of the CDS services the file declares, combined ones too (read even if it
    #: will not compile)
    services: tuple[str, ...] = ()
    #: IRIs of the workflows the file declares
    workflows: tuple[str, ...] = ()
    problem: Problem | None = None


@dataclass(frozen=True, kw_only=True)
class DeploymentSource:
    """One deployment's files, as found on disk."""

    iri: str
    id: str
    #: files that declare the deployment's ontology (its own files), in load order
    files: tuple[Path, ...]
    #: files of what it imports, transitively, in import order
    imports: tuple[Path, ...] = ()
    version: str | None = None
    services: tuple[str, ...] = ()
    workflows: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def paths(self) -> list[Path]:
        """Everything to load for this deployment: its own files first, then its imports."""
        return [*self.files, *self.imports]


def _fingerprint(path: Path) -> tuple[str, int, int]:
    resolved = path.resolve()
    stat = resolved.stat()
    return (str(resolved), stat.st_mtime_ns, stat.st_size)


def read_header(path: Path) -> FileHeader:
    """The ontology header of ``path`` (a problem when it is missing or is not Turtle)."""
    try:
        key = _fingerprint(path)
    except OSError:
        return FileHeader(
            path=path, problem=Problem(code="syntax", node=str(path), message="file not found")
        )
    return _read_header(key)


@lru_cache(maxsize=512)
def _read_header(key: tuple[str, int, int]) -> FileHeader:
    path = Path(key[0])
    graph = Graph(bind_namespaces="none")
    try:
        graph.parse(path, format="turtle")
    except Exception as exc:  # rdflib raises many kinds of parse error
        return FileHeader(
            path=path,
            problem=Problem(code="syntax", node=str(path), message=f"not valid Turtle: {exc}"),
        )
    ontologies = sorted(str(s) for s in graph.subjects(RDF.type, OWL.Ontology))
    imports: list[str] = []
    versions: list[str] = []
    for iri in ontologies:
        node = URIRef(iri)
        imports.extend(sorted(str(o) for o in graph.objects(node, OWL.imports)))
        versions.extend(str(v) for v in graph.objects(node, OWL.versionInfo))
    services = sorted(
        str(i)
        for kind in (_CDS_SERVICE, _COMBINED_SERVICE)
        for s in graph.subjects(RDF.type, kind)
        for i in graph.objects(s, _ID)
        if isinstance(i, Literal)
    )
    return FileHeader(
        path=path,
        ontologies=tuple(ontologies),
        imports=tuple(dict.fromkeys(imports)),
        version=versions[0] if versions else None,
        services=tuple(services),
        workflows=tuple(sorted(str(w) for w in graph.subjects(RDF.type, _WORKFLOW))),
    )


def short_id(iri: str, taken: set[str]) -> str:
    """A short, unique name for a deployment: its IRI's last segment, with more segments when
    another deployment already has that name."""
    parts = [p for p in iri.replace("#", "/").split("/") if p and not p.endswith(":")]
    for n in range(1, len(parts) + 1):
        candidate = "/".join(parts[-n:])
        if candidate not in taken:
            return candidate
    return iri


def find_deployments(paths: Sequence[Path], *, skip: Path | None = None) -> list[DeploymentSource]:
    """The deployments among ``paths`` (``skip``: the vocabulary file, always loaded anyway),
    sorted by id."""
    headers: list[FileHeader] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        resolved = path.resolve()
        if resolved in seen or (skip is not None and resolved == skip.resolve()):
            continue
        seen.add(resolved)
        headers.append(read_header(path))
    declared: dict[str, list[FileHeader]] = {}
    for h in headers:
        for iri in h.ontologies:
            declared.setdefault(iri, []).append(h)
    imported = {i for h in headers for i in h.imports}
    roots: list[tuple[str, list[FileHeader]]] = []
    for h in headers:
        if h.problem is not None or not h.ontologies:
            roots.append((h.path.resolve().as_uri(), [h]))
    for iri, files in declared.items():
        # an imported (common) file is a deployment of its own only when it declares services
        if iri not in imported or any(h.services for h in files):
            roots.append((iri, files))
    taken: set[str] = set()
    out: list[DeploymentSource] = []
    for iri, files in sorted(roots, key=lambda r: r[0]):
        name = files[0].path.stem if iri.startswith("file:") else short_id(iri, taken)
        if name in taken:
            name = short_id(iri, taken)
        taken.add(name)
        out.append(_deployment(iri, name, files, declared))
    return sorted(out, key=lambda d: d.id)


def _deployment(
    iri: str, name: str, files: list[FileHeader], declared: dict[str, list[FileHeader]]
) -> DeploymentSource:
    own = [h.path for h in files]
    problems = [h.problem for h in files if h.problem is not None]
    imports: list[Path] = []
    pending = [i for h in files for i in h.imports]
    visited: set[str] = {iri}
    while pending:
        target = pending.pop(0)
        if target in visited:
            continue
        visited.add(target)
        providers = declared.get(target) or _beside(target, own)
        for h in providers:
            if h.path not in imports and h.path not in own:
                imports.append(h.path)
            pending.extend(h.imports)
    versions = [h.version for h in files if h.version is not None]
    return DeploymentSource(
        iri=iri,
        id=name,
        files=tuple(own),
        imports=tuple(imports),
        version=versions[0] if versions else None,
        services=tuple(sorted({s for h in files for s in h.services})),
        workflows=tuple(sorted({w for h in files for w in h.workflows})),
        problems=tuple(problems),
    )


def with_imports(paths: Sequence[Path]) -> list[Path]:
    """``paths`` and, after them, the files of what they import, transitively (found among
    ``paths``, else beside the importing files), each once."""
    headers = [read_header(Path(p)) for p in paths]
    declared: dict[str, list[FileHeader]] = {}
    for h in headers:
        for iri in h.ontologies:
            declared.setdefault(iri, []).append(h)
    found = _deployment("", "", headers, declared)
    return [*(Path(p) for p in paths), *found.imports]


def _beside(iri: str, own: list[Path]) -> list[FileHeader]:
    """Files next to the deployment's own files that declare ``iri``."""
    found: list[FileHeader] = []
    for folder in dict.fromkeys(p.resolve().parent for p in own):
        for candidate in sorted(folder.glob("*.ttl")):
            header = read_header(candidate)
            if iri in header.ontologies:
                found.append(header)
    return found


__all__ = [
    "DeploymentSource",
    "FileHeader",
    "find_deployments",
    "read_header",
    "short_id",
    "with_imports",
]

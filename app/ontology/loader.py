"""Turtle → compiled ``Ontology``.

``load_ontology`` parses every file with rdflib, merges them into one graph and compiles the
whole vocabulary of ``app.ontology.model``. Every problem found is collected (not just the first)
and raised together as an ``OntologyError``: unknown ``horis:`` terms (the known ones are the
subjects of ``ontologies/horis.ttl``), wrong literal types, dangling references, and any triple
the compiler did not read (a misspelt predicate, a term on the wrong kind of node).

Order: rules, cards, branches, prefetch entries and mappings keep document order (file order,
then position in the file), which rdflib does not keep by itself — see ``_rdf.OrderedGraph``.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from rdflib import BNode, Graph, Literal, URIRef
from rdflib.namespace import OWL, RDF
from rdflib.term import Node

from app.ontology._compile import Compiler
from app.ontology._rdf import OrderedGraph, Reader, short
from app.ontology.conceptmaps import load_concept_maps, map_folders_beside
from app.ontology.errors import OntologyError, Problem, in_files
from app.ontology.model import Ontology, OntologyPart
from app.ontology.names import HORIS
from app.ontology.schema import derive_schema
from app.ontology.valuesets import folders_beside, load_value_sets_with_history
from app.ontology.workflows import PerceptionStep
from app.resources import resource_dir

Registry = Mapping[str, Callable[..., Any]]

_ROOT = resource_dir("ontologies")
VOCABULARY_FILE = "horis.ttl"


def vocabulary_path() -> Path:
    """The Turtle file declaring every ``horis:`` term."""
    return _ROOT / VOCABULARY_FILE


def default_ontology_paths() -> list[Path]:
    """The bundled deployments: every ``ontologies/*.ttl`` except the vocabulary, then every
    ``ontologies/<folder>/*.ttl`` (a deployment of several files), sorted."""
    top = sorted(p for p in _ROOT.glob("*.ttl") if p.name != VOCABULARY_FILE)
    return top + sorted(_ROOT.glob("*/*.ttl"))


@cache
def vocabulary_terms() -> frozenset[str]:
    """Every IRI declared in ``horis.ttl`` under the ``horis:`` namespace."""
    graph = Graph(bind_namespaces="none")
    graph.parse(vocabulary_path(), format="turtle")
    return frozenset(str(s) for s in graph.subjects() if str(s).startswith(HORIS))


def load_ontology(paths: Sequence[str | Path], *, registry: Registry | None = None) -> Ontology:
    """Parse, merge and compile the files; raise ``OntologyError`` listing every problem."""
    graphs: list[OrderedGraph] = []
    sources: list[str] = []
    namespaces: list[str] = []
    problems: list[Problem] = []
    vocab = vocabulary_path().resolve()
    for raw in paths:
        path = Path(raw)
        if path.resolve() == vocab:
            continue  # the vocabulary is always loaded; naming it is harmless
        graph = OrderedGraph()
        try:
            graph.parse(path, format="turtle")
        except FileNotFoundError:
            problems.append(Problem(code="syntax", node=str(path), message="file not found"))
            continue
        except Exception as exc:  # rdflib raises many kinds of parse error
            problems.append(
                Problem(code="syntax", node=str(path), message=f"not valid Turtle: {exc}")
            )
            continue
        graphs.append(graph)
        sources.append(str(path))
        namespaces.append(_default_namespace(graph))
    if problems:
        raise OntologyError(problems)
    if not graphs:
        raise OntologyError(
            [Problem(code="missing", node="(none)", message="no ontology files to load")]
        )
    value_sets, history, vs_problems = load_value_sets_with_history(folders_beside(sources))
    concept_maps, cm_problems = load_concept_maps(map_folders_beside(sources))
    reader = Reader(graphs)
    reader.problems.extend(vs_problems)
    reader.problems.extend(cm_problems)
    origins = _origins(reader, sources)
    _check_terms(reader)
    _check_imports(reader, graphs)
    compiler = Compiler(reader, registry or {}, value_sets)
    parts = compiler.compile()
    if reader.problems:
        raise OntologyError(in_files(_dedupe(reader.problems), origins))
    digest = _with_value_sets(_digest(graphs), value_sets, history, concept_maps)
    ontology = Ontology(
        namespace=namespaces[0],
        version=_version(reader, digest),
        digest=digest,
        sources=tuple(sources),
        namespaces=tuple(dict.fromkeys(namespaces)),
        parts=_parts(graphs, sources),
        origins=origins,
        value_set_history=history,
        concept_maps=concept_maps,
        **parts,
    )
    # Every PerceptionStep's schema is derived once here, so a run never derives one.
    for workflow in ontology.workflows.values():
        for step in workflow.steps.values():
            if isinstance(step, PerceptionStep) and step.extracts:
                derive_schema(ontology, step.extracts)
    return ontology


def _default_namespace(graph: OrderedGraph) -> str:
    for prefix, ns in graph.namespaces():
        if prefix == "":
            return str(ns)
    for s in graph.subjects():
        if isinstance(s, URIRef) and not str(s).startswith(HORIS):
            text = str(s)
            for sep in ("#", "/"):
                if sep in text:
                    return text.rsplit(sep, 1)[0] + sep
    return ""


def _check_terms(reader: Reader) -> None:
    known = vocabulary_terms()
    reported: set[tuple[Node, str]] = set()
    for s, p, o in reader.triples():
        for term in (s, p, o):
            text = str(term)
            if not isinstance(term, URIRef) or not text.startswith(HORIS) or text in known:
                continue
            reader.unknown.add(term)
            if (s, text) in reported:
                continue
            reported.add((s, text))
            close = difflib.get_close_matches(text, sorted(known), n=1)
            hint = f"; did you mean {short(URIRef(close[0]))}?" if close else ""
            reader.problem(
                "unknown-term",
                s,
                f"{short(term)} is not a Horismos term (see ontologies/horis.ttl){hint}",
            )
            # Mark it read so it is not reported a second time as not understood; a node of an
            # unknown kind has nothing else worth reporting.
            reader.consumed.add((s, p, o))
            if p == RDF.type:
                reader.dismissed.add(s)


def _relative(sources: list[str]) -> list[str]:
    """Each file's name relative to the folder of the first (``common.ttl``, ``../x.ttl``)."""
    root = Path(sources[0]).resolve().parent
    return [Path(os.path.relpath(Path(s).resolve(), root)).as_posix() for s in sources]


def _origins(reader: Reader, sources: list[str]) -> dict[str, str]:
    """The file each named node is first read from, when several files are loaded."""
    if len(sources) < 2:
        return {}
    names = _relative(sources)
    out: dict[str, str] = {}
    for (s, _, _), (index, _) in sorted(reader.order.items(), key=lambda kv: kv[1]):
        if isinstance(s, URIRef):
            out.setdefault(str(s), names[index])
    return out


def _declared(graph: Graph) -> list[str]:
    return sorted(str(s) for s in graph.subjects(RDF.type, OWL.Ontology))


def _check_imports(reader: Reader, graphs: list[OrderedGraph]) -> None:
    """Every ``owl:imports`` names an ontology one of the loaded files declares."""
    declared = {iri for g in graphs for iri in _declared(g)}
    for g in graphs:
        for iri in _declared(g):
            for target in sorted(str(t) for t in g.objects(URIRef(iri), OWL.imports)):
                if target not in declared:
                    reader.problem(
                        "dangling-reference",
                        URIRef(iri),
                        f"<{target}>: no file declares this imported ontology; put the file "
                        "that declares it (`<…> a owl:Ontology`) beside this one",
                        via=OWL.imports,
                    )


def _parts(graphs: list[OrderedGraph], sources: list[str]) -> tuple[OntologyPart, ...]:
    """Each ``owl:Ontology`` loaded, with the version and digest of its own files."""
    names = _relative(sources)
    groups: dict[str, list[int]] = {}
    for index, graph in enumerate(graphs):
        declared = _declared(graph)
        key = declared[0] if declared else Path(sources[index]).resolve().as_uri()
        groups.setdefault(key, []).append(index)
    parts: list[OntologyPart] = []
    for iri, indexes in groups.items():
        versions = [
            str(v) for i in indexes for v in graphs[i].objects(URIRef(iri), OWL.versionInfo)
        ]
        parts.append(
            OntologyPart(
                iri=iri,
                version=versions[0] if versions else None,
                digest=_digest([graphs[i] for i in indexes]),
                files=tuple(names[i] for i in indexes),
            )
        )
    return tuple(parts)


def _version(reader: Reader, digest: str) -> str:
    versions: list[str] = []
    for s in reader.subjects():
        if OWL.Ontology in reader.peek(s, RDF.type):
            for v in reader.peek(s, OWL.versionInfo):
                versions.append(str(v))
    return "+".join(versions) if versions else f"sha256:{digest[:12]}"


def _digest(graphs: list[OrderedGraph]) -> str:
    """sha256 over a canonical text of the merged triples.

    Blank nodes in Turtle written with ``[ … ]`` and ``( … )`` form trees under named nodes, so
    each is written inline as the sorted text of its own triples; the result does not depend on
    blank node labels, triple order or file formatting.
    """
    spo: dict[Node, list[tuple[Node, Node]]] = {}
    for g in graphs:
        for s, p, o in g:
            spo.setdefault(s, []).append((p, o))

    def term(node: Node, trail: frozenset[Node]) -> str:
        if isinstance(node, BNode):
            if node in trail:
                return "[…]"
            inner = sorted(f"{_nt(p)} {term(o, trail | {node})}" for p, o in set(spo.get(node, ())))
            return "[" + " ; ".join(inner) + "]"
        return _nt(node)

    lines = sorted(
        f"{_nt(s)} {_nt(p)} {term(o, frozenset())}"
        for s, pairs in spo.items()
        if not isinstance(s, BNode)
        for p, o in set(pairs)
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _with_value_sets(
    digest: str,
    value_sets: Mapping[str, Any],
    history: Mapping[str, Any] | None = None,
    concept_maps: Mapping[str, Any] | None = None,
) -> str:
    """The digest, covering the members of the value sets the files use when there are any, and
    of their earlier expansions and the deployment's concept maps (a value set or map file
    edited changes what a run decides, so it changes the digest)."""
    if not value_sets and not history and not concept_maps:
        return digest
    members = sorted(f"{url} {' '.join(sorted(vs.codes))}" for url, vs in value_sets.items())
    for url, olds in sorted((history or {}).items()):
        members.extend(f"{url}|{vs.version} {' '.join(sorted(vs.codes))}" for vs in olds)
    for url, cm in sorted((concept_maps or {}).items()):
        members.append(
            f"{url}|{cm.version} "
            + " ".join(
                f"{src}>{t.target}:{t.equivalence}"
                for src, targets in sorted(cm.mappings.items())
                for t in targets
            )
        )
    lines = [digest, *members]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _nt(term: Node) -> str:
    if isinstance(term, (URIRef, BNode, Literal)):
        return str(term.n3())
    return str(term)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


__all__ = [
    "Registry",
    "default_ontology_paths",
    "load_ontology",
    "vocabulary_path",
    "vocabulary_terms",
]

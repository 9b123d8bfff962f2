"""``horismos verify`` and ``horismos schema``: plain functions the Typer app wraps.

Each returns the process exit code and writes through the ``out``/``err`` callables, so tests
call them directly and the CLI stays a thin shell.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from app.ontology.deployments import find_deployments, with_imports
from app.ontology.errors import OntologyError
from app.ontology.loader import Registry, default_ontology_paths, load_ontology, vocabulary_path
from app.ontology.model import Ontology
from app.ontology.schema import derive_schema
from app.ontology.verify import verify

Echo = Callable[[str], None]


def _paths(files: Sequence[Path]) -> list[Path]:
    return list(files) if files else default_ontology_paths()


def verify_files(
    files: Sequence[Path],
    *,
    out: Echo,
    err: Echo,
    registry: Registry | None = None,
    host_problems: Callable[[Ontology], list[str]] | None = None,
    configured: Sequence[Path] = (),
) -> int:
    """Load and verify; 0 and a summary when sound, else 1 and one line per problem.

    ``files`` load as one ontology, with the files they import (``owl:imports``). With no
    ``files``, what ``horismos serve`` would load: the ``configured`` paths
    (``HORISMOS_ONTOLOGY_PATHS``), else the bundled ontologies, as deployments, each loaded with
    its imports and verified on its own (serve does not serve one that fails, and neither
    passes here).

    ``registry`` is what ``python:NAME``/``rust:NAME`` bindings may name (the installed
    packages' tools; a name outside it is a load error); ``host_problems`` adds what the host
    cannot serve (a bound entry point that does not load)."""
    if files:
        return _verify_one(with_imports(files), None, out, err, registry, host_problems)
    paths = [Path(p) for p in configured] or default_ontology_paths()
    code = 0
    for source in find_deployments(paths, skip=vocabulary_path()):
        if source.problems:
            for problem in source.problems:
                out(str(problem))
            err(f"{len(source.problems)} problem(s): deployment {source.id} does not load")
            code = 1
            continue
        label = f"deployment {source.id} {source.version or ''}".rstrip()
        code = max(code, _verify_one(source.paths, label, out, err, registry, host_problems))
    return code


def _verify_one(
    paths: list[Path],
    label: str | None,
    out: Echo,
    err: Echo,
    registry: Registry | None,
    host_problems: Callable[[Ontology], list[str]] | None,
) -> int:
    what = label or "the ontology"
    try:
        ontology = load_ontology(paths, registry=registry)
    except OntologyError as exc:
        for problem in exc.problems:
            out(str(problem))
        err(f"{len(exc.problems)} problem(s): {what} does not load")
        return 1
    problems = [str(p) for p in verify(ontology)]
    problems += host_problems(ontology) if host_problems is not None else []
    for line in problems:
        out(line)
    if problems:
        err(f"{len(problems)} problem(s): {what} does not verify")
        return 1
    out(
        f"ok: {label + ': ' if label else ''}{len(paths)} file(s), {len(ontology.classes)} "
        f"classes, {len(ontology.properties)} properties, {len(ontology.rules)} rules, "
        f"{len(ontology.workflows)} workflow(s), {len(ontology.services)} CDS service(s); "
        f"version {ontology.version}, digest {ontology.digest[:12]}"
    )
    return 0


def schema_for_files(
    files: Sequence[Path], extracts: Sequence[str], *, out: Echo, err: Echo
) -> int:
    """Print the derived JSON Schema for ``extracts`` (local names resolve in the first file).

    ``--extracts Patient Symptom`` reaches here as files ``[…, Symptom]`` (an option takes one
    value), so positional words that are not Turtle files count as further classes.
    """
    if extracts:
        extra = [f for f in files if f.suffix != ".ttl" and not f.exists()]
        files = [f for f in files if f not in extra]
        extracts = [*extracts, *(str(f) for f in extra)]
    try:
        ontology = load_ontology(_paths(files))
    except OntologyError as exc:
        for problem in exc.problems:
            err(str(problem))
        return 1
    if not extracts:
        err("name at least one class with --extracts")
        return 1
    iris: list[str] = []
    for name in extracts:
        try:
            iri = ontology.resolve(name, namespace=ontology.namespace)
        except KeyError as exc:
            err(str(exc.args[0]))
            return 1
        if iri not in ontology.classes:
            err(f"{name!r} is not a class")
            return 1
        iris.append(iri)
    out(json.dumps(derive_schema(ontology, iris), indent=2, ensure_ascii=False))
    return 0

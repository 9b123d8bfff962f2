"""FHIR ConceptMap resources a deployment keeps beside its Turtle: translations of codes.

A deployment keeps its maps as FHIR R4 ``ConceptMap`` JSON files in a folder named
``conceptmaps`` beside its Turtle file (like ``valuesets``): a product code to its ingredient, a
retired code to its replacement. Each ``group`` names its ``source`` and ``target`` code
systems; each ``element`` a source code and its ``target`` codes with their ``equivalence``.
A map needs its canonical ``url`` and a ``version`` (an answer is recorded against the version
it came from); one that has neither, or no element, is a load problem, never an empty map.
Which equivalences make a mapped code count is ``app.terminology.port.COUNTING_EQUIVALENCES``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from app.ontology.classes import ConceptMapDef, MapTarget
from app.ontology.errors import Problem
from app.ontology.valuesets import folders_beside, read_canonical

FOLDER = "conceptmaps"


def map_folders_beside(paths: Iterable[str | Path]) -> list[Path]:
    """The ``conceptmaps`` folders next to the given Turtle files, each once, in load order."""
    return folders_beside(paths, FOLDER)


def load_concept_maps(folders: Iterable[Path]) -> tuple[dict[str, ConceptMapDef], list[Problem]]:
    """Every concept map in ``folders`` by canonical URL, and the problems found reading them."""
    found: dict[str, ConceptMapDef] = {}
    problems: list[Problem] = []
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            cm, problem = _read(path)
            if problem is not None:
                problems.append(problem)
                continue
            assert cm is not None
            first = found.setdefault(cm.url, cm)
            if first is not cm:
                problems.append(
                    Problem(
                        code="concept-map",
                        node=cm.url,
                        message=f"{path} and {first.source} define this canonical twice",
                    )
                )
    return found, problems


def _read(path: Path) -> tuple[ConceptMapDef | None, Problem | None]:
    def bad(message: str, node: str | None = None) -> tuple[None, Problem]:
        return None, Problem(code="concept-map", node=node or str(path), message=message)

    found = read_canonical(path, "ConceptMap", "concept-map")
    if isinstance(found, Problem):
        return None, found
    data, url = found
    version = data.get("version")
    if not isinstance(version, str) or not version:
        return bad(f"{path.name}: a ConceptMap needs its version (answers are pinned to it)", url)
    mappings: dict[str, list[MapTarget]] = {}
    groups = data.get("group")
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict):
            continue
        source, target = group.get("source"), group.get("target")
        if not isinstance(source, str) or not isinstance(target, str):
            return bad(f"{path.name}: each group names its source and target code systems", url)
        elements = group.get("element")
        for element in elements if isinstance(elements, list) else []:
            if not isinstance(element, dict) or not element.get("code"):
                continue
            for t in element.get("target") or []:
                if not isinstance(t, dict):
                    continue
                equivalence = t.get("equivalence") or t.get("relationship")
                if not isinstance(equivalence, str):
                    return bad(f"{path.name}: target of {element['code']} has no equivalence", url)
                code = t.get("code")
                mappings.setdefault(f"{source}|{element['code']}", []).append(
                    MapTarget(
                        target=f"{target}|{code}" if code else "",
                        equivalence=equivalence,
                    )
                )
    if not mappings:
        return bad(f"{path.name}: maps no code", url)
    name = data.get("name") or data.get("title") or data.get("id") or path.stem
    return (
        ConceptMapDef(
            url=url,
            version=version,
            name=str(name),
            source=str(path),
            mappings={k: tuple(v) for k, v in mappings.items()},
        ),
        None,
    )

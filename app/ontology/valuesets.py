"""FHIR ValueSet resources as code sets the ontology names by canonical URL.

A deployment keeps its value sets as FHIR R4 ``ValueSet`` JSON files in a folder named
``valuesets`` beside its Turtle file; ``load_value_sets`` reads every ``*.json`` there. The
members of a value set are its expansion (``expansion.contains``, nested ``contains`` included),
or, for a value set without an expansion, the concepts its ``compose.include`` lists. A value set
that is defined only by rules a loader cannot evaluate here (a hierarchy filter, another value
set, an exclusion) and carries no expansion cannot be used: that is a load problem, never an
empty set. An expansion may be empty (FHIR allows it); verify then reports every class it
leaves empty (``app.ontology._verify_terminology``). Membership is the pair ``system|code``; a
code's version and display do not matter.

**Earlier expansions.** A folder ``valuesets/history`` may hold earlier versions of those value
sets (same canonical ``url``, another ``version``): a record coded with a code that only an
earlier expansion lists still counts as a member, and the run says so in a data-quality note
(real charts keep codes a value set has since dropped). **Supplements** (``valuesets/supplements``,
same canonical, a version of their own) count the same way: codes derived from the value set's
members by the rule their ``description`` states (the branded products of its clinical drugs),
noted as such. ``load_value_sets`` returns them apart,
by canonical, and refuses one without a version, of a canonical no current file defines, or of
the current version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from app.ontology.classes import ValueSetDef
from app.ontology.errors import Problem, ProblemCode

FOLDER = "valuesets"
#: the subfolder of ``valuesets`` holding earlier expansions
HISTORY = "history"
#: the subfolder of ``valuesets`` holding supplements: codes derived from a value set's members
#: by a stated rule (the branded products of its clinical drugs)
SUPPLEMENTS = "supplements"


def folders_beside(paths: Iterable[str | Path], name: str = FOLDER) -> list[Path]:
    """The folders called ``name`` (default ``valuesets``) next to the given Turtle files,
    each once, in load order."""
    out: dict[Path, None] = {}
    for raw in paths:
        folder = Path(raw).resolve().parent / name
        if folder.is_dir():
            out.setdefault(folder, None)
    return list(out)


def load_value_sets(folders: Iterable[Path]) -> tuple[dict[str, ValueSetDef], list[Problem]]:
    """Every value set in ``folders`` by canonical URL, and the problems found reading them."""
    found, _history, problems = load_value_sets_with_history(folders, history=False)
    return found, problems


def load_value_sets_with_history(
    folders: Iterable[Path], *, history: bool = True
) -> tuple[dict[str, ValueSetDef], dict[str, tuple[ValueSetDef, ...]], list[Problem]]:
    """The current value sets by canonical URL, their earlier expansions (``history``
    subfolders) by canonical URL, and the problems found reading them."""
    folders = list(folders)
    found: dict[str, ValueSetDef] = {}
    problems: list[Problem] = []
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            vs, problem = _read_once(path)
            if problem is not None:
                problems.append(problem)
                continue
            assert vs is not None
            first = found.setdefault(vs.url, vs)
            if first is not vs and first.codes != vs.codes:
                problems.append(
                    Problem(
                        code="value-set",
                        node=vs.url,
                        message=f"{path} and {first.source} define this canonical differently",
                    )
                )
    earlier: dict[str, list[ValueSetDef]] = {}
    for folder, sub in (
        (f, s) for f in (folders if history else []) for s in (HISTORY, SUPPLEMENTS)
    ):
        for path in sorted((folder / sub).glob("*.json")):
            vs, problem = _read_once(path)
            if vs is not None and sub == SUPPLEMENTS:
                vs = _as_supplement(vs, path)
            if problem is None:
                assert vs is not None
                problem = _earlier_problem(vs, found.get(vs.url), earlier.get(vs.url, []))
            if problem is not None:
                problems.append(problem)
                continue
            assert vs is not None
            earlier.setdefault(vs.url, []).append(vs)
    return found, {url: tuple(v) for url, v in earlier.items()}, problems


def _as_supplement(vs: ValueSetDef, path: Path) -> ValueSetDef:
    """A supplement's codes, with how they derive (its ``description``) to say in a note."""
    data = json.loads(path.read_text(encoding="utf-8"))
    said = data.get("description") if isinstance(data, dict) else None
    return replace(vs, derived=str(said) if said else "a supplement of the value set")


def _earlier_problem(
    vs: ValueSetDef, current: ValueSetDef | None, known: list[ValueSetDef]
) -> Problem | None:
    """Why an earlier expansion cannot be used beside ``current``, or None."""

    def bad(message: str) -> Problem:
        return Problem(code="value-set", node=vs.url, message=f"{vs.source}: {message}")

    if vs.version is None:
        return bad("an earlier expansion needs its version")
    if current is None:
        return bad(f"no current value set in {FOLDER} has this canonical")
    if vs.version == current.version:
        return bad(f"is version {vs.version}, the current one, not an earlier expansion")
    if any(k.version == vs.version for k in known):
        return bad(f"version {vs.version} is given twice")
    return None


def _read_once(path: Path) -> tuple[ValueSetDef | None, Problem | None]:
    """A value set file read once per content (by path, modification time and size): the
    deployments beside one ``valuesets`` folder share what it holds."""
    try:
        stat = path.stat()
    except OSError:
        return _read(path)
    return _read_cached(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=1024)
def _read_cached(name: str, mtime_ns: int, size: int) -> tuple[ValueSetDef | None, Problem | None]:
    return _read(Path(name))


def read_canonical(
    path: Path, resource_type: str, code: ProblemCode
) -> tuple[dict[str, Any], str] | Problem:
    """The FHIR ``resource_type`` resource in the JSON file ``path`` and its canonical url, or
    the problem (of ``code``) that keeps it from being read."""

    def bad(message: str) -> Problem:
        return Problem(code=code, node=str(path), message=message)

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return bad(f"not a readable JSON file: {exc}")
    if not isinstance(data, dict) or data.get("resourceType") != resource_type:
        return bad(f"is not a FHIR {resource_type} resource")
    url = data.get("url")
    if not isinstance(url, str) or not url:
        return bad(f"a {resource_type} needs its canonical url")
    return data, url


def _read(path: Path) -> tuple[ValueSetDef | None, Problem | None]:
    def bad(message: str, node: str | None = None) -> tuple[None, Problem]:
        return None, Problem(code="value-set", node=node or str(path), message=message)

    found = read_canonical(path, "ValueSet", "value-set")
    if isinstance(found, Problem):
        return None, found
    data, url = found
    expansion = data.get("expansion")
    displays: set[str] = set()
    if isinstance(expansion, dict):
        codes = set(_contains(expansion.get("contains"), displays))
    else:
        compose = data.get("compose") if isinstance(data.get("compose"), dict) else {}
        includes = compose.get("include") if isinstance(compose, dict) else None
        codes = set()
        for inc in includes if isinstance(includes, list) else []:
            if not isinstance(inc, dict):
                continue
            if inc.get("filter") or inc.get("valueSet") or not inc.get("concept"):
                return bad(
                    f"{path.name}: compose selects codes by a filter, another value set or a "
                    "whole code system, which cannot be evaluated here; give it an expansion",
                    url,
                )
            codes.update(
                f"{inc.get('system', '')}|{c.get('code')}"
                for c in inc["concept"]
                if isinstance(c, dict) and c.get("code")
            )
            displays.update(
                c["display"]
                for c in inc["concept"]
                if isinstance(c, dict) and isinstance(c.get("display"), str)
            )
        if isinstance(compose, dict) and compose.get("exclude"):
            return bad(f"{path.name}: compose excludes codes; give it an expansion", url)
    if not codes and not isinstance(expansion, dict):
        return bad(f"{path.name}: lists no member codes", url)
    name = data.get("name") or data.get("title") or data.get("id") or path.stem
    version = data.get("version")
    return (
        ValueSetDef(
            url=url,
            name=str(name),
            codes=frozenset(codes),
            source=str(path),
            version=str(version) if version is not None else None,
            displays=frozenset(displays),
        ),
        None,
    )


def _contains(entries: Any, displays: set[str]) -> Iterator[str]:
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict):
            continue
        if e.get("code") and not e.get("abstract"):
            yield f"{e.get('system', '')}|{e['code']}"
            if isinstance(e.get("display"), str):
                displays.add(e["display"])
        yield from _contains(e.get("contains"), displays)

"""The FHIR definitions the service holds: ActivityDefinitions, PlanDefinitions,
Questionnaires and Libraries read from JSON files at start (``HORISMOS_DEFINITION_PATHS``), by
canonical url (with and without its version) and by ``Type/id``.

A plan's ``definitionCanonical`` and ``$apply`` by url or id find them here. Every file is one
resource or a Bundle of them; each resource is checked as R4 when it is read, and a file that
is not JSON, a resource that is not valid R4, a type not listed in :data:`TYPES` and two
definitions claiming the same ``url|version`` or ``Type/id`` stop the service from starting
with the file named, as a Turtle deployment that does not load does: a definition the service
cannot read is never skipped quietly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine

from app.fhir_validate import problems
from app.plandefinition.refusals import ApplyRefused
from app.store.definitions import (
    stored_by_id,
    stored_of_type,
    stored_version,
    stored_with_url,
)

#: The definition types a folder may hold: a Library is held as an artifact (read back,
#: versioned), never evaluated.
TYPES = ("ActivityDefinition", "PlanDefinition", "Questionnaire", "Library")
#: What an action's ``definitionCanonical`` may name.
ACTION_DEFINITIONS = ("ActivityDefinition", "PlanDefinition", "Questionnaire")


class DefinitionError(ValueError):
    """A definition file the service cannot read: every problem, each naming its file."""


@dataclass(frozen=True)
class Definitions:
    """Definitions by ``url``, ``url|version`` and ``Type/id``."""

    by_key: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: every definition once, in the order read
    resources: tuple[Mapping[str, Any], ...] = ()
    #: urls held in several versions: a canonical naming one of them needs its ``|version``
    ambiguous: frozenset[str] = frozenset()

    def canonical(self, url: str) -> Mapping[str, Any] | None:
        """The definition a canonical (``url`` or ``url|version``) names, if held once."""
        return None if url in self.ambiguous else self.by_key.get(url)

    def by_id(self, resource_type: str, ident: str) -> Mapping[str, Any] | None:
        return self.by_key.get(f"{resource_type}/{ident}")

    def is_ambiguous(self, url: str) -> bool:
        return url in self.ambiguous

    def of_type(self, resource_type: str) -> list[Mapping[str, Any]]:
        """Every definition of ``resource_type``, in the order read."""
        return [r for r in self.resources if r["resourceType"] == resource_type]

    def with_url(self, url: str) -> list[Mapping[str, Any]]:
        """Every version of the definition at ``url`` (a bare url)."""
        return [r for r in self.resources if r.get("url") == url]

    def __len__(self) -> int:
        return len(self.resources)


class DefinitionSource(Protocol):
    """Where a call finds definitions: the files read at start, with the ones written over
    FHIR when the service stores them (:class:`HeldDefinitions`)."""

    def canonical(self, url: str) -> Mapping[str, Any] | None: ...

    def by_id(self, resource_type: str, ident: str) -> Mapping[str, Any] | None: ...

    def of_type(self, resource_type: str) -> list[Mapping[str, Any]]: ...

    def is_ambiguous(self, url: str) -> bool: ...


@dataclass(frozen=True)
class HeldDefinitions:
    """The files' definitions first, then those written with ``PUT /fhir/{type}/{id}``
    (``app.store.definitions``; the latest write of an id, or the one of a ``url|version``)."""

    files: Definitions
    engine: Engine

    def _candidates(self, url: str) -> list[Mapping[str, Any]]:
        bare, _, version = url.partition("|")
        if version:
            held = self.files.canonical(url)
            if held is not None:
                return [held]
            return list[Mapping[str, Any]](stored_version(self.engine, bare, version))
        # the files are the release: a url they hold answers from them alone
        return self.files.with_url(bare) or list[Mapping[str, Any]](
            stored_with_url(self.engine, bare)
        )

    def canonical(self, url: str) -> Mapping[str, Any] | None:
        found = self._candidates(url)
        return found[0] if len(found) == 1 else None

    def is_ambiguous(self, url: str) -> bool:
        return len(self._candidates(url)) > 1

    def by_id(self, resource_type: str, ident: str) -> Mapping[str, Any] | None:
        held = self.files.by_id(resource_type, ident)
        return held if held is not None else stored_by_id(self.engine, resource_type, ident)

    def of_type(self, resource_type: str) -> list[Mapping[str, Any]]:
        return [*self.files.of_type(resource_type), *stored_of_type(self.engine, resource_type)]


def resolve(definitions: DefinitionSource, canonical: str, where: str) -> Mapping[str, Any]:
    """The definition ``canonical`` names (``where``: the action naming it), or the refusal
    saying it is not held, or held in several versions."""
    held = definitions.canonical(canonical)
    if held is None:
        why = (
            "is held in several versions: name one as url|version"
            if definitions.is_ambiguous(canonical)
            else "is not among the service's definitions"
        )
        raise ApplyRefused(
            422,
            "not-found",
            f"{where}.definitionCanonical {canonical} {why}",
            f"{where}.definitionCanonical",
        )
    if held.get("resourceType") not in ACTION_DEFINITIONS:
        raise ApplyRefused(
            422,
            "not-supported",
            f"{where}.definitionCanonical {canonical} names a {held.get('resourceType')}, which "
            f"an action does not apply (it names a {', '.join(ACTION_DEFINITIONS)})",
            f"{where}.definitionCanonical",
        )
    return held


def _resources(value: Any) -> Iterable[Any]:
    if isinstance(value, dict) and value.get("resourceType") == "Bundle":
        for entry in value.get("entry") or ():
            yield entry.get("resource") if isinstance(entry, dict) else entry
    else:
        yield value


def _fingerprint(folder: Path) -> tuple[Any, ...]:
    if not folder.is_dir():
        return (str(folder),)
    files = sorted(folder.glob("*.json"))
    return (str(folder), *((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files))


def load_definitions(folders: Iterable[Path]) -> Definitions:
    """Every ``*.json`` file of ``folders`` (sorted), or a ``DefinitionError`` naming each
    problem. Read once while the files stay as they are: the service's deployments and its
    ``$apply`` both ask at start, and see the same definitions."""
    return _load(tuple(_fingerprint(Path(f)) for f in folders))


@lru_cache(maxsize=16)
def _load(fingerprints: tuple[tuple[Any, ...], ...]) -> Definitions:
    folders = [Path(f[0]) for f in fingerprints]
    by_key: dict[str, Mapping[str, Any]] = {}
    ambiguous: set[str] = set()
    resources: list[Mapping[str, Any]] = []
    found: list[str] = []
    for folder in folders:
        if not folder.is_dir():
            found.append(f"{folder}: not a folder")
            continue
        for path in sorted(folder.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                found.append(f"{path}: not readable JSON ({exc})")
                continue
            for resource in _resources(data):
                kind = resource.get("resourceType") if isinstance(resource, dict) else None
                if kind not in TYPES:
                    found.append(f"{path}: a {kind or 'non-resource'} is not a definition")
                    continue
                wrong = problems(resource)
                if wrong:
                    where, rule = wrong[0]
                    found.append(f"{path}: {kind}{where}: {rule}")
                    continue
                if not isinstance(resource.get("id"), str):
                    found.append(f"{path}: a {kind} without an id cannot be pointed at")
                    continue
                resources.append(resource)
                keys = [f"{kind}/{resource['id']}"]
                url = resource.get("url")
                if isinstance(url, str):
                    keys.append(url)
                    if resource.get("version"):
                        keys.append(f"{url}|{resource['version']}")
                for key in keys:
                    if key not in by_key:
                        by_key[key] = resource
                    elif key == url and resource.get("version"):
                        ambiguous.add(url)  # several versions: only url|version names one
                    else:
                        found.append(f"{path}: {key} is defined twice")
    if found:
        raise DefinitionError("; ".join(found))
    return Definitions(by_key=by_key, resources=tuple(resources), ambiguous=frozenset(ambiguous))


__all__ = ["TYPES", "DefinitionError", "Definitions", "load_definitions", "resolve"]

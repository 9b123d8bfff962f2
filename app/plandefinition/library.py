"""The FHIR definitions the service holds: ActivityDefinitions, PlanDefinitions and
Questionnaires read from JSON files at start (``HORISMOS_DEFINITION_PATHS``), by canonical url
(with and without its version) and by ``Type/id``.

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
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine

from app.fhir_validate import problems
from app.store.definitions import (
    stored_by_id,
    stored_of_type,
    stored_version,
    stored_with_url,
)

#: The definition types a folder may hold.
TYPES = ("ActivityDefinition", "PlanDefinition", "Questionnaire")


class DefinitionError(ValueError):
    """A definition file the service cannot read: every problem, each naming its file."""


@dataclass(frozen=True)
class Definitions:
    """Definitions by ``url``, ``url|version`` and ``Type/id``."""

    by_key: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    files: tuple[str, ...] = ()
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
        """Every definition of ``resource_type``, once each, in the order read."""
        seen: dict[int, Mapping[str, Any]] = {}
        for resource in self.by_key.values():
            if resource["resourceType"] == resource_type:
                seen.setdefault(id(resource), resource)
        return list(seen.values())

    def of_type_all(self) -> list[Mapping[str, Any]]:
        """Every definition, once each."""
        return list({id(v): v for v in self.by_key.values()}.values())

    def __len__(self) -> int:
        return len({id(v) for v in self.by_key.values()})


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
        found: list[Mapping[str, Any]] = [
            d for d in self.files.of_type_all() if d.get("url") == bare
        ]
        # the files are the release: a url they hold answers from them alone
        return found or list[Mapping[str, Any]](stored_with_url(self.engine, bare))

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


def _resources(value: Any) -> Iterable[Any]:
    if isinstance(value, dict) and value.get("resourceType") == "Bundle":
        for entry in value.get("entry") or ():
            yield entry.get("resource") if isinstance(entry, dict) else entry
    else:
        yield value


def load_definitions(folders: Iterable[Path]) -> Definitions:
    """Every ``*.json`` file of ``folders`` (sorted), or a ``DefinitionError`` naming each
    problem."""
    by_key: dict[str, Mapping[str, Any]] = {}
    ambiguous: set[str] = set()
    files: list[str] = []
    found: list[str] = []
    for folder in folders:
        if not folder.is_dir():
            found.append(f"{folder}: not a folder")
            continue
        for path in sorted(folder.glob("*.json")):
            files.append(str(path))
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
    return Definitions(by_key=by_key, files=tuple(files), ambiguous=frozenset(ambiguous))


__all__ = ["TYPES", "DefinitionError", "Definitions", "load_definitions"]

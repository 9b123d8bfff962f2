"""The World's value types: facts, instances, sources, changes, violations, transaction results.

All are frozen dataclasses. Identifiers are full IRIs (properties, classes, rules, enumeration
individuals) or plain instance ids (``"p1"``, a FHIR id). Values are ``Decimal | int | str | bool``;
an object value is an instance id or an individual IRI.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, TypeAlias, get_args

from app.ontology.model import Value

Provenance = Literal["api", "perception", "tool", "rule", "human"]
PROVENANCES: tuple[Provenance, ...] = get_args(Provenance)

#: ``(subject, property IRI, value)``: how facts are named inside justifications.
FactKey: TypeAlias = tuple[str, str, Value]


def json_value(value: Value) -> Any:
    """A JSON-native rendering of a value: exact decimals as strings are avoided for readability,
    integral decimals become ints, other decimals floats (display only; see ``World.to_json`` for
    the exact form). A value that is no number JSON has (``Infinity``, ``NaN``: only ever one the
    gate refused, kept in its violation) is its text."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        return int(value) if value == value.to_integral_value() else float(value)
    return value


@dataclass(frozen=True)
class Source:
    """Where a fact came from: a FHIR reference and the version that was read, and the date
    the resource gives its content (when it was observed, recorded or ordered), verbatim."""

    resource_type: str
    id: str
    version_id: str | None = None
    last_updated: str | None = None
    date: str | None = None

    @property
    def reference(self) -> str:
        return f"{self.resource_type}/{self.id}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"resourceType": self.resource_type, "id": self.id}
        if self.version_id is not None:
            out["versionId"] = self.version_id
        if self.last_updated is not None:
            out["lastUpdated"] = self.last_updated
        if self.date is not None:
            out["date"] = self.date
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Source:
        return cls(
            str(data["resourceType"]),
            str(data["id"]),
            data.get("versionId"),
            data.get("lastUpdated"),
            data.get("date"),
        )


@dataclass(frozen=True)
class Absence:
    """A negative premise: nothing was reachable from ``subject`` along ``path``."""

    subject: str
    path: tuple[str, ...]


@dataclass(frozen=True)
class Justification:
    """One derivation: ``rule`` fired on ``subject`` because of ``premises`` (present facts)
    and ``absent`` (paths that reached nothing)."""

    rule: str
    subject: str
    premises: tuple[FactKey, ...]
    absent: tuple[Absence, ...] = ()


@dataclass(frozen=True)
class Fact:
    """A visible fact. ``provenance`` is the base assertion's, or ``"rule"`` for a fact that is
    only derived; ``justifications`` lists every current derivation (empty for a base fact that no
    rule derives)."""

    subject: str
    property: str
    value: Value
    provenance: Provenance
    confidence: float | None
    source: Source | None
    tx: int
    justifications: tuple[Justification, ...] = ()

    @builtins.property
    def key(self) -> FactKey:
        return (self.subject, self.property, self.value)

    @builtins.property
    def derived(self) -> bool:
        return self.provenance == "rule"


@dataclass(frozen=True)
class Instance:
    """An individual in the World: an id and its (most specific) class."""

    id: str
    class_iri: str
    provenance: Provenance = "api"
    source: Source | None = None


# --- changes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddInstance:
    id: str
    class_iri: str
    source: Source | None = None


@dataclass(frozen=True)
class Assert:
    """Assert a base fact. ``unit`` (UCUM) says what unit the value is in; when it differs from
    the property's unit the gate rejects it (conversion happens upstream, in the adapter)."""

    subject: str
    property: str
    value: Value | float  # floats are read exactly through their shortest text
    source: Source | None = None
    confidence: float | None = None
    unit: str | None = None


@dataclass(frozen=True)
class Retract:
    """Retract a base fact; ``value=None`` retracts every base value of the property."""

    subject: str
    property: str
    value: Value | float | None = None


Change: TypeAlias = AddInstance | Assert | Retract

ViolationCode = Literal[
    "domain",
    "range",
    "min",
    "max",
    "pattern",
    "oneOf",
    "cardinality",
    "rules-only",
    "unit",
    "unknown-property",
    "unknown-class",
    "unknown-subject",
    "conflict",
    "derived",
    "confidence",
    "duplicate-instance",
    "subject",  # the FHIR adapter: a resource about someone other than the focus, not read
]


@dataclass(frozen=True)
class Violation:
    """Why the gate (or the fixed point) refused a transaction."""

    code: ViolationCode
    subject: str | None
    property: str | None
    value: object
    message: str

    def to_json(self) -> dict[str, Any]:
        def enc(v: object) -> Any:
            if isinstance(v, Decimal):
                return json_value(v)
            if isinstance(v, tuple | list):
                return [enc(x) for x in v]
            if isinstance(v, str | int | float | bool | type(None)):
                return v
            return repr(v)

        value = enc(self.value)
        return {
            "code": self.code,
            "subject": self.subject,
            "property": self.property,
            "value": value,
            "message": self.message,
        }


@dataclass(frozen=True)
class TxResult:
    """What a transaction did. When ``ok`` is false nothing changed and ``tx`` was not used."""

    ok: bool
    tx: int
    added: tuple[Fact, ...] = ()
    removed: tuple[Fact, ...] = ()
    violations: tuple[Violation, ...] = ()

    def to_json(self) -> dict[str, Any]:
        def fact(f: Fact) -> dict[str, Any]:
            return {
                "subject": f.subject,
                "property": f.property,
                "value": json_value(f.value),
                "provenance": f.provenance,
            }

        return {
            "ok": self.ok,
            "tx": self.tx,
            "added": [fact(f) for f in self.added],
            "removed": [fact(f) for f in self.removed],
            "violations": [v.to_json() for v in self.violations],
        }


@dataclass(frozen=True)
class Snapshot:
    """A point to ``World.restore`` to: the version and the history entry it was taken at."""

    version: int
    mark: int
    world: int


class WorldError(Exception):
    """Raised for misuse that is not a gate decision: restoring a foreign or stale snapshot,
    loading JSON whose facts no longer pass the gate (``.violations`` says which)."""

    def __init__(self, message: str, violations: tuple[Violation, ...] = ()) -> None:
        super().__init__(message)
        self.violations = violations


class StratificationError(ValueError):
    """Raised when a rule set is not stratifiable: ``rules`` are the IRIs on a cycle through
    negation (``isAssigned false``) or through a ``FirstListed`` property."""

    def __init__(self, message: str, rules: tuple[str, ...]) -> None:
        super().__init__(message)
        self.rules = rules

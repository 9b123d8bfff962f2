"""Tools (``horis:Tool``): their arguments, the facts they assert, and the FHIR write an
adapter makes for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, kw_only=True)
class ToolArg:
    """``horis:arg [ horis:name "queue" ; horis:type :AcuityLevel ]``."""

    name: str
    type: str  # class IRI or xsd datatype IRI


@dataclass(frozen=True, kw_only=True)
class EffectDecl:
    """``horis:asserts [ horis:property P ; horis:value horis:now | horis:type T ]``."""

    property: str
    type: str | None = None  # what the tool must return under the property's local name
    now: bool = False  # horis:value horis:now: filled by the runtime, not the tool


CommitOperation = Literal["update", "patch", "create"]


@dataclass(frozen=True, kw_only=True)
class AdapterCommit:
    """``horis:commits [ … ]`` on a tool: an adapter-mediated write to the FHIR server.

    ``update`` (``horis:Update``) and ``patch`` (``horis:Patch``) change ``element`` of the
    hydrated resource of ``resource_type`` (its version comes from the run's source-version
    vector), set from argument ``value_arg`` translated through the argument value's
    ``horis:code`` in ``code_system``: ``update`` PUTs the whole resource, ``patch`` sends a JSON
    Patch of that one element; both only against the version the run read (``If-Match``).
    ``create`` (``horis:Create``) POSTs a new resource rendered from ``template`` (JSON with
    ``{{…}}`` placeholders), or the request the ActivityDefinition of ``activity`` defines for
    the call (``instantiatesCanonical`` set), conditionally on its identifier
    (``If-None-Exist``) so a retry never creates it twice. The call is made only when
    ``fhirAuthorization.scope`` grants ``scope``.
    """

    resource_type: str  # horis:resourceType "Encounter"
    element: str = ""  # horis:element "priority" (update, patch)
    value_arg: str = ""  # horis:valueArg "queue" (update, patch)
    code_system: str | None = None  # horis:codeSystem "http://terminology.hl7.org/…"
    operation: CommitOperation = "update"  # horis:operation horis:Update | Patch | Create
    scope: str = ""  # horis:scope "user/Encounter.write"
    template: str | None = None  # horis:template: the JSON body of a create
    #: horis:activity in place of a template: the request the create writes, as JSON holding an
    #: R4 ActivityDefinition (``app.ontology.activity``), built as ``$apply`` builds it
    activity: str | None = None

    @property
    def is_message(self) -> bool:
        """A create of a message between people (a FHIR ``Communication``): the one write an
        undecided run still makes, so that somebody hears of it."""
        return self.operation == "create" and self.resource_type in _MESSAGE_TYPES


#: FHIR resource types that are messages between people, not a record's content
_MESSAGE_TYPES = frozenset({"Communication"})


@dataclass(frozen=True, kw_only=True)
class ToolDef:
    """``T a horis:Tool`` (docs/tools.md)."""

    iri: str
    name: str
    args: tuple[ToolArg, ...]
    effects: tuple[EffectDecl, ...]
    binding: str  # python:… | rust:… | http(s)://… | mcp://server/tool | fhir:commit
    timeout: float = 5.0  # horis:timeout "5s" in seconds
    idempotent: bool = False
    retries: int | None = None  # horis:retries; None = the default (0 when non-idempotent)
    commits: AdapterCommit | None = None
    pure: bool = False  # horis:pure: computes from its arguments only, acts on nothing outside
    label: str | None = None  # rdfs:label

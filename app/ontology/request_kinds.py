"""The request types an ActivityDefinition may define here, as R4 shapes them, and the check
that a definition can be applied at all: its logic FHIRPath, its ``kind`` one this host
builds, no element the request would be built without, a ``doNotPerform`` the type can say.

Below the ontology package so that a deployment's ``horis:activity`` (on a suggestion, in a
create commit) is checked at load as ``ActivityDefinition/$apply`` checks a definition
(``app.ontology.activity``); ``app.plandefinition.activity`` builds the requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.plandefinition.refusals import ApplyRefused

FHIRPATH = "text/fhirpath"


@dataclass(frozen=True, kw_only=True)
class Kind:
    """Where a request type takes what the definition and the call give (None: it has no
    such element, and it is not written)."""

    subject: str = "subject"
    intent: bool = True
    status: bool = True
    priority: bool = True
    code: str | None = "code"
    #: "many" (an array), "one" (a Task's single canonical) or None
    canonical: str | None = "many"
    #: "element", "extension" (only when true, as a modifier extension) or None
    do_not_perform: str | None = "element"
    requester: str | None = "requester"
    encounter: str | None = "encounter"
    #: the choice element the definition's product[x] goes to (medication[x])
    product: str | None = None
    dosage: str | None = None


#: The request types an ActivityDefinition's ``kind`` may name here, as R4 shapes them.
KINDS: dict[str, Kind] = {
    "ServiceRequest": Kind(),
    "MedicationRequest": Kind(code=None, product="medication", dosage="dosageInstruction"),
    "DeviceRequest": Kind(code="codeCodeableConcept", do_not_perform=None),
    "Task": Kind(subject="for", canonical="one", do_not_perform="extension"),
    "CommunicationRequest": Kind(intent=False, code=None, canonical=None),
    "ImmunizationRecommendation": Kind(
        subject="patient",
        intent=False,
        status=False,
        priority=False,
        code=None,
        canonical=None,
        do_not_perform=None,
        requester=None,
        encounter=None,
    ),
}

#: Elements of a definition that shape the request and are not carried over here: a definition
#: with one is refused rather than applied without it.
NOT_CARRIED = (
    "timing",
    "location",
    "participant",
    "quantity",
    "bodySite",
    "specimenRequirement",
    "observationRequirement",
    "observationResultRequirement",
    "transform",
)


def refuse_other_languages(values: Any, where: str) -> None:
    """Refuse a dynamic value not written in FHIRPath (CQL above all), naming it."""
    for i, dv in enumerate(values or ()):
        expression = (dv or {}).get("expression") or {}
        language = str(expression.get("language", ""))
        if language != FHIRPATH:
            raise ApplyRefused(
                422,
                "not-supported",
                f"{where}.dynamicValue[{i}] ({dv.get('path')}) is written in "
                f"{language or 'no language'} ({expression.get('expression')!r}): this host "
                f"evaluates FHIRPath ({FHIRPATH}) and its own rules, not CQL",
                f"{where}.dynamicValue[{i}].expression",
            )


def check_activity(definition: Mapping[str, Any]) -> tuple[str, Kind]:
    """The request type and :class:`Kind` a valid ActivityDefinition builds, or the refusal
    naming what this host cannot apply (its logic, its kind, an element it would drop)."""
    refuse_other_languages(definition.get("dynamicValue"), "ActivityDefinition")
    if definition.get("library"):
        raise ApplyRefused(
            422,
            "not-supported",
            f"the ActivityDefinition {definition.get('url') or definition.get('id')} names a "
            "logic library: this host evaluates FHIRPath and its own rules, not CQL",
            "ActivityDefinition.library",
        )
    resource_type = definition.get("kind")
    kind = KINDS.get(resource_type) if isinstance(resource_type, str) else None
    if kind is None or not isinstance(resource_type, str):
        raise ApplyRefused(
            422,
            "not-supported",
            f"ActivityDefinition.kind {resource_type!r} is not one this host builds "
            f"({', '.join(sorted(KINDS))})",
            "ActivityDefinition.kind",
        )
    immunization = resource_type == "ImmunizationRecommendation"
    kept = {"product": kind.product or immunization, "dosage": kind.dosage}
    if immunization and "productReference" in definition:
        kept["product"] = None
    for key in definition:
        base = next((n for n in (*NOT_CARRIED, *kept) if key.startswith(n)), None)
        if base is not None and not kept.get(base):
            raise ApplyRefused(
                422,
                "not-supported",
                f"ActivityDefinition.{key} is not carried into a {resource_type} here: applying "
                "the definition without it would drop what it asks for",
                f"ActivityDefinition.{key}",
            )
    if definition.get("doNotPerform") is True and kind.do_not_perform is None:
        raise ApplyRefused(
            422,
            "not-supported",
            f"the definition says not to perform it, and a {resource_type} has no way to say "
            "so here: applying it would propose the opposite",
            "ActivityDefinition.doNotPerform",
        )
    return resource_type, kind


__all__ = ["FHIRPATH", "KINDS", "NOT_CARRIED", "Kind", "check_activity", "refuse_other_languages"]

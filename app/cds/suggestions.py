"""Suggestions that fix a draft order: the order a deployment names in its place.

A card's ``horis:suggest`` with ``horis:alternative`` declarations (``AlternativeDecl``) acts on
the draft MedicationRequests it cites: the first alternative that replaces a code of a draft's
drug (its ``medicationCodeableConcept``, or the code of the Medication its
``medicationReference`` names, contained or read in the same call) gives the CDS Hooks 2.0
actions that swap the alternative in:

- ``update``: the draft in its entirety, same ``id``, its drug replaced by the alternative's
  (coding with display, and the display as text); the Medication it referenced is dropped;
- ``create``: the same order as a new resource (no ``id``, ``identifier`` or ``meta``) and a
  ``delete`` of the draft.

The draft's dosage instructions and dispensed quantity (``dispenseRequest.quantity``,
``initialFill``) were written for the drug it replaces: they are left out unless the
alternative says ``horis:keepDosage true``, and the alternative's own ``horis:dosage`` (a FHIR
R4 Dosage) takes their place where it gives one; its narrative (``text``) described the old drug and
is left out. Everything else (status, intent, category, subject, encounter, requester, dates,
supply duration, validity period, repeats) is kept. The codes come from the declaration, which
the loader checked are codes the deployment knows; nothing here names a drug of its own.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from app.ontology.model import AlternativeDecl, SuggestionDecl


def drug_codes(order: Mapping[str, Any], resources: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The ``system|code`` of every coding of the order's drug, in the order given."""
    concept = order.get("medicationCodeableConcept")
    if not isinstance(concept, Mapping):
        medication = _referenced(order, resources)
        concept = medication.get("code") if medication is not None else None
    out: list[str] = []
    codings = concept.get("coding") if isinstance(concept, Mapping) else None
    for coding in codings if isinstance(codings, list) else ():
        if isinstance(coding, Mapping):
            system, code = coding.get("system"), coding.get("code")
            if isinstance(system, str) and isinstance(code, str):
                out.append(f"{system}|{code}")
    return out


def _referenced(
    order: Mapping[str, Any], resources: Mapping[str, Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The Medication the order's ``medicationReference`` names (contained or read)."""
    ref = order.get("medicationReference")
    target = ref.get("reference") if isinstance(ref, Mapping) else None
    if not isinstance(target, str):
        return None
    if target.startswith("#"):
        for item in order.get("contained") or ():
            if isinstance(item, Mapping) and item.get("id") == target[1:]:
                return item
        return None
    return resources.get(target)


def alternative_for(decl: SuggestionDecl, codes: list[str]) -> AlternativeDecl | None:
    """The first of the suggestion's alternatives that replaces one of ``codes``."""
    for alt in decl.alternatives:
        if any(code in alt.replaces for code in codes):
            return alt
    return None


def alternative_order(order: Mapping[str, Any], alt: AlternativeDecl) -> dict[str, Any]:
    """The draft ``order`` with ``alt``'s drug in place of its own (same id)."""
    assert alt.medication is not None and alt.display is not None  # not an advice
    new = copy.deepcopy(dict(order))
    ref = new.pop("medicationReference", None)
    target = ref.get("reference") if isinstance(ref, Mapping) else None
    if isinstance(target, str) and target.startswith("#"):
        contained = [
            c
            for c in new.get("contained") or ()
            if not (isinstance(c, Mapping) and c.get("id") == target[1:])
        ]
        if contained:
            new["contained"] = contained
        else:
            new.pop("contained", None)
    system, _, code = alt.medication.rpartition("|")
    new["medicationCodeableConcept"] = {
        "coding": [{"system": system, "code": code, "display": alt.display}],
        "text": alt.display,
    }
    new.pop("text", None)
    if alt.dosage is not None:
        new["dosageInstruction"] = [json.loads(alt.dosage)]
    elif not alt.keep_dosage:
        new.pop("dosageInstruction", None)
        dispense = new.get("dispenseRequest")
        if isinstance(dispense, dict):
            dispense.pop("quantity", None)
            dispense.pop("initialFill", None)
            if not dispense:
                new.pop("dispenseRequest", None)
    return new


def alternative_actions(
    decl: SuggestionDecl,
    alt: AlternativeDecl,
    ref: str,
    order: Mapping[str, Any],
    description: str,
    name: str,
) -> list[dict[str, Any]]:
    """The CDS Hooks actions that swap ``alt`` in for the draft ``order`` (``ref``)."""
    new = alternative_order(order, alt)
    if decl.action_type == "update":
        return [{"type": "update", "description": description, "resource": new}]
    for key in ("id", "identifier", "meta"):
        new.pop(key, None)
    return [
        {"type": "create", "description": description, "resource": new},
        {"type": "delete", "description": f"Remove the draft order for {name}", "resourceId": ref},
    ]


def order_name(order: Mapping[str, Any]) -> str | None:
    """The draft's drug as its order names it (text, else the first coding's display)."""
    concept = order.get("medicationCodeableConcept")
    if not isinstance(concept, Mapping):
        return None
    text = concept.get("text")
    if isinstance(text, str) and text.strip():
        return text.strip()
    for coding in concept.get("coding") or ():
        if isinstance(coding, Mapping) and isinstance(coding.get("display"), str):
            return str(coding["display"])
    return None


__all__ = [
    "alternative_actions",
    "alternative_for",
    "alternative_order",
    "drug_codes",
    "order_name",
]

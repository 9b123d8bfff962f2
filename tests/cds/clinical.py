"""FHIR R4 resources for the two example deployments, and the hook requests that carry them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

LOINC = "http://loinc.org"
SNOMED = "http://snomed.info/sct"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
UCUM = "http://unitsofmeasure.org"
AUTH_SCOPE = "user/*.read user/Encounter.write"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def recent(minutes: int = 30) -> str:
    """A time ``minutes`` before now (the wall clock hook runs read), as FHIR writes it: fresh
    for every ``horis:maxAge`` of the bundled deployments."""
    return (datetime.now(UTC) - timedelta(minutes=minutes)).isoformat(timespec="seconds")


def patient(pid: str, birth_date: str = "1985-03-01") -> dict[str, Any]:
    return {"resourceType": "Patient", "id": pid, "birthDate": birth_date, "active": True}


def encounter(eid: str, pid: str, reason: str | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {
        "resourceType": "Encounter",
        "id": eid,
        "status": "in-progress",
        "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "EMER"},
        "subject": {"reference": f"Patient/{pid}"},
    }
    if reason:
        res["reasonCode"] = [{"text": reason}]
    return res


def observation(
    pid: str,
    code: str,
    value: float,
    unit: str,
    *,
    category: str = "vital-signs",
    when: str | None = None,
) -> dict[str, Any]:
    """An Observation taken ``when`` (default: :func:`recent`)."""
    return {
        "resourceType": "Observation",
        "id": new_id(),
        "status": "final",
        "category": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/observation-category",
                        "code": category,
                    }
                ]
            }
        ],
        "code": {"coding": [{"system": LOINC, "code": code}]},
        "subject": {"reference": f"Patient/{pid}"},
        "effectiveDateTime": when or recent(),
        "valueQuantity": {"value": value, "unit": unit, "system": UCUM, "code": unit},
    }


#: the five vital signs triage reads, by LOINC code, with an unremarkable adult reading each
NORMAL_VITALS: dict[str, tuple[float, str]] = {
    "8867-4": (80, "/min"),  # heart rate
    "9279-1": (16, "/min"),  # respiratory rate
    "59408-5": (98, "%"),  # oxygen saturation
    "8480-6": (120, "mm[Hg]"),  # systolic blood pressure
    "8310-5": (36.8, "Cel"),  # body temperature
}


#: another LOINC code of the same measurement → the code :data:`NORMAL_VITALS` uses for it
SAME_MEASUREMENT: dict[str, str] = {"2708-6": "59408-5"}  # oxygen saturation, arterial blood


def vital_signs(pid: str, *, skip: frozenset[str] | set[str] = frozenset()) -> list[dict[str, Any]]:
    """A complete set of recent, unremarkable vital signs (one Observation per code of
    :data:`NORMAL_VITALS` not in ``skip``): triage decides only when none of them is missing, so
    a test that is about one reading sends the rest with it. Skipping another code of the same
    measurement skips it too (two readings of one vital sign taken together that disagree are
    conflicting, not one of them)."""
    skip = {*skip, *(SAME_MEASUREMENT[c] for c in skip if c in SAME_MEASUREMENT)}
    return [
        observation(pid, code, value, unit)
        for code, (value, unit) in NORMAL_VITALS.items()
        if code not in skip
    ]


def bp_panel(pid: str, systolic: float, diastolic: float) -> dict[str, Any]:
    def comp(code: str, value: float) -> dict[str, Any]:
        return {
            "code": {"coding": [{"system": LOINC, "code": code}]},
            "valueQuantity": {"value": value, "unit": "mm[Hg]", "system": UCUM, "code": "mm[Hg]"},
        }

    panel = observation(pid, "85354-9", 0, "mm[Hg]")
    del panel["valueQuantity"]
    panel["component"] = [comp("8480-6", systolic), comp("8462-4", diastolic)]
    return panel


def condition(pid: str, snomed: str) -> dict[str, Any]:
    cat = "http://terminology.hl7.org/CodeSystem/condition-category"
    status = "http://terminology.hl7.org/CodeSystem/condition-clinical"
    return {
        "resourceType": "Condition",
        "id": new_id(),
        "clinicalStatus": {"coding": [{"system": status, "code": "active"}]},
        "category": [{"coding": [{"system": cat, "code": "encounter-diagnosis"}]}],
        "code": {"coding": [{"system": SNOMED, "code": snomed}]},
        "subject": {"reference": f"Patient/{pid}"},
    }


def allergy(pid: str, snomed: str) -> dict[str, Any]:
    status = "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical"
    return {
        "resourceType": "AllergyIntolerance",
        "id": new_id(),
        "clinicalStatus": {"coding": [{"system": status, "code": "active"}]},
        "code": {"coding": [{"system": SNOMED, "code": snomed}]},
        "patient": {"reference": f"Patient/{pid}"},
    }


def draft_order(pid: str, rxnorm: str) -> dict[str, Any]:
    return {
        "resourceType": "MedicationRequest",
        "id": new_id(),
        "status": "draft",
        "intent": "order",
        "subject": {"reference": f"Patient/{pid}"},
        "medicationCodeableConcept": {"coding": [{"system": RXNORM, "code": rxnorm}]},
    }


def searchset(resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": len(resources),
        "entry": [{"resource": r} for r in resources],
    }


def hook_request(
    hook: str,
    context: dict[str, Any],
    *,
    fhir_server: str | None,
    prefetch: dict[str, Any] | None = None,
    scope: str = AUTH_SCOPE,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "hook": hook,
        "hookInstance": str(uuid.uuid4()),
        "context": {"userId": "Practitioner/example", **context},
    }
    if fhir_server is not None:
        body["fhirServer"] = fhir_server
        body["fhirAuthorization"] = {
            "access_token": "test-token",
            "token_type": "Bearer",
            "expires_in": 300,
            "scope": scope,
            "subject": "horismos",
        }
    if prefetch is not None:
        body["prefetch"] = prefetch
    return body


def triage_request(
    pid: str,
    *,
    vitals: list[dict[str, Any]] | None = None,
    conditions: dict[str, Any] | None = None,
    encounter: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An encounter-start call for triage with everything prefetched and no FHIR server: the
    given vital signs (a complete unremarkable set unless told), the conditions searchset (an
    empty one unless told), the Encounter (one without a reason unless told)."""
    encounter = encounter or encounter_of(pid)
    return hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": encounter["id"]},
        fhir_server=None,
        prefetch={
            "patient": patient(pid),
            "encounter": encounter,
            "vitals": searchset(vitals if vitals is not None else vital_signs(pid)),
            "conditions": conditions if conditions is not None else searchset([]),
        },
    )


def encounter_of(pid: str) -> dict[str, Any]:
    return encounter(new_id(), pid)


def order_sign(
    pid: str,
    drafts: Sequence[dict[str, Any]],
    *,
    fhir_server: str | None,
    prefetch: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An order-sign request for patient ``pid`` whose draft orders are ``drafts``, in order (a
    collection Bundle, as the hook's context carries them)."""
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": d} for d in drafts],
    }
    return hook_request(
        "order-sign",
        {"patientId": pid, "draftOrders": bundle},
        fhir_server=fhir_server,
        prefetch=prefetch,
    )


def med_safety_body(
    pid: str | None = None,
    *,
    egfr: float | None = 25,
    rx: str = "5640",
    potassium: float | None = None,
) -> dict[str, Any]:
    """A medication-safety order-sign request, everything prefetched: one draft order (``rx``,
    ibuprofen unless told) for a patient born in 1970 with no allergies answered, the eGFR
    ``egfr`` (no lab on record at all when None) and the potassium ``potassium`` if given."""
    pid = pid or "p-" + new_id()
    labs = [observation(pid, "33914-3", egfr, "mL/min/{1.73_m2}", category="laboratory")]
    if potassium is not None:
        labs.append(observation(pid, "2823-3", potassium, "mmol/L", category="laboratory"))
    return order_sign(
        pid,
        [draft_order(pid, rx)],
        fhir_server=None,
        prefetch={
            "patient": patient(pid, "1970-01-01"),
            "allergies": None,
            "labs": searchset(labs if egfr is not None else []),
        },
    )


def example(name: str) -> dict[str, Any]:
    """A hook request of ``examples/``, its readings stamped :func:`recent` as the README's
    ``sed`` does: the files say when they were written, a decision reads them as taken now."""
    text = (EXAMPLES / name).read_text()
    return dict(json.loads(text.replace('"2025-06-01T10:00:00Z"', json.dumps(recent()))))

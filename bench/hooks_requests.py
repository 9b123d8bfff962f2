"""The hook requests ``bench/hooks.py`` sends, and the wrk template each becomes.

The triage request is realistic (Patient, Encounter, six vital-sign Observations including a
blood-pressure panel, two Conditions) and grants read scopes only, so the Route step's write is
refused before any network call. ``bench/hooks.lua`` replaces ``PLACEHOLDER`` with a fresh
``hookInstance`` and ``UNIQUE`` with a fresh suffix for each request, so every call is a new
run. ``bench/profile_hook.py``, ``bench/scaling.py`` and ``bench/ahead.py`` build their
in-process requests from these too.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

PLACEHOLDER = "00000000-0000-4000-8000-000000000000"
UNIQUE = "@U@"


TAKEN = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


def observation(
    pid: str, code: str, value: float, unit: str, minutes: int, n: int
) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "id": f"obs{n}-{UNIQUE}",
        "meta": {"versionId": "1", "lastUpdated": "2025-06-01T10:00:00Z"},
        "status": "final",
        "category": [{"coding": [{"code": "vital-signs"}]}],
        "code": {"coding": [{"system": "http://loinc.org", "code": code}]},
        "subject": {"reference": f"Patient/{pid}"},
        # taken this hour, so every reading is within the deployment's horis:maxAge
        "effectiveDateTime": (TAKEN + timedelta(minutes=minutes)).isoformat(timespec="seconds"),
        "valueQuantity": {
            "value": value,
            "unit": unit,
            "system": "http://unitsofmeasure.org",
            "code": unit,
        },
    }


def triage_request() -> dict[str, Any]:
    """The triage hook request; ``@U@`` marks each prefetched Observation's and Condition's id."""
    pid, eid = "bench-patient", "bench-encounter"
    panel = observation(pid, "85354-9", 0, "mm[Hg]", 5, 6)
    del panel["valueQuantity"]
    panel["component"] = [
        {
            "code": {"coding": [{"system": "http://loinc.org", "code": c}]},
            "valueQuantity": {"value": v, "system": "http://unitsofmeasure.org", "code": "mm[Hg]"},
        }
        for c, v in (("8480-6", 128), ("8462-4", 82))
    ]

    def condition(code: str, n: int) -> dict[str, Any]:
        return {
            "resourceType": "Condition",
            "id": f"cond{n}-{UNIQUE}",
            "meta": {"versionId": "2"},
            "clinicalStatus": {"coding": [{"code": "active"}]},
            "category": [{"coding": [{"code": "encounter-diagnosis"}]}],
            "code": {"coding": [{"system": "http://snomed.info/sct", "code": code}]},
            "subject": {"reference": f"Patient/{pid}"},
        }

    vitals = [
        observation(pid, "8867-4", 112, "/min", 1, 1),
        observation(pid, "8867-4", 104, "/min", 9, 2),
        observation(pid, "9279-1", 22, "/min", 1, 3),
        observation(pid, "59408-5", 95, "%", 1, 4),
        observation(pid, "8310-5", 100.6, "[degF]", 2, 5),
        panel,
    ]
    return {
        "hook": "encounter-start",
        "hookInstance": PLACEHOLDER,
        "fhirServer": "http://127.0.0.1:9/fhir",
        "fhirAuthorization": {
            "access_token": "bench-token",
            "token_type": "Bearer",
            "expires_in": 300,
            "scope": "user/Patient.read user/Observation.read user/Condition.read",
            "subject": "horismos-bench",
        },
        "context": {"userId": "Practitioner/bench", "patientId": pid, "encounterId": eid},
        "prefetch": {
            "patient": {
                "resourceType": "Patient",
                "id": pid,
                "meta": {"versionId": "4"},
                "birthDate": "1956-02-11",
                "gender": "female",
            },
            "encounter": {
                "resourceType": "Encounter",
                "id": eid,
                "meta": {"versionId": "1"},
                "status": "in-progress",
                "class": {"code": "EMER"},
                "subject": {"reference": f"Patient/{pid}"},
            },
            "vitals": {
                "resourceType": "Bundle",
                "type": "searchset",
                "entry": [{"resource": r} for r in vitals],
            },
            "conditions": {
                "resourceType": "Bundle",
                "type": "searchset",
                "entry": [
                    {"resource": condition("25064002", 1)},
                    {"resource": condition("44054006", 2)},
                ],
            },
        },
    }


def template_of(request: dict[str, Any]) -> str:
    """A request file as a wrk template: the hookInstance is replaced by the placeholder and
    each prefetch Bundle entry's id gets the ``@U@`` suffix, unless something references it."""
    request = json.loads(json.dumps(request))
    request["hookInstance"] = PLACEHOLDER
    text = json.dumps(request)
    for value in (request.get("prefetch") or {}).values():
        if not isinstance(value, dict) or value.get("resourceType") != "Bundle":
            continue
        for entry in value.get("entry") or []:
            res = entry.get("resource") if isinstance(entry, dict) else None
            if not isinstance(res, dict) or not isinstance(res.get("id"), str):
                continue
            if UNIQUE in res["id"] or f"{res.get('resourceType')}/{res['id']}" in text:
                continue
            res["id"] = f"{res['id'][:40]}-{UNIQUE}"
    return json.dumps(request)

"""Requests of our own for the opioid services, at the boundaries the guide's examples do not
reach: built relative to the day a test runs (no date rolling), as :class:`Example`s, so they go
through the same harness (``call_service``: stored records loaded into the FHIR server, the hook
called with prefetch and without).

``case(service, hook, patient, drafts=…, stored=…)`` makes one; the resource builders take days
relative to today (``ago(30)``) and RxNorm codes. ``run_case(client, fhir_server, case, mode)``
calls the case's service and checks that its cards are the expected ones.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.opioid_examples import Example, call_service

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from tests.support.fhir_server import FhirServer

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
SNOMED = "http://snomed.info/sct"
UCUM = "http://unitsofmeasure.org"

# drugs the cases use (RxNorm, as the guide's value sets and drug data have them)
OXYCODONE_ER_10 = ("1049502", "12 HR oxycodone hydrochloride 10 MG Extended Release Oral Tablet")
OXYCODONE_IR_5 = ("1049621", "oxycodone hydrochloride 5 MG Oral Tablet")
FENTANYL_75 = ("197696", "72 HR fentanyl 0.075 MG/HR Transdermal System")
FLURAZEPAM_15 = ("1298088", "flurazepam hydrochloride 15 MG Oral Capsule")
TEMAZEPAM_20 = ("104693", "temazepam 20 MG Oral Capsule")
BENZPHETAMINE_50 = ("904368", "benzphetamine hydrochloride 50 MG Oral Tablet")  # CNS list
NALOXONE_NASAL = ("1191212", "naloxone hydrochloride 0.4 MG/ML Injectable Solution")
AMOXICILLIN_500 = ("308191", "amoxicillin 500 MG Oral Capsule")
HYDROCODONE_10 = ("856908", "acetaminophen 660 MG / hydrocodone bitartrate 10 MG Oral Tablet")
#: in the opioid value set, not in the drug strength data: no MME can be computed for it
UNWEIGHABLE_OPIOID = ("2118730", "an opioid the 2020 drug data does not list")


def today() -> date:
    return datetime.now(UTC).date()


def ago(days: int) -> str:
    """The day ``days`` before today (negative: after)."""
    return (today() - timedelta(days=days)).isoformat()


def years_ago(years: int, days: int = 0) -> str:
    """A birth date that makes the patient ``years`` old today (``days`` later: younger)."""
    t = today()
    try:
        born = t.replace(year=t.year - years)
    except ValueError:  # 29 February
        born = t.replace(year=t.year - years, day=28)
    return (born + timedelta(days=days)).isoformat()


def patient(pid: str, *, age: int = 40, birth_date: str | None = None) -> dict[str, Any]:
    return {
        "resourceType": "Patient",
        "id": pid,
        "gender": "female",
        "birthDate": birth_date or years_ago(age),
    }


def statement(
    sid: str, pid: str, drug: tuple[str, str], *, status: str = "active", started: int = 40
) -> dict[str, Any]:
    """What the patient reports taking (a MedicationStatement), as an EHR's medication list
    writes it: ``drug`` in RxNorm, taken since ``started`` days ago."""
    return {
        "resourceType": "MedicationStatement",
        "id": sid,
        "status": status,
        "medicationCodeableConcept": {
            "coding": [{"system": RXNORM, "code": drug[0], "display": drug[1]}]
        },
        "subject": {"reference": f"Patient/{pid}"},
        "effectivePeriod": {"start": ago(started)},
    }


def order(
    oid: str,
    pid: str,
    drug: tuple[str, str],
    *,
    authored: str | None = None,
    status: str = "active",
    category: str = "community",
    supply_days: float | None = 30,
    dose: float = 1,
    dose_unit: str = "{tablet}",
    frequency: int = 1,
    period: float = 1,
    period_unit: str = "d",
    contained: bool = False,
) -> dict[str, Any]:
    """A MedicationRequest; ``contained`` names the drug through a contained Medication."""
    code = {"coding": [{"system": RXNORM, "code": drug[0], "display": drug[1]}]}
    resource: dict[str, Any] = {
        "resourceType": "MedicationRequest",
        "id": oid,
        "status": status,
        "intent": "order",
        "category": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/medicationrequest-category",
                        "code": category,
                    }
                ]
            }
        ],
        "subject": {"reference": f"Patient/{pid}"},
        "authoredOn": authored or ago(0),
        "dosageInstruction": [
            {
                "timing": {
                    "repeat": {"frequency": frequency, "period": period, "periodUnit": period_unit}
                },
                "doseAndRate": [
                    {"doseQuantity": {"value": dose, "system": UCUM, "code": dose_unit}}
                ],
            }
        ],
        "dispenseRequest": {},
    }
    if supply_days is not None:
        resource["dispenseRequest"]["expectedSupplyDuration"] = {
            "value": supply_days,
            "unit": "days",
            "system": UCUM,
            "code": "d",
        }
    if contained:
        resource["contained"] = [{"resourceType": "Medication", "id": "med1", "code": code}]
        resource["medicationReference"] = {"reference": "#med1"}
    else:
        resource["medicationCodeableConcept"] = code
    return resource


def condition(
    cid: str,
    pid: str,
    code: str,
    *,
    system: str = SNOMED,
    category: str = "problem-list-item",
    status: str = "active",
    recorded: str | None = None,
    encounter: str | None = None,
) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "resourceType": "Condition",
        "id": cid,
        "clinicalStatus": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/condition-clinical",
                    "code": status,
                }
            ]
        },
        "category": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/condition-category",
                        "code": category,
                    }
                ]
            }
        ],
        "code": {"coding": [{"system": system, "code": code}]},
        "subject": {"reference": f"Patient/{pid}"},
        "recordedDate": recorded or ago(30),
    }
    if encounter is not None:
        resource["encounter"] = {"reference": f"Encounter/{encounter}"}
    return resource


def encounter(
    eid: str,
    pid: str,
    *,
    start: str,
    status: str = "finished",
    discharge: tuple[str, str] | None = None,
) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "resourceType": "Encounter",
        "id": eid,
        "status": status,
        "class": {
            "system": "http://terminology.hl7.org/CodeSystem/v3-ActCode",
            "code": "AMB",
        },
        "subject": {"reference": f"Patient/{pid}"},
        "period": {"start": start, "end": start},
    }
    if discharge is not None:
        resource["hospitalization"] = {
            "dischargeDisposition": {"coding": [{"system": discharge[0], "code": discharge[1]}]}
        }
    return resource


def dispense(
    did: str, pid: str, drug: tuple[str, str], *, handed_over: str, status: str = "completed"
) -> dict[str, Any]:
    return {
        "resourceType": "MedicationDispense",
        "id": did,
        "status": status,
        "medicationCodeableConcept": {
            "coding": [{"system": RXNORM, "code": drug[0], "display": drug[1]}]
        },
        "subject": {"reference": f"Patient/{pid}"},
        "whenHandedOver": handed_over,
    }


def procedure(prid: str, pid: str, code: str, *, performed: str) -> dict[str, Any]:
    return {
        "resourceType": "Procedure",
        "id": prid,
        "status": "completed",
        "code": {"coding": [{"system": SNOMED, "code": code}]},
        "subject": {"reference": f"Patient/{pid}"},
        "performedDateTime": performed,
    }


def case(
    name: str,
    service: str,
    hook: str,
    subject: dict[str, Any],
    *,
    drafts: Sequence[dict[str, Any]] = (),
    stored: Sequence[dict[str, Any]] = (),
    expected: Sequence[str] = (),
) -> Example:
    """A request for ``service`` about ``subject`` (a Patient), with ``drafts`` as the draft
    orders (order-select and order-sign) and ``stored`` as what the EHR holds."""
    context: dict[str, Any] = {"userId": "Practitioner/example", "patientId": subject["id"]}
    if hook in ("order-select", "order-sign"):
        context["draftOrders"] = {
            "resourceType": "Bundle",
            "type": "collection",
            "entry": [{"resource": copy.deepcopy(d)} for d in drafts],
        }
    if hook == "order-select":
        context["selections"] = [f"MedicationRequest/{d['id']}" for d in drafts]
    prefetch = {"item1": copy.deepcopy(subject)}
    for i, resource in enumerate(stored, start=2):
        prefetch[f"item{i}"] = copy.deepcopy(resource)
    request = {"hook": hook, "hookInstance": name, "context": context, "prefetch": prefetch}
    return Example(
        name=name,
        path=Path(name),
        service=service,
        request=request,
        expected=[{"indicator": i, "summary": ""} for i in expected],
    )


class CaseTable:
    """A module's cases, built from today's date each time a test takes one, not once when pytest
    collects them: the service reads its own clock at the call, so a run that crosses midnight
    would otherwise call with yesterday's dates (an order "placed today" made a day old).

    ``names`` are the cases' names, for ``parametrize``; ``table[name]`` (or ``table[i]``) builds
    the table again and gives that case."""

    def __init__(self, build: Callable[[], list[Example]]) -> None:
        self._build = build
        self.names = [c.name for c in build()]
        assert len(set(self.names)) == len(self.names), "two cases share a name"

    def __getitem__(self, key: str | int) -> Example:
        cases = self._build()
        if isinstance(key, int):
            return cases[key]
        return next(c for c in cases if c.name == key)

    def __iter__(self) -> Iterator[Example]:
        return iter(self._build())


def run_case(
    client: TestClient, fhir_server: FhirServer, example: Example, mode: str
) -> list[dict[str, Any]]:
    """Call ``example``'s service today (``mode``: ``prefetch`` or ``fetch``), check that it
    answers and that its cards' indicators, in order, are the expected ones; return the cards."""
    response = call_service(
        client, fhir_server, example, service_id=example.service, mode=mode, today=today()
    )
    assert response.status_code == 200, response.text
    cards: list[dict[str, Any]] = response.json()["cards"]
    indicators = [c["indicator"] for c in cards]
    # (a helper module's assert is not rewritten by pytest: the message says both sides)
    assert indicators == example.expected_indicators, (
        f"{example.name}: cards {indicators}, expected {example.expected_indicators}",
        [(c["summary"], c["detail"]) for c in cards],
    )
    return cards

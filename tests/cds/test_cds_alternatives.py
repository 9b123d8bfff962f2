"""Suggestions that fix the order: where a deployment names a better alternative
(``horis:alternative``), the card's suggestion carries the draft order with the alternative's
drug swapped in, as a CDS Hooks 2.0 action a client applies in one click.

Over HTTP with the bundled deployments: medication safety (an NSAID with eGFR below 30:
acetaminophen instead) and CDC recommendation 3 (an extended-release opioid for an opioid-naive
patient: the immediate-release form of the same drug). The draft orders have the Sandbox's shape
(tests/data/cds/fixtures/order-sign-request-cds-hooks-sandbox.json: ``category`` written as one
object, a dosage, a supply duration) plus an encounter and a requester. Each swapped-in order is
checked as the client would receive it: a valid R4 MedicationRequest (fhir.resources R4B), the
same id, patient and encounter, the alternative's coding with its display, the dosage written for
the old drug left for the prescriber. Declarations that name an unknown code, or an action the
hook cannot apply, are refused at load.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from fhir.resources.R4B.medicationrequest import MedicationRequest

from app.cds.response_check import check_response
from app.main import create_app
from app.ontology import OntologyError
from app.ontology.loader import load_ontology
from app.ontology.verify import verify
from app.settings import Settings
from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/data/cds/fixtures"
RXNORM = fx.RXNORM
IBUPROFEN, ACETAMINOPHEN, AMOXICILLIN = "5640", "198440", "723"
ACETAMINOPHEN_500 = "acetaminophen 500 mg oral tablet"
METFORMIN, LISINOPRIL = "6809", "29046"
OXYCODONE_ER = ("1049502", "12 HR oxycodone hydrochloride 10 MG Extended Release Oral Tablet")
FENTANYL_PATCH = ("197696", "72 HR fentanyl 0.075 MG/HR Transdermal System")


@pytest.fixture(scope="module")
def client(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The service with its bundled deployments, one per module (each call its own patient)."""
    path = tmp_path_factory.mktemp("alternatives") / "horismos.db"
    path.write_bytes(sqlite_template.read_bytes())
    with TestClient(create_app(Settings(database_url=f"sqlite:///{path}"))) as c:
        yield c


def sandbox_draft(pid: str, code: str, display: str | None = None) -> dict[str, Any]:
    """The Sandbox's draft order for ``pid`` with the drug ``code``, an encounter and a
    requester added (the Sandbox sends neither)."""
    body = json.loads((FIXTURES / "order-sign-request-cds-hooks-sandbox.json").read_text())
    draft: dict[str, Any] = copy.deepcopy(body["context"]["draftOrders"]["entry"][0]["resource"])
    draft["id"] = "draft-" + fx.new_id()
    draft["subject"] = {"reference": f"Patient/{pid}"}
    draft["encounter"] = {"reference": f"Encounter/enc-{pid}"}
    draft["requester"] = {"reference": "Practitioner/COREPRACTITIONER1"}
    coding: dict[str, str] = {"system": RXNORM, "code": code}
    if display is not None:
        coding["display"] = display
    draft["medicationCodeableConcept"] = {
        "coding": [coding],
        **({"text": display} if display else {}),
    }
    return draft


def post(client: TestClient, service: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(f"/cds-services/{service}", json=body)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    assert check_response(answer) == []
    return answer


def med_safety(draft: dict[str, Any], pid: str, *, egfr: float = 25) -> dict[str, Any]:
    lab = fx.observation(pid, "33914-3", egfr, "mL/min/{1.73_m2}", category="laboratory")
    return fx.order_sign(
        pid,
        [draft],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "allergies": fx.searchset([]),
            "labs": fx.searchset([lab]),
        },
    )


def rec03(draft: dict[str, Any], pid: str) -> dict[str, Any]:
    empty = fx.searchset([])
    return fx.order_sign(
        pid,
        [draft],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1980-01-01"),
            "medications": empty,
            "conditions": empty,
            "encounters": empty,
            "dispenses": empty,
        },
    )


def swapped(suggestion: dict[str, Any]) -> dict[str, Any]:
    """The order an ``update`` suggestion swaps in, after checking it is a valid R4 order."""
    (action,) = suggestion["actions"]
    assert action["type"] == "update"
    assert action["description"]
    resource: dict[str, Any] = action["resource"]
    MedicationRequest.model_validate(resource)  # raises on anything R4 does not allow
    return resource


def assert_same_order(new: dict[str, Any], draft: dict[str, Any]) -> None:
    for key in ("id", "status", "intent", "subject", "encounter", "requester", "authoredOn"):
        assert new[key] == draft[key], key
    # the Sandbox's one-object category, as R4 writes it
    assert new["category"] == [draft["category"]]
    assert "medicationReference" not in new


def test_an_nsaid_with_low_egfr_suggests_acetaminophen_in_its_place(client: TestClient) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, IBUPROFEN, "ibuprofen")
    answer = post(client, "horismos-med-safety", med_safety(draft, pid))

    (card,) = answer["cards"]
    assert card["indicator"] == "critical"
    by_label = {s["label"]: s for s in card["suggestions"]}
    ref = f"MedicationRequest/{draft['id']}"
    # one draft: the button needs no name, and never the order's id
    assert by_label["Remove the contraindicated draft order"]["actions"][0] == {
        "type": "delete",
        "description": "Delete the draft order before signing.",
        "resourceId": ref,
    }
    new = swapped(by_label[f"Order instead: {ACETAMINOPHEN_500}"])
    assert_same_order(new, draft)
    assert new["medicationCodeableConcept"] == {
        "coding": [{"system": RXNORM, "code": ACETAMINOPHEN, "display": ACETAMINOPHEN_500}],
        "text": ACETAMINOPHEN_500,
    }
    # ibuprofen's dose is not acetaminophen's: the declared one takes its place; the supply stays
    [dosage] = new["dosageInstruction"]
    assert dosage["doseAndRate"][0]["doseQuantity"]["value"] == 2
    assert dosage["timing"]["repeat"] == {"frequency": 1, "period": 6, "periodUnit": "h"}
    assert dosage["asNeededBoolean"] is True
    assert new["dispenseRequest"] == draft["dispenseRequest"]


def test_the_acetaminophen_order_swapped_in_is_checked_and_decided_at_signing(
    client: TestClient,
) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, IBUPROFEN, "ibuprofen")
    card = post(client, "horismos-med-safety", med_safety(draft, pid))["cards"][0]
    new = swapped(next(s for s in card["suggestions"] if s["actions"][0]["type"] == "update"))

    answer = post(client, "horismos-med-safety", med_safety(new, pid))
    run = answer["extension"]["dev.horismos.run"]
    assert run["decision"]["value"] == "Safe"
    assert answer["cards"] == []


@pytest.mark.parametrize(
    ("code", "display"),
    [
        ("197806", "ibuprofen 600 MG Oral Tablet"),
        ("834022", "ketorolac tromethamine 10 MG Oral Tablet"),
    ],
    ids=["ibuprofen-product", "ketorolac-product"],
)
def test_an_nsaid_ordered_by_product_gets_the_same_swap_as_by_ingredient(
    client: TestClient, code: str, display: str
) -> None:
    """The alternative replaces the products of the NSAID value sets too (horis:replaces
    <value set>), so the order as EHRs write it gets the swap, not only its ingredient."""
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, code, display)
    (card,) = post(client, "horismos-med-safety", med_safety(draft, pid))["cards"]
    assert card["indicator"] == "critical"
    new = swapped(next(s for s in card["suggestions"] if s["actions"][0]["type"] == "update"))
    assert new["medicationCodeableConcept"]["coding"][0]["code"] == ACETAMINOPHEN
    assert_same_order(new, draft)


def test_a_combination_nsaid_product_is_not_swapped_for_acetaminophen(client: TestClient) -> None:
    """Hydrocodone/ibuprofen is an NSAID order, contraindicated at eGFR 25, but swapping in
    acetaminophen would silently drop the hydrocodone: only its removal is offered."""
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(
        pid, "858798", "Hydrocodone Bitartrate 7.5 MG / Ibuprofen 200 MG Oral Tablet"
    )
    (card,) = post(client, "horismos-med-safety", med_safety(draft, pid))["cards"]
    assert card["indicator"] == "critical"
    assert [a["type"] for s in card["suggestions"] for a in s.get("actions", [])] == ["delete"]


def test_a_contraindicated_order_without_a_named_alternative_offers_only_its_removal(
    client: TestClient,
) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, AMOXICILLIN, "amoxicillin")
    body = med_safety(draft, pid, egfr=80)
    body["prefetch"]["allergies"] = fx.searchset([fx.allergy(pid, "91936005")])
    (card,) = post(client, "horismos-med-safety", body)["cards"]
    assert [a["type"] for s in card["suggestions"] for a in s["actions"]] == ["delete"]


def test_metformin_at_reduced_egfr_gets_advice_that_changes_nothing_in_the_order(
    client: TestClient,
) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, METFORMIN, "metformin")
    (card,) = post(client, "horismos-med-safety", med_safety(draft, pid, egfr=38))["cards"]
    assert card["summary"] == "Medication order needs caution"
    assert card["suggestions"] == [
        {
            "label": "Metformin at eGFR 30 to 45: not to be started; if the patient already "
            "takes it, weigh the benefit and risk of continuing",
            "uuid": card["suggestions"][0]["uuid"],
        }
    ]


def test_metformin_ordered_by_product_gets_the_same_advice(client: TestClient) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, "861007", "metformin hydrochloride 500 MG Oral Tablet")
    (card,) = post(client, "horismos-med-safety", med_safety(draft, pid, egfr=38))["cards"]
    assert [s["label"] for s in card["suggestions"]] == [
        "Metformin at eGFR 30 to 45: not to be started; if the patient already "
        "takes it, weigh the benefit and risk of continuing"
    ]


def test_a_caution_for_another_drug_offers_no_suggestion(client: TestClient) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, LISINOPRIL, "lisinopril")
    body = med_safety(draft, pid, egfr=80)
    body["prefetch"]["labs"]["entry"].append(
        {"resource": fx.observation(pid, "2823-3", 6.1, "mmol/L", category="laboratory")}
    )
    (card,) = post(client, "horismos-med-safety", body)["cards"]
    assert card["summary"] == "Medication order needs caution"
    assert "suggestions" not in card


def test_an_extended_release_opioid_for_a_naive_patient_suggests_its_immediate_release_form(
    client: TestClient,
) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, *OXYCODONE_ER)
    (card,) = post(client, "opioidcds-03", rec03(draft, pid))["cards"]

    (suggestion,) = card["suggestions"]
    assert card["selectionBehavior"] == "at-most-one"
    assert suggestion["label"] == (
        "Change to the immediate-release form: oxycodone hydrochloride 5 MG Oral Tablet"
    )
    new = swapped(suggestion)
    assert_same_order(new, draft)
    assert new["medicationCodeableConcept"]["coding"] == [
        {"system": RXNORM, "code": "1049621", "display": "oxycodone hydrochloride 5 MG Oral Tablet"}
    ]
    # two tablets a day was the extended-release schedule: not carried over; 30 days' supply is
    assert "dosageInstruction" not in new
    assert new["dispenseRequest"]["expectedSupplyDuration"]["value"] == 30


def test_a_contained_medication_is_replaced_by_the_alternative(client: TestClient) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, *OXYCODONE_ER)
    code = draft.pop("medicationCodeableConcept")
    draft["contained"] = [{"resourceType": "Medication", "id": "med1", "code": code}]
    draft["medicationReference"] = {"reference": "#med1"}
    (card,) = post(client, "opioidcds-03", rec03(draft, pid))["cards"]

    new = swapped(card["suggestions"][0])
    assert "contained" not in new
    assert new["medicationCodeableConcept"]["coding"][0]["code"] == "1049621"


def test_a_patch_with_no_immediate_release_form_says_so_and_suggests_no_order(
    client: TestClient,
) -> None:
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, *FENTANYL_PATCH)
    (card,) = post(client, "opioidcds-03", rec03(draft, pid))["cards"]
    assert card["suggestions"] == [
        {
            "label": "No immediate-release form of this drug is named: choose an "
            "immediate-release opioid",
            "uuid": card["suggestions"][0]["uuid"],
        }
    ]


# --- variants of the deployment's declaration ---------------------------------------------


def _med_safety_variant(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "ontologies/med-safety.ttl").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "med-safety.ttl"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    shutil.copytree(ROOT / "ontologies/valuesets", tmp_path / "valuesets")  # its drug products
    return path


ALTERNATIVE_TYPE = """horis:label "Order instead" ;
                    horis:actionType "update" ;"""
#: the acetaminophen alternative's drug and the start of its declared dosage
SWAPPED_IN = (
    'horis:medication "http://www.nlm.nih.gov/research/umls/rxnorm|198440" ;\n'
    '                        horis:display "acetaminophen 500 mg oral tablet" ;\n'
    '                        horis:dosage """'
)


def test_a_create_alternative_adds_the_new_order_and_deletes_the_draft(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    path = _med_safety_variant(
        tmp_path, ALTERNATIVE_TYPE, ALTERNATIVE_TYPE.replace('"update"', '"create"')
    )
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, IBUPROFEN, "ibuprofen")
    draft["identifier"] = [{"system": "https://ehr.example/orders", "value": "o-1"}]
    with make_app_client(ontology_paths=[path]) as app:
        (card,) = post(app, "horismos-med-safety", med_safety(draft, pid))["cards"]
    (suggestion,) = [s for s in card["suggestions"] if len(s["actions"]) == 2]
    create, delete = suggestion["actions"]
    assert create["type"] == "create"
    MedicationRequest.model_validate(create["resource"])
    assert "id" not in create["resource"] and "identifier" not in create["resource"]
    assert create["resource"]["encounter"] == draft["encounter"]
    assert delete == {
        "type": "delete",
        "description": "Remove the draft order for ibuprofen",
        "resourceId": f"MedicationRequest/{draft['id']}",
    }


def test_keep_dosage_carries_the_draft_dosage_over(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    path = _med_safety_variant(
        tmp_path,
        SWAPPED_IN,
        'horis:medication "http://www.nlm.nih.gov/research/umls/rxnorm|198440" ; '
        'horis:display "acetaminophen 500 mg oral tablet" ; horis:keepDosage true ; '
        'rdfs:comment """',
    )
    pid = "alt-" + fx.new_id()
    draft = sandbox_draft(pid, IBUPROFEN, "ibuprofen")
    with make_app_client(ontology_paths=[path]) as app:
        (card,) = post(app, "horismos-med-safety", med_safety(draft, pid))["cards"]
    new = swapped(next(s for s in card["suggestions"] if s["actions"][0]["type"] == "update"))
    assert new["dosageInstruction"] == draft["dosageInstruction"]


def _problems(path: Path) -> list[str]:
    return [str(p) for p in verify(load_ontology([path]))]


def test_the_bundled_alternatives_load_clean() -> None:
    assert _problems(ROOT / "ontologies/med-safety.ttl") == []


def test_an_alternative_naming_a_code_the_deployment_does_not_know_is_refused(
    tmp_path: Path,
) -> None:
    path = _med_safety_variant(
        tmp_path, SWAPPED_IN, SWAPPED_IN.replace("rxnorm|198440", "rxnorm|99999198440")
    )
    problems = _problems(path)  # the card is the order-sign and the order-select service's
    assert [p.split(" ", 1)[0].rsplit("#", 1)[1] for p in problems] == [
        "MedSafetyService",
        "MedSafetyOrderSelectService",
    ]
    for problem in problems:
        assert '"http://www.nlm.nih.gov/research/umls/rxnorm|99999198440"' in problem
        assert "does not know" in problem


def test_an_alternative_naming_neither_an_order_nor_advice_is_refused(tmp_path: Path) -> None:
    path = _med_safety_variant(tmp_path, SWAPPED_IN, 'rdfs:comment """')
    with pytest.raises(OntologyError, match="horis:medication"):
        load_ontology([path])


def test_an_alternative_on_a_delete_suggestion_is_refused(tmp_path: Path) -> None:
    path = _med_safety_variant(
        tmp_path, ALTERNATIVE_TYPE, ALTERNATIVE_TYPE.replace('"update"', '"delete"')
    )
    problems = _problems(path)
    assert len(problems) == 2  # the order-sign and the order-select service's card
    assert all('a "delete" suggestion cannot carry one' in p for p in problems)


def test_an_alternative_on_a_hook_without_draft_orders_is_refused(tmp_path: Path) -> None:
    path = _med_safety_variant(tmp_path, 'horis:hook "order-sign"', 'horis:hook "patient-view"')
    problems = _problems(path)
    assert any("the patient-view hook sends no draft orders" in p for p in problems), problems


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        (
            '"timing": {"repeat": {"frequency": 1, "period": 6, "periodUnit": "h"}},',
            "",
            "needs doseAndRate and timing",
        ),
        ('"asNeededBoolean": true,', '"asNeededBoolean": "often",', "not a FHIR R4 Dosage"),
    ],
    ids=["no-timing", "not-r4"],
)
def test_a_declared_dosage_that_is_not_a_complete_r4_dosage_is_refused(
    tmp_path: Path, old: str, new: str, words: str
) -> None:
    """The order a prescriber accepts must be complete: a dosage without frequency, or one R4
    does not allow, is a load error naming the alternative, never a half order at run time."""
    path = _med_safety_variant(tmp_path, old, new)
    with pytest.raises(OntologyError, match=words):
        load_ontology([path])

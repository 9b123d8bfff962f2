"""A tool called once per instance (``horis:forEach`` on an ActionStep) feeds an aggregate and a
card per instance that names the computed value: over HTTP with the opioid toolkit's MME tool
(tests/data/language/per_instance_tool.ttl), replayed from its record."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.ontology import OntologyError, load_ontology, verify
from tests.cds import clinical as fx

ONTOLOGY = Path(__file__).parents[1] / "data/language/per_instance_tool.ttl"
RX = "http://www.nlm.nih.gov/research/umls/rxnorm"
OXYCODONE_ER_10 = "1049502"  # 12 HR oxycodone hydrochloride 10 MG extended release tablet

OpenClient = Callable[..., AbstractContextManager[TestClient]]


def oxycodone(pid: str, name: str, per_day: int) -> dict[str, Any]:
    return {
        "resourceType": "MedicationRequest",
        "id": fx.new_id(),
        "status": "draft",
        "intent": "order",
        "subject": {"reference": f"Patient/{pid}"},
        "medicationCodeableConcept": {
            "coding": [{"system": RX, "code": OXYCODONE_ER_10}],
            "text": name,
        },
        "dosageInstruction": [
            {
                "timing": {"repeat": {"frequency": per_day, "period": 1, "periodUnit": "d"}},
                "doseAndRate": [
                    {"doseQuantity": {"value": 1, "unit": "tablet", "code": "{tablet}"}}
                ],
            }
        ],
    }


def order_sign(*orders: tuple[str, int]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pid = "p-" + fx.new_id()
    resources = [oxycodone(pid, name, n) for name, n in orders]
    body = fx.order_sign(pid, resources, fhir_server=None)
    return body, resources


def test_the_tool_runs_once_per_order_and_its_results_are_summed_and_carded(
    make_app_client: OpenClient,
) -> None:
    # 10 mg × 3/day × 1.5 = 45 MME/day, and 10 mg × 2/day × 1.5 = 30: 75 in all
    body, (tid, bid) = order_sign(("Oxycodone ER tid", 3), ("Oxycodone ER bid", 2))
    with make_app_client(ontology_paths=[ONTOLOGY]) as client:
        resp = client.post("/cds-services/each-tool", json=body)
        assert resp.status_code == 200, resp.text
        answer = resp.json()
        run_id = answer["extension"]["dev.horismos.run"]["runId"]
        run = client.get(f"/runs/{run_id}").json()
        replayed = client.post(f"/runs/{run_id}/replay").json()

    assert replayed["same"] is True  # the calls are replayed from the record, in order
    assert [c["summary"] for c in answer["cards"]] == [
        "Oxycodone ER tid: 45 of 75 MME/day",
        "Oxycodone ER bid: 30 of 75 MME/day",
    ]
    [step] = [e for e in run["trace"] if e["step"] == "Compute"]
    assert step["instances"] == [tid["id"], bid["id"]]
    assert [c["args"]["frequency"] for c in step["calls"]] == [3, 2]
    added = {(f["subject"], f["property"]): f for f in step["delta"]["added"]}
    assert Decimal(str(added[(tid["id"], "mme")]["value"])) == Decimal("45.0")
    assert added[(bid["id"], "mme")]["provenance"] == "tool"
    assert run["decision"] == {"property": "level", "value": "High"}


def test_below_the_threshold_no_card_and_no_order_no_call(make_app_client: OpenClient) -> None:
    low, _ = order_sign(("Oxycodone ER bid", 2))
    none, _ = order_sign()
    with make_app_client(ontology_paths=[ONTOLOGY]) as client:
        answer = client.post("/cds-services/each-tool", json=low).json()
        empty = client.post("/cds-services/each-tool", json=none).json()
        run = client.get(f"/runs/{empty['extension']['dev.horismos.run']['runId']}").json()
    assert answer["cards"] == []
    assert answer["extension"]["dev.horismos.run"]["decision"]["value"] == "Normal"
    [step] = [e for e in run["trace"] if e["step"] == "Compute"]
    assert step["instances"] == [] and step["calls"] == [] and step["edge"] == "next"


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = ONTOLOGY.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "variant.ttl"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def test_a_binding_the_instance_does_not_carry_is_a_verification_error(tmp_path: Path) -> None:
    # bound to the patient's total, which an order does not carry
    path = _variant(
        tmp_path,
        '[ horis:arg "period" ; horis:property :period ]',
        '[ horis:arg "period" ; horis:property :totalMme ]',
    )
    problems = verify(load_ontology([path]))
    assert any(
        p.node == "https://example.org/each-tool#Compute" and "totalMme" in p.message
        for p in problems
    ), [str(p) for p in problems]


def test_for_each_on_a_step_that_is_not_an_action_is_not_understood(tmp_path: Path) -> None:
    path = _variant(
        tmp_path,
        ":Decide a horis:ReasoningStep ;",
        ":Decide a horis:ReasoningStep ; horis:forEach ( :hasOrder ) ;",
    )
    with pytest.raises(OntologyError) as caught:
        load_ontology([path])
    assert any(
        p.node == "https://example.org/each-tool#Decide" and "forEach" in str(p)
        for p in caught.value.problems
    ), [str(p) for p in caught.value.problems]

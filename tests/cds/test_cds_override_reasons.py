"""Override reasons: declared in Turtle, offered on every bundled card, stored with the feedback
against the card, the service, the rules of its proof and the deployment version, and counted
by ``GET /analytics`` per service, card and rule."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from app.ontology import OntologyError, load_ontology
from app.ontology.deployments import find_deployments
from app.ontology.loader import default_ontology_paths
from app.store import feedback as feedback_store
from app.store import session_scope
from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
ROOT = Path(__file__).resolve().parents[2]
NON_ADHERENCE = "http://terminology.hl7.org/CodeSystem/non-adherence-reason-codes"
MED_SAFETY = "horismos-med-safety"
CONCERNS = {
    "system": NON_ADHERENCE,
    "code": "recipient-concerns-outcomes",
    "display": "Recipient has concerns regarding potential health outcomes",
}


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client() as c:
        yield c


# --- declared in Turtle -------------------------------------------------------------------------


def test_every_card_of_every_bundled_service_offers_coded_override_reasons() -> None:
    for source in find_deployments(default_ontology_paths()):
        ontology = load_ontology(source.paths)
        for service in ontology.services.values():
            assert service.cards, service.id
            for card in service.cards:
                reasons = [ontology.individuals[i] for i in service.reasons_for(card)]
                assert reasons, (service.id, card.summary)
                for reason in reasons:
                    assert reason.codes[0].startswith(NON_ADHERENCE + "|"), reason.iri
                    assert reason.label, reason.iri


def _triage_with(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "ontologies/triage.ttl").read_text()
    assert old in text
    path = tmp_path / "triage.ttl"
    path.write_text(text.replace(old, new, 1))
    return path


def test_a_card_may_offer_its_own_override_reasons_in_place_of_the_services(
    tmp_path: Path,
) -> None:
    path = _triage_with(
        tmp_path,
        'horis:detail "**Immediate**: {{because.acuity}}. See the patient now." ]',
        'horis:detail "**Immediate**: {{because.acuity}}. See the patient now." ;\n'
        "                 horis:overrideReason ( :OverrideDisagreesEvidence ) ]",
    )
    service = load_ontology([path]).service("horismos-triage")
    immediate, urgent = service.cards[0], service.cards[1]
    assert [i.rsplit("#", 1)[1] for i in service.reasons_for(immediate)] == [
        "OverrideDisagreesEvidence"
    ]
    assert len(service.reasons_for(urgent)) == 3  # the service's


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ('    rdfs:label "PC CDS does not apply to patient" .', "    .", "rdfs:label"),
        (
            '    horis:code "http://terminology.hl7.org/CodeSystem/non-adherence-reason-codes|'
            'cds-not-applicable" ;\n',
            "",
            "horis:code",
        ),
    ],
    ids=["no-display", "no-code"],
)
def test_an_override_reason_without_a_code_or_a_display_is_a_load_error(
    tmp_path: Path, old: str, new: str, said: str
) -> None:
    with pytest.raises(OntologyError) as info:
        load_ontology([_triage_with(tmp_path, old, new)])
    assert any(
        "OverrideNotApplicable" in p.node and said in p.message for p in info.value.problems
    ), info.value.problems


# --- on the card, and in the feedback ------------------------------------------------------------


def _override(
    client: TestClient, service: str, card: dict[str, Any], reason: dict[str, Any] | None
) -> None:
    item: dict[str, Any] = {
        "card": card["uuid"],
        "outcome": "overridden" if reason is not None else "accepted",
        "outcomeTimestamp": "2026-12-01T10:00:00Z",
    }
    if reason is not None:
        item["overrideReason"] = {"reason": reason, "userComment": "seen by nephrology"}
    stored = client.post(f"/cds-services/{service}/feedback", json={"feedback": [item]})
    assert stored.status_code == 200, stored.text


def test_the_chosen_reason_is_stored_against_card_service_rules_and_version(
    client: TestClient, engine: Engine
) -> None:
    [card] = client.post(f"/cds-services/{MED_SAFETY}", json=fx.med_safety_body()).json()["cards"]
    assert card["summary"] == "Contraindicated medication order"
    assert CONCERNS in card["overrideReasons"]

    _override(client, MED_SAFETY, card, CONCERNS)

    with session_scope(engine) as session:
        [row] = feedback_store.list_feedback(session, service_id=MED_SAFETY)
        assert row.card_uuid == card["uuid"]
        assert row.card_key == "Contraindicated medication order"
        assert row.rules == ["ContraindicatedNsaidLowEgfr"]
        assert row.deployment_version == "1.7.0"
        assert row.reason_code == f"{NON_ADHERENCE}|recipient-concerns-outcomes"
        assert row.override_reason is not None
        assert row.override_reason["userComment"] == "seen by nephrology"


def test_analytics_counts_fired_accepted_and_overridden_by_reason_per_card_and_rule(
    client: TestClient,
) -> None:
    cards = [
        client.post(f"/cds-services/{MED_SAFETY}", json=fx.med_safety_body()).json()["cards"][0]
        for _ in range(3)
    ]
    _override(client, MED_SAFETY, cards[0], None)
    _override(client, MED_SAFETY, cards[1], CONCERNS)
    _override(client, MED_SAFETY, cards[2], CONCERNS)

    report = client.get("/analytics", params={"service": MED_SAFETY}).json()

    [service] = report["services"]
    assert (service["service"], service["title"]) == (MED_SAFETY, "Medication safety at signing")
    expected = {
        "fired": 3,
        "accepted": 1,
        "overridden": 2,
        "overriddenBy": [
            {
                "reason": f"{NON_ADHERENCE}|recipient-concerns-outcomes",
                "display": CONCERNS["display"],
                "count": 2,
            }
        ],
    }
    [card] = service["cards"]
    assert card == {
        "card": "Contraindicated medication order",
        "label": "Contraindicated medication order",
        **expected,
    }
    [rule] = service["rules"]
    assert rule == {
        "rule": "ContraindicatedNsaidLowEgfr",
        "label": "NSAID with eGFR below 30",
        **expected,
    }
    # over time: the cards fired today, the feedback came on the day it says
    days = {d["day"]: (d["fired"], d["accepted"], d["overridden"]) for d in service["days"]}
    assert days["2026-12-01"] == (0, 1, 2)
    assert sum(f for f, _, _ in days.values()) == 3


def test_analytics_for_a_window_with_nothing_is_empty_and_the_window_is_bounded(
    client: TestClient,
) -> None:
    assert client.get("/analytics").json()["services"] == []
    assert client.get("/analytics", params={"days": 0}).status_code in (400, 422)
    assert client.get("/analytics", params={"days": 367}).status_code in (400, 422)


def test_the_analytics_page_escapes_what_a_client_sent(client: TestClient) -> None:
    [card] = client.post(f"/cds-services/{MED_SAFETY}", json=fx.med_safety_body()).json()["cards"]
    hostile = {"system": "urn:x", "code": "x", "display": "<img src=x onerror=alert(1)>"}
    _override(client, MED_SAFETY, card, hostile)

    page = client.get("/analytics", headers={"accept": "text/html"})

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert "<img src=x" not in page.text
    assert "&lt;img src=x onerror=alert(1)&gt;: 1" in page.text

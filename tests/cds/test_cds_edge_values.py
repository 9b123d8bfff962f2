"""Values at the edges of what FHIR allows are read, or refused with a reason, never a 5xx:
records dated at the ends of the calendar (the "unknown" sentinel ``0001-01-01T00:00:00+01:00``,
``9999-12-31T23:59:59-12:00``) shown in any time zone, a leap second, a supply that runs past
9999, and feedback stamped outside the calendar. Real HTTP through the ASGI app, on both
database backends; every decision record page is opened too."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds import clinical as fx
from tests.cds.card_markdown import decision_record_text
from tests.support import opioid_cases as oc

OpenClient = Callable[..., AbstractContextManager[TestClient]]
MED = "/cds-services/horismos-med-safety"
AMOXICILLIN, PENICILLIN_ALLERGY = "723", "91936005"


def _run(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()["extension"]["dev.horismos.run"]
    return run


def _page(client: TestClient, run: dict[str, Any]) -> str:
    page = client.get(f"/runs/{run['runId']}", headers={"accept": "text/html"})
    assert page.status_code == 200, page.text
    assert client.get(f"/runs/{run['runId']}").status_code == 200
    return page.text


def _amoxicillin_for_an_allergy_recorded(pid: str, when: str) -> dict[str, Any]:
    allergy = fx.allergy(pid, PENICILLIN_ALLERGY)
    allergy["recordedDate"] = allergy["onsetDateTime"] = when
    labs = [fx.observation(pid, "33914-3", 80, "mL/min/{1.73_m2}", category="laboratory")]
    return fx.order_sign(
        pid,
        [fx.draft_order(pid, AMOXICILLIN)],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "allergies": fx.searchset([allergy]),
            "labs": fx.searchset(labs),
        },
    )


@pytest.mark.parametrize(
    ("recorded", "zone", "shown"),
    [
        # in UTC this instant is 31 Dec of year 0: shown as written, its offset named
        ("0001-01-01T00:00:00+01:00", "UTC", "1 Jan 0001 00:00 UTC+01:00"),
        ("0001-01-01T00:00:00+14:00", "Europe/Paris", "1 Jan 0001 00:00 UTC+14:00"),
        ("0001-01-01T00:00:00Z", "America/New_York", "1 Jan 0001 00:00 UTC"),
        ("9999-12-31T23:59:59-12:00", "UTC", "31 Dec 9999 23:59 UTC-12:00"),
        ("9999-12-31T23:59:59Z", "Pacific/Kiritimati", "31 Dec 9999 23:59 UTC"),
        ("0001-01-01", "Pacific/Kiritimati", "1 Jan 0001"),
    ],
)
def test_a_penicillin_allergy_dated_at_the_calendars_edge_still_stops_amoxicillin(
    make_app_client: OpenClient, recorded: str, zone: str, shown: str
) -> None:
    """The allergy record's date is an "unknown" sentinel at the edge of the calendar; the call
    once failed with a 500 while writing the card, so the EHR showed nothing at all."""
    with make_app_client(timezone=zone) as client:
        answer = client.post(MED, json=_amoxicillin_for_an_allergy_recorded(fx.new_id(), recorded))
        run = _run(answer)
        assert run["decision"] == {"property": "orderSafety", "value": "Contraindicated"}
        [card] = answer.json()["cards"]
        assert card["indicator"] == "critical"
        assert f"has allergy Penicillin allergy, {shown}" in card["detail"]
        assert "Has allergy: Penicillin allergy" in decision_record_text(client, card)
        assert shown in _page(client, run)


def test_a_heart_rate_taken_at_a_leap_second_is_read_with_its_time(
    make_app_client: OpenClient,
) -> None:
    """FHIR's grammar admits ``:60``; the reading is fresh and decides, its time shown."""
    pid, eid = fx.new_id(), fx.new_id()
    taken = fx.recent(30)
    heart_rate = fx.observation(pid, "8867-4", 160, "/min", when=f"{taken[:17]}60{taken[19:]}")
    body = fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "vitals": fx.searchset([heart_rate, *fx.vital_signs(pid, skip={"8867-4"})]),
            "conditions": fx.searchset([]),
        },
    )
    with make_app_client() as client:
        answer = client.post("/cds-services/horismos-triage", json=body)
        run = _run(answer)
        assert run["decision"]["value"] == "Immediate"
        [card] = answer.json()["cards"]
        assert f"heart rate 160 /min, {int(taken[8:10])} " in card["detail"]
        assert f"{taken[11:16]} UTC" in card["detail"] and ":60" not in card["detail"]
        _page(client, run)


def test_an_opioid_order_authored_at_a_leap_second_is_checked_like_any_other(
    make_app_client: OpenClient,
) -> None:
    """50 MME a day of hydrocodone for 30 days: the naloxone warning, whether the order was
    authored at midnight or in the leap second before it."""
    with make_app_client() as client:
        for authored in (f"{oc.ago(0)}T00:00:00Z", f"{oc.ago(1)}T23:59:60Z"):
            pid = "p08-" + fx.new_id()
            draft = oc.order("draft", pid, oc.HYDROCODONE_10, dose=5, authored=authored)
            empty = fx.searchset([])
            prefetch = {"patient": oc.patient(pid), "medications": empty, "conditions": empty}
            prefetch |= {"encounters": empty, "procedures": empty, "statements": empty}
            answer = client.post(
                "/cds-services/opioidcds-08", json=_order_sign(pid, draft, prefetch)
            )
            assert _run(answer)["decision"]["value"] == "Applies", authored
            assert [c["indicator"] for c in answer.json()["cards"]] == ["warning"]


def _order_sign(pid: str, draft: dict[str, Any], prefetch: dict[str, Any]) -> dict[str, Any]:
    return {
        "hook": "order-sign",
        "hookInstance": str(uuid.uuid4()),
        "context": {
            "userId": "Practitioner/example",
            "patientId": pid,
            "draftOrders": {
                "resourceType": "Bundle",
                "type": "collection",
                "entry": [{"resource": draft}],
            },
        },
        "prefetch": prefetch,
    }


def test_an_egfr_too_large_to_convert_is_refused_with_its_value(
    make_app_client: OpenClient,
) -> None:
    """The largest double in mL/s is past a double in mL/min: the reading is refused for what
    it is (above the deployment's maximum), and ibuprofen is not decided on the rest."""
    pid = fx.new_id()
    egfr = fx.observation(
        pid, "33914-3", 1.7976931348623157e308, "mL/s/{1.73_m2}", category="laboratory"
    )
    body = fx.order_sign(
        pid,
        [fx.draft_order(pid, "5640")],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "allergies": fx.searchset([]),
            "labs": fx.searchset([egfr]),
        },
    )
    with make_app_client() as client:
        answer = client.post(MED, json=body)
        run = _run(answer)
        assert "decision" not in run
        [card] = answer.json()["cards"]
        assert (
            "eGFR reading not used: egfr 1.07861588091738942E+310 is above the maximum 250"
            in (card["detail"])
        )
        _page(client, run)


def _rec07(supply_days: float, authored: str) -> dict[str, Any]:
    """Recommendation 7 at signing an extended-release oxycodone, with one stored order of it
    authored ``authored`` for ``supply_days`` days."""
    pid = "p07-" + fx.new_id()
    draft = oc.order("draft", pid, oc.OXYCODONE_ER_10, status="draft")
    stored = oc.order("stored", pid, oc.OXYCODONE_ER_10, authored=authored, supply_days=supply_days)
    prefetch = {
        "patient": oc.patient(pid),
        "medicationRequests": fx.searchset([stored]),
        "conditions": fx.searchset([]),
        "encounters": fx.searchset([]),
        "procedures": fx.searchset([]),
    }
    return _order_sign(pid, draft, prefetch)


def test_an_opioid_supply_running_past_the_calendar_covers_every_day_of_the_window(
    make_app_client: OpenClient,
) -> None:
    """A 120-day supply from 100 days ago makes the patient a long-term user; one of 10³⁰⁰
    days (its end lies past 9999-12-31) says the same, rather than failing the call. An order
    authored on 9999-12-31 covers none of the past months."""
    with make_app_client() as client:

        def advice(supply: float, authored: str) -> tuple[str | None, list[str]]:
            answer = client.post("/cds-services/opioidcds-07", json=_rec07(supply, authored))
            run = _run(answer)
            _page(client, run)
            return run.get("decision", {}).get("value"), [
                c["indicator"] for c in answer.json()["cards"]
            ]

        assert advice(120, oc.ago(100)) == ("EvaluateBenefitsAndRisks", ["warning"])
        assert advice(1e300, oc.ago(100)) == ("EvaluateBenefitsAndRisks", ["warning"])
        assert advice(30, "9999-12-31") == ("NoAdvice", [])


@pytest.mark.parametrize(
    ("stamp", "why"),
    [
        ("0001-01-01T00:00:00+01:00", "lies outside the years 0001 to 9999 in UTC"),
        ("9999-12-31T23:59:59-12:00", "lies outside the years 0001 to 9999 in UTC"),
        ("2025-06-01T10:05:31", "must be an ISO 8601 instant with a time zone offset"),
        ("2025-06-01", "must be an ISO 8601 instant with a time zone offset"),
    ],
)
def test_feedback_stamped_outside_the_calendar_or_without_an_offset_is_400_naming_it(
    make_app_client: OpenClient, stamp: str, why: str
) -> None:
    """Such a stamp cannot be stored as an instant: the client is told which field, not asked
    to retry a 503."""
    with make_app_client() as client:
        card = client.post(MED, json=fx.med_safety_body()).json()["cards"][0]["uuid"]
        item = {"card": card, "outcome": "overridden", "outcomeTimestamp": stamp}
        resp = client.post(MED + "/feedback", json={"feedback": [item]})
        assert resp.status_code == 400, resp.text
        [issue] = resp.json()["issue"]
        assert issue["expression"] == ["feedback[0].outcomeTimestamp"]
        assert why in issue["diagnostics"]
        item["outcomeTimestamp"] = "0001-01-01T00:00:00Z"  # the calendar's first instant is one
        assert client.post(MED + "/feedback", json={"feedback": [item]}).status_code == 200

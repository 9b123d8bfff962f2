"""Data-driven conformance over every published CDS Hooks fixture in tests/data/cds/fixtures.

Each request fixture is accepted or refused as CDS Hooks 2.0 says (refusals are 400 with an
OperationOutcome naming the field); each response fixture goes through the response validator
and the deliberately broken ones are flagged with the field at fault.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cds.errors import RequestInvalid
from app.cds.requests import parse_feedback, parse_hook_request
from app.cds.response_check import check_card, check_response

FIXTURES = Path(__file__).parents[1] / "data/cds/fixtures"
ALL = sorted(p.name for p in FIXTURES.glob("*.json"))

#: request fixtures accepted by the envelope and per-hook context validation
ACCEPTED = {
    "appointment-book-request-crd-testkit.json",
    "encounter-discharge-request-crd-testkit.json",
    "encounter-start-request-crd-testkit.json",
    "order-select-request-crd-testkit.json",
    "order-sign-request-crd-testkit.json",
    "patient-view-request-with-prefetch-spec.json",
    # the Sandbox's own requests: the envelope is valid; what their draft orders need is read
    # by the service (tests/cds/test_cds_sandbox.py)
    "order-select-request-cds-hooks-sandbox.json",
    "order-sign-request-cds-hooks-sandbox.json",
    "patient-view-request-cds-hooks-sandbox.json",
    # a hook this validator does not know: the envelope is valid; the service refuses the hook
    "unknown-hook-fancy-structure-request-crd-testkit.json",
}
#: request fixtures refused, with the fields each refusal must name
REFUSED = {
    "order-dispatch-request-legacy-context-crd-testkit.json": {"context.dispatchedOrders"},
    # its patientId "Patient/123" is read as "123" (docs/cds-hooks.md, "Request leniency")
    "order-sign-request-nonuuid-hookinstance-empty-scope-hapi.json": {
        "hookInstance",
        "context.userId",
    },
    "patient-view-request-extension-missing-patientid-spec.json": {"context.patientId"},
    "request-missing-hookinstance-null-prefetch-hapi.json": {"hookInstance"},
}
#: response fixtures (whole responses, bare cards, or bare arrays of cards) and what is flagged
RESPONSES: dict[str, set[str]] = {
    "response-empty-cards-spec.json": set(),
    "response-cards-links-overridereasons-spec.json": set(),
    "response-cards-with-systemactions-crd-testkit.json": set(),
    "cards-array-suggestions-links-crd-testkit.json": set(),
    "response-autolaunchable-card-missing-indicator-spec.json": {"cards[0].indicator"},
    "response-systemactions-snipped-resource-spec.json": {
        "systemActions[0].description",
        "systemActions[0].resource",
    },
    "card-suggestion-empty-actions-crd-testkit.json": {"card.suggestions[0].actions"},
    "response-cards-missing-required-fields-hapi.json": {
        "cards[0].summary",
        "cards[0].indicator",
        "cards[0].source",
        "cards[0].selectionBehavior",
        "cards[0].suggestions[0].label",
        "systemActions[0].description",
    },
}
CONTEXT_ONLY = {"order-select-context-r4-library.json", "order-sign-context-r4-library.json"}
FEEDBACK = {n for n in ALL if n.startswith("feedback-")}
OTHER = {
    "discovery-response-spec.json",
    "discovery-response-with-extension-spec.json",
    "discovery-response-six-hooks-crd-testkit.json",
    "prefetch-templates-discovery-fragment-spec.json",
    "jwt-es384-example-expired-spec.json",
    "sandbox-client-jwks-public.json",
}


def _load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def test_every_fixture_is_classified() -> None:
    known = set(ACCEPTED) | set(REFUSED) | set(RESPONSES) | CONTEXT_ONLY | FEEDBACK | OTHER
    assert set(ALL) == known


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_request_fixture_is_accepted(name: str) -> None:
    body = _load(name)
    req = parse_hook_request(body)
    assert req.hook == body["hook"]
    assert req.context["patientId"] == body["context"]["patientId"]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_edge_request_fixture_is_refused_naming_the_field(name: str) -> None:
    with pytest.raises(RequestInvalid) as info:
        parse_hook_request(_load(name))
    outcome = info.value.outcome()
    assert info.value.status_code == 400
    assert outcome["resourceType"] == "OperationOutcome"
    named = {e for issue in outcome["issue"] for e in issue.get("expression", [])}
    assert named == REFUSED[name]
    assert all(issue["diagnostics"] for issue in outcome["issue"])


@pytest.mark.parametrize("name", sorted(CONTEXT_ONLY))
def test_library_context_examples_validate_inside_a_full_request(name: str) -> None:
    hook = "order-select" if "select" in name else "order-sign"
    body = {
        "hook": hook,
        "hookInstance": "d1577c69-dfbe-44ad-ba6d-3e05e953b2ea",
        "context": _load(name)["context"],
    }
    assert parse_hook_request(body).context["draftOrders"]["resourceType"] == "Bundle"


def test_selections_must_point_into_draft_orders() -> None:
    body = _load("order-select-request-crd-testkit.json")
    body["context"]["selections"] = ["MedicationRequest/not-drafted"]
    with pytest.raises(RequestInvalid) as info:
        parse_hook_request(body)
    assert info.value.outcome()["issue"][0]["expression"] == ["context.selections[0]"]


@pytest.mark.parametrize("field", ["access_token", "token_type", "expires_in", "scope", "subject"])
def test_fhir_authorization_requires_its_five_fields(field: str) -> None:
    body = _load("encounter-start-request-crd-testkit.json")
    del body["fhirAuthorization"][field]
    with pytest.raises(RequestInvalid) as info:
        parse_hook_request(body)
    assert info.value.outcome()["issue"][0]["expression"] == [f"fhirAuthorization.{field}"]


@pytest.mark.parametrize("token", ["tök", "a b", "a\nb"])
def test_an_access_token_a_header_cannot_carry_is_refused_naming_it(token: str) -> None:
    body = _load("encounter-start-request-crd-testkit.json")
    body["fhirAuthorization"]["access_token"] = token
    with pytest.raises(RequestInvalid) as info:
        parse_hook_request(body)
    assert info.value.outcome()["issue"][0]["expression"] == ["fhirAuthorization.access_token"]
    # the fixture's own token (the complete twin) is accepted
    assert parse_hook_request(_load("encounter-start-request-crd-testkit.json")).authorization


def test_fhir_authorization_without_fhir_server_is_refused() -> None:
    body = _load("encounter-start-request-crd-testkit.json")
    del body["fhirServer"]
    with pytest.raises(RequestInvalid) as info:
        parse_hook_request(body)
    assert info.value.outcome()["issue"][0]["expression"] == ["fhirServer"]


@pytest.mark.parametrize("name", sorted(RESPONSES))
def test_response_fixture_through_the_validator(name: str) -> None:
    data = _load(name)
    if isinstance(data, list):
        problems = [p for i, c in enumerate(data) for p in check_card(c, f"cards[{i}]")]
    elif "cards" in data or "systemActions" in data:
        problems = check_response(data)
    else:
        problems = check_card(data)
    flagged = {p.split(":")[0] for p in problems}
    for expected in RESPONSES[name]:
        assert any(f == expected or f.startswith(expected + ".") for f in flagged), (
            expected,
            problems,
        )
    if not RESPONSES[name]:
        assert problems == []


def test_summary_of_140_characters_or_more_is_flagged() -> None:
    card = {"summary": "x" * 140, "indicator": "info", "source": {"label": "s"}}
    assert check_card(card) == ["card.summary: must be at most 139 characters"]
    assert check_card({**card, "summary": "x" * 139}) == []


@pytest.mark.parametrize("name", sorted(FEEDBACK))
def test_feedback_fixture_parses(name: str) -> None:
    body = parse_feedback(_load(name))
    assert body.feedback[0].outcome in ("accepted", "overridden")


def test_feedback_without_card_is_refused() -> None:
    with pytest.raises(RequestInvalid) as info:
        parse_feedback({"feedback": [{"outcome": "accepted", "outcomeTimestamp": "x"}]})
    assert info.value.outcome()["issue"][0]["expression"] == ["feedback[0].card"]

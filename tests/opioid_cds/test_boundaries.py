"""Cases of our own at the boundaries of each recommendation Horismos carries beyond the guide's
examples (``tests/data/opioid-cds/cases/``: day 90 against day 91, a screen 366 days ago, 7 days
of supply against 8…), in the examples' format, rolled to today and called over HTTP in both
prefetch modes exactly as the conformance tests call the guide's examples. Each case's ``note``
says what it pins down; its ``expectedCards`` are what the guide's logic answers."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from tests.support.fhir_server import FhirServer
from tests.support.opioid_examples import CASES_DIR, Example, call_service, load_examples

pytestmark = pytest.mark.fhirserver

CASES = load_examples(CASES_DIR)


@pytest.mark.parametrize("mode", ["prefetch", "fetch"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_answers_as_the_guides_logic(
    case: Example, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    response = call_service(
        client, fhir_server, case, service_id=case.service, mode=mode,
        today=datetime.now(UTC).date(),
    )  # fmt: skip
    assert response.status_code == 200, response.text
    cards = response.json()["cards"]
    assert sorted(c["indicator"] for c in cards) == case.expected_indicators, (
        case.request.get("note"),
        [c["summary"] for c in cards],
    )


def test_every_service_has_three_boundary_cases_or_more() -> None:
    per_service = Counter(c.service for c in CASES)
    assert set(per_service) == {
        "opioidcds-01", "opioidcds-02", "opioidcds-06", "opioidcds-07", "opioidcds-09",
        "opioidcds-10-order-sign", "opioidcds-10-patient-view", "opioidcds-12-patient-view",
    }  # fmt: skip
    assert min(per_service.values()) >= 3, per_service


def test_a_run_records_its_deployment_and_the_shared_files_it_imports(
    client: TestClient, fhir_server: FhirServer
) -> None:
    [case] = [c for c in CASES if c.name == "rec-10-pv-several-screenings"]
    response = call_service(
        client, fhir_server, case, service_id=case.service, mode="prefetch",
        today=datetime.now(UTC).date(),
    )  # fmt: skip
    assert response.status_code == 200, response.text
    run_id = response.json()["extension"]["dev.horismos.run"]["runId"]

    recorded = client.get(f"/runs/{run_id}").json()["deployment"]

    assert (recorded["iri"], recorded["version"]) == (
        "https://horismos.dev/opioid-cds/rec10-patient-view",
        "1.1.0",
    )
    assert {i["iri"]: i["version"] for i in recorded["imports"]} == {
        "https://horismos.dev/opioid-cds/common": "1.6.0",
        "https://horismos.dev/opioid-cds/urine-screening": "1.1.0",
    }


def test_a_disorder_coded_only_in_the_earlier_expansion_counts_and_the_run_says_so(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """724653003 "Opioid dependence with current use" is in the guide's 2022.1.0 expansion of
    opioid-misuse-disorders, not in today's: the patient gets recommendation 12's card, and the
    run names the code and both versions in a data-quality note."""
    [case] = [c for c in CASES if c.name.endswith("rec-12-earlier-expansion-code")]
    response = call_service(
        client, fhir_server, case, service_id=case.service, mode="prefetch",
        today=datetime.now(UTC).date(),
    )  # fmt: skip
    assert response.status_code == 200, response.text
    [card] = response.json()["cards"]
    assert card["indicator"] == "warning"
    run_id = response.json()["extension"]["dev.horismos.run"]["runId"]
    run = client.get(f"/runs/{run_id}").json()
    [note] = [n for n in run.get("dataQuality") or [] if n["rule"] == "earlier-expansion"]
    assert "724653003" in note["message"] and "2022.1.0" in note["message"]

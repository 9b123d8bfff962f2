"""Every card the opioid services answer to the guide's examples and to our boundary cases (and
to each of those that gets a card, once more with the patient's birth date left out: the
service cannot decide and says so), rendered by a CommonMark renderer (markdown-it-py) and held
to what every card must look like (``tests/cds/card_markdown.py``); together with the scenarios
of ``tests/cds/card_scenarios.py`` they must show every card the opioid deployments declare."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from tests.cds.card_markdown import check_card, check_summary, declared_cards, summary_matches
from tests.cds.card_scenarios import SCENARIOS
from tests.support.fhir_server import FhirServer
from tests.support.opioid_examples import (
    CASES_DIR,
    EXAMPLES_DIR,
    Example,
    call_service,
    deployed_services,
    load_examples,
)

pytestmark = pytest.mark.fhirserver

#: Declared cards no example, case or scenario answers yet (so none is rendered here): each must
#: leave this set as soon as something shows it — the test fails until it does.
NOT_YET_SHOWN = {
    (
        "opioidcds-04-05",
        "Calibrate or taper: {{focus.totalMme}} MME/day with {{instance.shortDrugName}}",
    ),
}


def _without_birth_date(example: Example) -> Example:
    request = copy.deepcopy(example.request)
    for value in (request.get("prefetch") or {}).values():
        if isinstance(value, dict) and value.get("resourceType") == "Patient":
            value.pop("birthDate", None)
    return replace(example, name=f"{example.name}-no-birth-date", request=request, expected=[])


# Every example and boundary case, twice, over HTTP against the FHIR server: ~30 s on an idle
# machine, past the suite's 120 s default on a loaded one.
@pytest.mark.timeout(360)
def test_every_opioid_card_renders_and_every_declared_one_is_shown(
    client: TestClient, fhir_server: FhirServer
) -> None:
    served = deployed_services()
    today = datetime.now(UTC).date()
    shown: set[tuple[str, str]] = set()
    examples = [e for e in [*load_examples(EXAMPLES_DIR), *load_examples(CASES_DIR)]]
    examples = [e for e in examples if e.service in served]
    for example in [*examples, *(_without_birth_date(e) for e in examples if e.expected)]:
        response = call_service(
            client, fhir_server, example, service_id=example.service, mode="prefetch", today=today
        )
        assert response.status_code == 200, (example.name, response.text)
        for card in response.json()["cards"]:
            check_card(card["detail"])
            check_summary(card["summary"])
            shown.add((example.service, card["summary"]))
    declared = {c for c in declared_cards() if c[0].startswith("opioidcds-")}
    # a card whose summary names the drug is shown when some summary is its template filled
    shown_declared = {
        (service, template)
        for service, template in declared
        if any(s == service and summary_matches(template, text) for s, text in shown)
    }
    assert declared - shown_declared - set(SCENARIOS) == NOT_YET_SHOWN

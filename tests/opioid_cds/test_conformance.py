"""Every example request of the CDC opioid guide, against the service over HTTP, twice.

Per example (``tests/support/opioid_examples.py``): its dates rolled to today, resources that
share an id given ids of their own, its stored resources loaded into the Node FHIR test server
under ids tagged for this test; then the hook is called

- ``prefetch``: as an EHR would, with every prefetch key filled by executing the service's own
  discovery template against the FHIR server;
- ``fetch``: with no prefetch and ``fhirServer`` pointing at the FHIR server: the service reads.

Both must answer what the reference answered: the same number of cards, with the same
indicators, and no card where it answered none. An example whose service is not in discovery is
a strict expected failure naming the service: the suite stays green, and the mark must go when
the deployment lands (a strict xfail that passes fails). Where Horismos knowingly answers
differently from the reference, ``DIVERGENT`` says what it answers and why (docs/opioid-cds.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app, load_verified_ontology
from app.settings import Settings
from app.tools.host import ToolHost
from tests.support.fhir_server import FhirServer
from tests.support.opioid_examples import Example, fill_template, load_examples, prepare

pytestmark = pytest.mark.fhirserver

EXAMPLES = load_examples()


@dataclass(frozen=True)
class Divergence:
    indicators: list[str]  # what Horismos answers
    reason: str


#: Examples where the reference's answer is not the guide's logic applied to the example's data.
DIVERGENT: dict[str, Divergence] = {
    "rec-08-mme-greater-than-fifty": Divergence(
        indicators=[],
        reason=(
            "the draft order is Pepto-Bismol; the reference's card came from a stored fentanyl "
            "order sharing the draft's id, which it took for an order being signed"
        ),
    ),
}


def _deployed() -> frozenset[str]:
    """The service ids the bundled ontology serves: what discovery lists."""
    ontology = load_verified_ontology(Settings(), ToolHost.discover())
    return frozenset(s.id for s in ontology.services.values())


DEPLOYED = _deployed()


def _cases() -> Iterator[Any]:
    for example in EXAMPLES:
        for mode in ("prefetch", "fetch"):
            marks = []
            if example.service not in DEPLOYED:
                marks.append(
                    pytest.mark.xfail(strict=True, reason=f"{example.service} is not deployed yet")
                )
            yield pytest.param(example, mode, id=f"{example.name}-{mode}", marks=marks)


@pytest.fixture(scope="module")
def client(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The service on a fresh SQLite database, shared by this module's calls (each call carries
    a hookInstance of its own)."""
    path = tmp_path_factory.mktemp("opioid-conformance") / "horismos.db"
    path.write_bytes(sqlite_template.read_bytes())
    with TestClient(create_app(Settings(database_url=f"sqlite:///{path}"))) as app_client:
        yield app_client


def ehr_prefetch(
    templates: dict[str, str], context: dict[str, Any], fhir: FhirServer
) -> dict[str, Any]:
    """Each template executed against the FHIR server as the EHR executes it: a read that finds
    nothing is ``null``; a template that does not apply to this context is left out."""
    out: dict[str, Any] = {}
    with httpx.Client(base_url=fhir.base_url + "/", timeout=10.0) as http:
        for key, template in templates.items():
            query = fill_template(template, context)
            if query is None:
                continue
            answer = http.get(query, headers={"accept": "application/fhir+json"})
            if answer.status_code == 404:
                out[key] = None
                continue
            assert answer.status_code == 200, f"{key}: {query} → {answer.status_code} {answer.text}"
            out[key] = answer.json()
    return out


@pytest.mark.parametrize(("example", "mode"), list(_cases()))
def test_example_answers_as_the_reference(
    example: Example, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    today = datetime.now(UTC).date()
    prepared = prepare(example, today, tag=fhir_server.new_id()[:6] + "-")
    for resource in prepared.stored:
        fhir_server.store_as_of(resource)
    discovery = client.get("/cds-services").json()["services"]
    service = next((s for s in discovery if s["id"] == example.service), None)
    assert service is not None, f"{example.service} is not in discovery"

    request = dict(prepared.request)
    request.update(hookInstance=str(uuid.uuid4()), fhirServer=fhir_server.base_url)
    request.pop("fhirAuthorization", None)
    if mode == "prefetch":
        request["prefetch"] = ehr_prefetch(
            service.get("prefetch") or {}, request["context"], fhir_server
        )
    else:
        request.pop("prefetch", None)
    response = client.post(f"/cds-services/{example.service}", json=request)

    assert response.status_code == 200, response.text
    cards = response.json()["cards"]
    expected = (
        DIVERGENT[example.name].indicators
        if example.name in DIVERGENT
        else example.expected_indicators
    )
    assert sorted(card["indicator"] for card in cards) == expected, [c["summary"] for c in cards]


def test_every_example_is_covered_and_every_divergence_names_an_example() -> None:
    assert len(EXAMPLES) == 29
    assert set(DIVERGENT) <= {e.name for e in EXAMPLES}
    assert {e.service for e in EXAMPLES} <= {
        "opioidcds-01", "opioidcds-02", "opioidcds-03", "opioidcds-04-05", "opioidcds-06",
        "opioidcds-07", "opioidcds-08", "opioidcds-09", "opioidcds-10-order-sign",
        "opioidcds-11-order-select",
    }  # fmt: skip

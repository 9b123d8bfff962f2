"""The conformance harness end to end, on a small probe service (tests/data/opioid-cds/probe):
the guide's examples, with their quirks, reach a service through prefetch templates executed
against the FHIR server and through the service's own reads, and both give one answer."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.support.fhir_server import FhirServer
from tests.support.opioid_examples import call_service, load_examples

pytestmark = pytest.mark.fhirserver

PROBE = Path(__file__).resolve().parents[1] / "data" / "opioid-cds" / "probe" / "probe.ttl"
EXAMPLES = {e.name: e for e in load_examples()}

#: what the probe answers: a warning for an adult's draft opioid (fentanyl 197696, oxycodone ER
#: 1049502), else nothing
PROBE_ANSWERS = {
    "rec-08-mme-less-than-fifty": ["warning"],  # fentanyl patch
    "rec-08-mme-greater-than-fifty": [],  # the draft is Pepto-Bismol; the shared id is apart
    "rec-03-not-long-acting-opioid": [],  # buprenorphine/naloxone film: not one of the two
    "rec-10-illicit-drugs": ["warning"],  # order-select; four Observations under one id
    "rec-11-opioid-trigger-with-benzo": ["warning"],  # order-select; bare subject, not the patient
}


@pytest.fixture(scope="module")
def probe(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The probe service on one SQLite database for the module: this is about the harness."""
    path = tmp_path_factory.mktemp("probe") / "horismos.db"
    path.write_bytes(sqlite_template.read_bytes())
    settings = Settings(database_url=f"sqlite:///{path}", ontology_paths=[str(PROBE)])
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.mark.parametrize("mode", ["prefetch", "fetch"])
@pytest.mark.parametrize("name", sorted(PROBE_ANSWERS))
def test_the_harness_delivers_each_example_to_a_service(
    probe: TestClient, fhir_server: FhirServer, name: str, mode: str
) -> None:
    since = fhir_server.mark()
    response = call_service(
        probe,
        fhir_server,
        EXAMPLES[name],
        service_id="opioid-probe",
        mode=mode,
        today=datetime.now(UTC).date(),
    )

    assert response.status_code == 200, response.text
    assert [c["indicator"] for c in response.json()["cards"]] == PROBE_ANSWERS[name]
    reads = [r["url"] for r in fhir_server.requests(since) if r["method"] == "GET"]
    patient_reads = [u for u in reads if "/Patient/" in u]
    # as the EHR (prefetch) the harness read the patient once; in fetch mode the service did
    assert len(patient_reads) == 1
    assert all("Patient/Patient" not in u for u in reads)  # a typed patientId was read bare

"""The guide's services are served by default, under the guide's own ids and hooks, each a
deployment of its own that imports the shared definitions (ontologies/opioid-cds/common.ttl)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import configured_deployments
from app.settings import Settings
from app.tools.host import ToolHost

#: the guide's service id → its hook (PlanDefinition action.trigger), for every service deployed
SERVICES = {
    "opioidcds-01": "order-sign",
    "opioidcds-02": "order-sign",
    "opioidcds-03": "order-sign",
    "opioidcds-04-05": "order-sign",
    "opioidcds-06": "order-sign",
    "opioidcds-07": "order-sign",
    "opioidcds-08": "order-sign",
    "opioidcds-09": "order-sign",
    "opioidcds-10-order-sign": "order-sign",
    "opioidcds-10-patient-view": "patient-view",
    "opioidcds-11-order-select": "order-select",
    "opioidcds-11-patient-view": "patient-view",
    "opioidcds-12-patient-view": "patient-view",
}
COMMON = "https://horismos.dev/opioid-cds/common"


def test_each_service_is_in_discovery_with_the_guides_hook(client: TestClient) -> None:
    listed = {s["id"]: s for s in client.get("/individual/cds-services").json()["services"]}

    for service_id, hook in SERVICES.items():
        assert service_id in listed, f"{service_id} is not in discovery"
        assert listed[service_id]["hook"] == hook
        assert "Patient/{{context.patientId}}" in listed[service_id]["prefetch"].values()


def test_the_services_that_read_what_the_patient_reports_taking_ask_for_it(
    client: TestClient,
) -> None:
    """Recommendations 8 and 11 (order-select) read MedicationStatements: their discovery asks
    the EHR for them, so an integrator knows to send them; the others do not ask."""
    listed = {s["id"]: s for s in client.get("/individual/cds-services").json()["services"]}
    asking = {
        service_id
        for service_id in SERVICES
        if "MedicationStatement?patient={{context.patientId}}"
        in listed[service_id]["prefetch"].values()
    }
    assert asking == {"opioidcds-08", "opioidcds-11-order-select"}
    assert listed["opioidcds-08"]["prefetch"]["statements"].startswith("MedicationStatement?")


@pytest.mark.parametrize("service_id", sorted(SERVICES))
def test_each_service_is_a_deployment_of_its_own_on_the_common_definitions(
    service_id: str,
) -> None:
    deployments = configured_deployments(Settings(), ToolHost.discover())
    deployment = deployments.for_service(service_id)

    assert deployment is not None and deployment.serving, deployment
    assert any(Path(i).name == "common.ttl" for i in deployment.imports)
    assert deployment.iri != COMMON

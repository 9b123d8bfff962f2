"""Property-based contract test of the CDS Hooks endpoints from the app's own OpenAPI document:
no input makes the service fail with a 5xx, and every answer matches its declared schema."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks
from schemathesis.python import asgi

from app.main import create_app
from app.settings import Settings
from app.store.migrate import upgrade
from tests.support.depth import examples

LOOPBACK_FHIR = "http://127.0.0.1:9/fhir"
DB = Path(tempfile.gettempdir()) / f"horismos_cds_fuzz_{os.getpid()}.db"
APP = create_app(Settings(database_url=f"sqlite:///{DB}", public_base_url="https://cds.test"))
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP).include(path_regex="^/cds-services")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    DB.unlink(missing_ok=True)
    upgrade(f"sqlite:///{DB}")
    try:
        with asgi.get_client(APP) as c:
            yield c
    finally:
        DB.unlink(missing_ok=True)


@SCHEMA.parametrize()
@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_cds_endpoints_never_fail_and_match_their_schema(case: Any, client: Any) -> None:
    if isinstance(case.body, dict) and "fhirServer" in case.body:
        # keep every read the service attempts on loopback (nothing listens on the discard port)
        case.body["fhirServer"] = LOOPBACK_FHIR
    response = case.call(session=client)
    case.validate_response(
        response,
        checks=[
            checks.not_a_server_error,
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
        ],
    )

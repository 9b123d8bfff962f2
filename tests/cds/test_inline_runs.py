"""Which hook calls run on the event loop (``app.cds.inline``): a run that cannot act on
anything outside in this call, and only such a run. The answers themselves are the same either
way (every hook test runs through both paths)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from app.cds.accept import HookCall
from app.cds.inline import InlineRuns
from app.cds.requests import FhirAuthorization
from app.compose import adapters
from app.ontology import load_ontology
from app.runtime.runner import Runner

ROOT = Path(__file__).resolve().parents[2]
TRIAGE = load_ontology([ROOT / "ontologies/triage.ttl"])
MED_SAFETY = load_ontology([ROOT / "ontologies/med-safety.ttl"])


def _call(ontology: Any, service: str, *, scope: str | None, fhir_server: str | None) -> HookCall:
    definition = ontology.service(service)
    auth = None
    if scope is not None:
        auth = FhirAuthorization(
            access_token="t", token_type="Bearer", expires_in=300, scope=scope, subject="s"
        )
    return cast(
        HookCall,
        SimpleNamespace(
            ontology=ontology,
            workflow=ontology.workflows[definition.workflow],
            deployment=SimpleNamespace(digest=ontology.digest),
            req=SimpleNamespace(fhir_server=fhir_server, authorization=auth),
        ),
    )


def _commits() -> Any:
    import httpx

    from app.store import make_engine

    return adapters().commits(make_engine("sqlite://"), httpx.Client())


NO_MODEL = Runner()
WITH_MODEL = Runner(default_bridge=cast(Any, object()), bridges=lambda model: cast(Any, object()))
EHR = "https://ehr.example.org/fhir"
READ_ONLY = "user/Patient.read user/Observation.read user/Condition.read"
WRITES = READ_ONLY + " user/Encounter.write user/Communication.write"


@pytest.mark.parametrize(
    ("runner", "scope", "fhir_server", "inline"),
    [
        (NO_MODEL, READ_ONLY, EHR, True),  # every write refused before a request, no model
        (NO_MODEL, None, EHR, True),  # no fhirAuthorization: no scope granted
        (NO_MODEL, READ_ONLY, None, True),  # no FHIR server: the writes go nowhere
        (NO_MODEL, WRITES, EHR, False),  # a write may leave
        (NO_MODEL, READ_ONLY + " user/Encounter.write", EHR, False),  # one of them may
        (WITH_MODEL, READ_ONLY, EHR, False),  # a language model may be asked
    ],
)
def test_a_triage_call_stays_on_the_event_loop_only_when_nothing_can_leave(
    runner: Runner, scope: str | None, fhir_server: str | None, inline: bool
) -> None:
    runs = InlineRuns(runner, _commits())
    call = _call(TRIAGE, "horismos-triage", scope=scope, fhir_server=fhir_server)
    assert runs.stays_inside(call) is inline


def test_a_call_without_writes_stays_on_the_event_loop_unless_a_model_may_be_asked() -> None:
    # medication safety writes nothing; its explanation asks a model when one is configured
    call = _call(MED_SAFETY, "horismos-med-safety", scope=WRITES, fhir_server=EHR)
    assert InlineRuns(NO_MODEL, _commits()).stays_inside(call)
    assert not InlineRuns(WITH_MODEL, _commits()).stays_inside(call)

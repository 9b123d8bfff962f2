"""The key an order-sign call's input is matched by against a run computed ahead
(``app.cds.ahead.input_key``): equal for the same input however its searches were wrapped, and
different for any change that could change the answer."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from app.cds.ahead import input_key, still_current
from app.cds.prefetch import Gathered
from app.cds.requests import HookRequest
from app.ontology.model import CdsServiceDef

SERVICE = CdsServiceDef(
    iri="https://example.org/s", id="s", hook="order-sign", title="", description="",
    workflow="https://example.org/w", answered_ahead=True,
)  # fmt: skip
DEPLOYMENT = ("https://example.org/d", "1.0.0", "sha256:abc")
DRAFT = {"resourceType": "MedicationRequest", "id": "d1", "status": "draft", "intent": "order"}
CONDITION = {
    "resourceType": "Condition",
    "id": "c1",
    "meta": {"versionId": "1", "lastUpdated": "2026-12-01T10:00:00Z"},
    "code": {"coding": [{"system": "http://snomed.info/sct", "code": "1"}]},
}


def _bundle(*resources: dict[str, Any], **wrapper: Any) -> dict[str, Any]:
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        **wrapper,
        "entry": [{"resource": r} for r in resources],
    }


def _key(
    *,
    context: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
    deployment: tuple[str, str, str | None] = DEPLOYMENT,
    truncated: dict[str, str] | None = None,
) -> str:
    req = HookRequest(
        hook="order-sign",
        hook_instance="x",
        fhir_server="https://ehr.example.org/fhir",
        authorization=None,
        context=context or {"patientId": "p1", "draftOrders": _bundle(DRAFT, type="collection")},
        prefetch={},
        extension=None,
    )
    gathered = Gathered(
        data=data if data is not None else {"conditions": _bundle(CONDITION)},
        fetched=(),
        truncated=truncated or {},
    )
    return input_key(service=SERVICE, deployment=deployment, req=req, gathered=gathered)


def test_the_same_input_has_the_same_key_however_its_search_was_wrapped() -> None:
    # the EHR's prefetch and the service's own read of the same search differ in the Bundle only
    served = _bundle(CONDITION, id="b2", meta={"lastUpdated": "2026-12-01T10:05:00Z"}, total=1)
    assert _key() == _key(data={"conditions": served})


def test_a_changed_draft_version_context_truncation_or_deployment_changes_the_key() -> None:
    new_version = copy.deepcopy(CONDITION)
    new_version["meta"]["versionId"] = "2"
    draft = {**DRAFT, "dosageInstruction": [{"text": "1 tablet daily"}]}
    changed = [
        _key(data={"conditions": _bundle(new_version)}),
        _key(data={"conditions": _bundle()}),
        _key(data={"conditions": None}),
        _key(context={"patientId": "p1", "draftOrders": _bundle(draft, type="collection")}),
        _key(context={"patientId": "p2", "draftOrders": _bundle(DRAFT, type="collection")}),
        _key(truncated={"conditions": "the page budget was reached"}),
        _key(deployment=(DEPLOYMENT[0], "1.0.1", DEPLOYMENT[2])),
        _key(deployment=(DEPLOYMENT[0], DEPLOYMENT[1], "sha256:def")),
    ]
    assert len({_key(), *changed}) == len(changed) + 1


def test_an_answer_computed_ahead_stands_within_its_window_on_the_same_utc_day() -> None:
    computed = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)
    new_york = ZoneInfo("America/New_York")
    assert still_current(computed, computed + timedelta(seconds=120), seconds=300, zone=UTC)
    assert not still_current(computed, computed + timedelta(seconds=301), seconds=300, zone=UTC)
    assert not still_current(computed, computed - timedelta(seconds=1), seconds=300, zone=UTC)
    # 23:58 to 00:02 UTC is one evening in New York, but an age or a window of days is judged
    # on the UTC day: a birthday or a 90-day boundary may lie between
    late = datetime(2026, 12, 2, 23, 58, tzinfo=UTC)
    assert not still_current(late, late + timedelta(minutes=4), seconds=300, zone=new_york)

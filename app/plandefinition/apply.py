"""``$apply`` on the PlanDefinitions Horismos serves (``app.plandefinition.export``): a served CDS
service applied to one subject with the data given, answered as the CPG-on-FHIR guide has
``$apply`` answer — a Bundle whose first entry is the RequestGroup, the requests it proposes
after it.

The subject and the ``data`` Bundle become the hook request a live call would carry (every
prefetch template answered from the data as a FHIR server answers it), and the operation runs
it through the hook service itself, on its event loop (:class:`ServedApply`: parsing,
hydration, interpreter, cards and the run store, the run's ``origin`` ``apply``). The cards
become the RequestGroup's actions:

- ``title`` the summary, ``description`` the detail, ``priority`` from the indicator (info →
  routine, warning → urgent, critical → stat), ``documentation`` the card's source page and
  links, ``selectionBehavior`` as the card's;
- each suggestion a child action (``type`` create, update or remove), the resource it would
  create or update in the Bundle and referenced from the action;
- each of the answer's ``systemActions`` (sent without the clinician) an action with
  ``requiredBehavior`` must, after the cards' (its resource in the Bundle, or the one it names);
- the decision (or the inputs that kept the run from deciding) in the RequestGroup's
  ``extension``.

Which PlanDefinitions: the served services whose hook context can be built from a subject (and an
encounter): ``patient-view``, ``encounter-start``, ``encounter-discharge``. An authored
PlanDefinition (sent inline or held among the service's definitions) is expanded by
``app.plandefinition.authored`` instead (``app.plandefinition.operations`` chooses).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from app.cds.ahead import EXTENSION_KEY
from app.deployments import Deployments
from app.ontology.hooks import HOOKS
from app.plandefinition.careplan import care_plan
from app.plandefinition.endpoint import data_endpoint
from app.plandefinition.export import ACTION_TYPE, ACTION_TYPES, PRIORITY
from app.plandefinition.refusals import ApplyRefused, parameters
from app.population.bulk import SHARED_TYPES, TemplateUnsupported, answer_template
from app.store.db import session_scope
from app.store.repo import get_run

APPLY_HOOKS = ("patient-view", "encounter-start", "encounter-discharge")
DECISION_EXTENSION = "https://horismos.dev/fhir/StructureDefinition/decision"
APPLY_USER = "Practitioner/horismos-apply"


def _reference(value: Any, kind: str, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        value = value.get("reference")
    if not isinstance(value, str) or not value.startswith(f"{kind}/") or value == f"{kind}/":
        raise ApplyRefused(400, "value", f"{name} must be a {kind} reference", name)
    return value.removeprefix(f"{kind}/")


def _context(hook: str, patient: str, encounter: str | None, user: str) -> dict[str, Any]:
    context: dict[str, Any] = {"patientId": patient, "userId": user}
    if hook.startswith("encounter-") and encounter is None:
        raise ApplyRefused(
            400,
            "required",
            f"a {hook} PlanDefinition needs the encounter parameter",
            "encounter",
        )
    if encounter is not None and "encounterId" in {f.name for f in HOOKS.get(hook, ())}:
        context["encounterId"] = encounter  # patient-view names one too, when there is one
    return context


def _action(card: Mapping[str, Any], generated: list[dict[str, Any]]) -> dict[str, Any]:
    action: dict[str, Any] = {
        "title": card["summary"],
        "priority": PRIORITY[card["indicator"]],
    }
    if card.get("detail"):
        action["description"] = card["detail"]
    docs = []
    source = card.get("source") or {}
    if source.get("url"):
        docs.append({"type": "documentation", "display": source.get("label"), "url": source["url"]})
    docs.extend(
        {"type": "documentation", "display": link.get("label"), "url": link["url"]}
        for link in card.get("links") or ()
        if str(link.get("url", "")).startswith("http")
    )
    if docs:
        action["documentation"] = docs
    children = [
        _request(a, generated, {"title": s["label"]})
        for s in card.get("suggestions") or ()
        for a in s.get("actions") or [{}]
    ]
    if children:
        action["selectionBehavior"] = card.get("selectionBehavior", "any")
        action["action"] = children
    return action


def _request(
    a: Mapping[str, Any], generated: list[dict[str, Any]], action: dict[str, Any]
) -> dict[str, Any]:
    """``action`` with what the CDS Hooks Action ``a`` does: its description, type and the
    resource it creates (added to ``generated``, for the Bundle) or names."""
    if a.get("description"):
        action["description"] = a["description"]
    if a.get("type") in ACTION_TYPE:
        action["type"] = {"coding": [{"system": ACTION_TYPES, "code": ACTION_TYPE[a["type"]]}]}
    resource = a.get("resource")
    if isinstance(resource, dict) and resource.get("resourceType"):
        made = {**resource, "id": resource.get("id") or str(uuid.uuid4())}
        generated.append(made)
        action["resource"] = {"reference": f"{made['resourceType']}/{made['id']}"}
    elif isinstance(a.get("resourceId"), str):
        action["resource"] = {"reference": a["resourceId"]}
    return action


@dataclass(frozen=True, kw_only=True)
class ServedApply:
    """A served service's ``$apply`` with its hook request built: the operation runs
    ``request`` through the hook service on its event loop (recorded in the run store, the
    run's ``origin`` ``apply``), then :meth:`answer` makes the Bundle from its answer."""

    service_id: str
    request: dict[str, Any]
    patient: str
    encounter: str | None
    base: str
    when: datetime
    #: ``returnCarePlan``: the Bundle wrapped in a CarePlan
    care_plan: bool = False

    def answer(
        self, response: Mapping[str, Any], undecided: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The Bundle (or CarePlan) for the hook's ``response``; ``undecided``: the stored
        run's full account of what kept it from deciding (the response carries a summary)."""
        run = dict((response.get("extension") or {}).get(EXTENSION_KEY) or {})
        decision = {k: run[k] for k in ("runId", "decision", "undecided") if k in run}
        if undecided is not None and "undecided" in decision:
            decision["undecided"] = dict(undecided)
        generated: list[dict[str, Any]] = []
        group: dict[str, Any] = {
            "resourceType": "RequestGroup",
            "id": str(uuid.uuid4()),
            "instantiatesCanonical": [f"{self.base}/fhir/PlanDefinition/{self.service_id}"],
            "status": "draft",
            "intent": "proposal",
            "subject": {"reference": f"Patient/{self.patient}"},
            "authoredOn": self.when.isoformat(),
            "extension": [
                {
                    "url": DECISION_EXTENSION,
                    "valueString": json.dumps(
                        {"terminal": run.get("terminal"), **decision}, default=str, sort_keys=True
                    ),
                }
            ],
        }
        if self.encounter:
            group["encounter"] = {"reference": f"Encounter/{self.encounter}"}
        actions = [_action(card, generated) for card in response.get("cards") or ()]
        # what the service sends without the clinician: an action no one may leave out
        actions += [
            _request(a, generated, {"requiredBehavior": "must"})
            for a in response.get("systemActions") or ()
        ]
        if actions:
            group["action"] = actions
        bundle = {
            "resourceType": "Bundle",
            "id": str(uuid.uuid4()),
            "type": "collection",
            "entry": [{"resource": group}, *({"resource": r} for r in generated)],
        }
        return care_plan(bundle) if self.care_plan else bundle


def stored_outcome(engine: Engine, response: Mapping[str, Any]) -> dict[str, Any] | None:
    """The outcome document stored for the run a hook answer names (``runId``), or None."""
    run_id = ((response.get("extension") or {}).get(EXTENSION_KEY) or {}).get("runId")
    if not isinstance(run_id, str):
        return None
    with session_scope(engine) as session:
        stored = get_run(session, run_id)
        return dict(stored.outcome or {}) if stored is not None else None


def stored_undecided(engine: Engine, response: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stored run's full account of what kept it from deciding (a hook answer carries its
    summary), or None when the run decided."""
    if "undecided" not in ((response.get("extension") or {}).get(EXTENSION_KEY) or {}):
        return None
    found = (stored_outcome(engine, response) or {}).get("undecided")
    return dict(found) if isinstance(found, dict) else None


def apply(
    deployments: Deployments,
    plan_id: str | None,
    body: Any,
    *,
    base: str,
    at: datetime | None = None,
    allowed_fhir_servers: Sequence[str] = (),
) -> ServedApply:
    """The ``$apply`` call on the served PlanDefinition ``plan_id`` (its CDS service id), or,
    when None, the one the ``url`` parameter names (one of this service's, under ``base``),
    its hook request built (refusals raised here, before anything runs)."""
    given = parameters(body)
    if plan_id is None:
        url = given.get("url")
        prefix = f"{base}/fhir/PlanDefinition/"
        if not isinstance(url, str) or not url.startswith(prefix):
            raise ApplyRefused(404, "not-found", f"no served PlanDefinition at url {url!r}", "url")
        plan_id = url.removeprefix(prefix).split("|", 1)[0]
    service = next((s for s, _d in deployments.services() if s.id == plan_id), None)
    if service is None:
        raise ApplyRefused(404, "not-found", f"no served PlanDefinition {plan_id!r}", "id")
    if service.hook not in APPLY_HOOKS:
        raise ApplyRefused(
            422,
            "not-supported",
            f"{plan_id} is triggered by {service.hook}, whose context needs more than a "
            f"subject and an encounter (a draft order): $apply builds "
            f"{', '.join(APPLY_HOOKS)} calls only",
            "id",
        )
    endpoint = data_endpoint(given, allowed_fhir_servers)
    if endpoint is not None and given.get("data") is not None:
        raise ApplyRefused(
            422,
            "not-supported",
            f"{plan_id} is a served CDS service, which reads each of its prefetch searches "
            "whole from one place: send the subject's records in data, or name dataEndpoint, "
            "not both",
            "data",
        )
    patient = _reference(given.get("subject"), "Patient", "subject")
    if patient is None:
        raise ApplyRefused(400, "required", "$apply needs the subject parameter", "subject")
    encounter = _reference(given.get("encounter"), "Encounter", "encounter")
    practitioner = _reference(given.get("practitioner"), "Practitioner", "practitioner")
    data = given.get("data")
    if data is not None and (not isinstance(data, dict) or data.get("resourceType") != "Bundle"):
        raise ApplyRefused(400, "value", "data must be a Bundle", "data")
    entries = (data or {}).get("entry") or []
    if not isinstance(entries, list):
        raise ApplyRefused(400, "structure", "data.entry must be a list", "data")
    resources = [
        e["resource"]
        for e in entries
        if isinstance(e, dict)
        and isinstance(e.get("resource"), dict)
        and isinstance(e["resource"].get("resourceType"), str)
    ]
    shared = {
        f"{r['resourceType']}/{r.get('id')}": r
        for r in resources
        if r.get("resourceType") in SHARED_TYPES
    }
    when = at or datetime.now(UTC)
    context = _context(
        service.hook,
        patient,
        encounter,
        f"Practitioner/{practitioner}" if practitioner else APPLY_USER,
    )
    request: dict[str, Any] = {
        "hook": service.hook,
        "hookInstance": str(uuid.uuid4()),
        "context": context,
    }
    if endpoint is not None:
        # the hook reads every prefetch search from the endpoint itself, as it reads a hook
        # call's fhirServer: paging, truncation, the allow-list, a 412 naming what failed
        request["fhirServer"] = endpoint.address
        if endpoint.token is not None:
            request["fhirAuthorization"] = {
                "access_token": endpoint.token,
                "token_type": "Bearer",
                "expires_in": 300,
                "scope": "patient/*.read",
                "subject": "horismos-apply",
            }
    else:
        try:
            request["prefetch"] = {
                # a template naming the encounter when the call names none: nothing to read
                t.key: None
                if encounter is None and "{{context.encounterId}}" in t.query
                else answer_template(
                    t.query.replace("{{context.encounterId}}", encounter or ""),
                    patient,
                    resources,
                    shared,
                )
                for t in service.prefetch
            }
        except TemplateUnsupported as exc:
            raise ApplyRefused(422, "not-supported", str(exc), "data") from None
    return ServedApply(
        service_id=plan_id,
        request=request,
        patient=patient,
        encounter=encounter,
        base=base,
        when=when,
    )


__all__ = ["APPLY_HOOKS", "ServedApply", "apply", "stored_outcome", "stored_undecided"]

"""The first stage of a hook call: which service it is for, who sends it, and what it asks.

:func:`accept` finds the active deployment that serves the id (404, or 503 when its deployment
does not verify), checks the client's JWT (401), parses the body against CDS Hooks 2.0 and the
service's hook, repairing what a real client unambiguously meant (400 otherwise), and reads the
draft orders of the hook context, leaving out as *unread* the ones that are not valid R4. It
reads no FHIR server and stores nothing: a call refused here leaves no trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.cds.auth import ClientAuthenticator
from app.cds.errors import DeploymentRefused, Issue, RequestInvalid, ServiceNotFound
from app.cds.leniency import read_draft_orders
from app.cds.requests import HookRequest, as_service_hook, parse_hook_request
from app.deployments import Deployment, Deployments
from app.digest import json_digest
from app.ontology.model import CdsServiceDef, Ontology, WorkflowDef


@dataclass(frozen=True, kw_only=True)
class HookCall:
    """A hook call accepted for one service of one deployment version."""

    deployment: Deployment
    ontology: Ontology
    service: CdsServiceDef
    workflow: WorkflowDef
    req: HookRequest
    #: the body's digest, one however the client spells its hookInstance (upper or lower case):
    #: a retry with the same digest is the same call, a different one is 409
    digest: str


async def accept(
    deployments: Deployments,
    service_id: str,
    body: Any,
    *,
    authenticator: ClientAuthenticator | None,
    authorization: str | None,
    audience: str,
    allowed_fhir_servers: Sequence[str] = (),
) -> HookCall:
    """The call ``body`` to ``service_id``, accepted; ``authenticator`` None: sent by this
    service itself (a run computed ahead), so no JWT is asked for."""
    dep = served_deployment(deployments, service_id)
    ontology = dep.ontology
    assert ontology is not None  # a served deployment is compiled
    service, workflow = find_service(ontology, service_id)
    if authenticator is not None:
        await authenticator.verify(authorization, audience)
    req = parse_hook_request(body, allowed_fhir_servers=allowed_fhir_servers)
    req = as_service_hook(req, service.hook)
    if workflow.focus is None:
        raise RequestInvalid.one("not-supported", f"{workflow.name} declares no focus")
    req = _check_context_resources(ontology, workflow, req)
    return HookCall(
        deployment=dep,
        ontology=ontology,
        service=service,
        workflow=workflow,
        req=req,
        digest=request_digest({**body, "hookInstance": req.hook_instance}),
    )


def served_deployment(deployments: Deployments, service_id: str) -> Deployment:
    """The deployment serving ``service_id``: 404 when no deployment declares it, 503 with the
    verification report when its deployment is not served."""
    dep = deployments.for_service(service_id)
    if dep is None:
        raise ServiceNotFound.one("not-found", f"no CDS service {service_id!r} is declared", "id")
    if not dep.serving:
        issues = [
            Issue(
                code="not-supported",
                diagnostics=f"deployment {dep.id} {dep.version} does not verify and is not "
                f"served: {p}",
            )
            for p in dep.problems
        ]
        raise DeploymentRefused(
            issues=issues
            or [Issue(code="not-supported", diagnostics=f"deployment {dep.id} is not served")]
        )
    return dep


def find_service(ontology: Ontology, service_id: str) -> tuple[CdsServiceDef, WorkflowDef]:
    """The service ``service_id`` declares and the workflow it runs (404 when undeclared)."""
    try:
        service = ontology.service(service_id)
    except KeyError:
        raise ServiceNotFound.one(
            "not-found", f"no CDS service {service_id!r} is declared", "id"
        ) from None
    return service, ontology.workflow(service.workflow)


def request_digest(body: Mapping[str, Any]) -> str:
    """What tells two calls with one hookInstance apart: the digest of the canonical body."""
    return json_digest(body)


def _check_context_resources(
    ontology: Ontology, workflow: WorkflowDef, req: HookRequest
) -> HookRequest:
    """``req`` with the draft orders the service reads from the hook context repaired where they
    can mean one thing and left out, as ``unread``, where they are not valid R4 (the answer says
    each was not checked; the others are)."""
    if workflow.focus is None:
        return req
    wanted: dict[str, set[str]] = {}
    for prop in ontology.properties_of(workflow.focus):
        for m in prop.from_fhir:
            if m.context_key is not None:
                wanted.setdefault(m.context_key, set()).add(m.resource_type)
    context, notes, unread = read_draft_orders(req.context, wanted)
    if not notes and not unread:
        return req
    return replace(
        req,
        context=context,
        notes=(*req.notes, *notes, *(u.to_note() for u in unread)),
        unread=(*req.unread, *unread),
    )


__all__ = ["HookCall", "accept", "find_service", "request_digest", "served_deployment"]

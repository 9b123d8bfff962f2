"""The service's FHIR R4 base (``/fhir``): its CapabilityStatement, every served CDS service as a
PlanDefinition (``app.plandefinition.export``), for engines and authoring tools that list
guidelines as PlanDefinitions, and ``$apply`` on them (``app.plandefinition.apply``) and on an
ActivityDefinition sent inline (``app.plandefinition.activity``). Reading is as open as
discovery; ``$apply`` reads a patient's records, so it asks for the client JWT a hook call asks
for."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import Any

from anyio import from_thread, to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.cds.auth import called_url
from app.cds.errors import CdsError
from app.cds.routes import read_json_body
from app.container import Running, running
from app.deployments import Deployments
from app.deps import DeploymentsDep
from app.plandefinition.apply import ServedApply, stored_undecided
from app.plandefinition.endpoint import Fetch, read_endpoint
from app.plandefinition.export import plans
from app.plandefinition.operations import apply_activity_definition, apply_plan
from app.plandefinition.recorded import StoredPlanRuns
from app.plandefinition.refusals import ApplyRefused, outcome
from app.plandefinition.writes import WRITE_SCOPE, author_of, write_definition

router = APIRouter(prefix="/fhir", tags=["FHIR"])

FHIR_JSON = "application/fhir+json"


def _base(request: Request) -> str:
    _called, base = called_url(request)
    return base.rstrip("/")


def _refused(error: ApplyRefused) -> JSONResponse:
    return JSONResponse(outcome(error), status_code=error.status, media_type=FHIR_JSON)


def _outcome(
    status: int, code: str, diagnostics: str, expression: str | None = None
) -> JSONResponse:
    return _refused(ApplyRefused(status, code, diagnostics, expression))


@router.get("/metadata", summary="The FHIR CapabilityStatement of the service's /fhir base")
def metadata(request: Request) -> JSONResponse:
    from app import __version__

    statement = {
        "resourceType": "CapabilityStatement",
        "status": "active",
        "date": "2026-12-06",
        "kind": "instance",
        "software": {"name": "Horismos", "version": __version__},
        "implementation": {"description": "Horismos CDS services", "url": f"{_base(request)}/fhir"},
        "fhirVersion": "4.0.1",
        "format": ["json"],
        "rest": [
            {
                "mode": "server",
                "resource": [
                    {
                        "type": "PlanDefinition",
                        "interaction": [
                            {"code": "read"},
                            {"code": "search-type"},
                            {"code": "update"},
                        ],
                        "operation": [
                            {
                                "name": "apply",
                                "definition": "http://hl7.org/fhir/OperationDefinition/PlanDefinition-apply",
                            },
                            {
                                "name": "r5.apply",
                                "definition": "http://hl7.org/fhir/uv/cpg/OperationDefinition/cpg-plandefinition-apply",
                            },
                        ],
                    },
                    {
                        "type": "ActivityDefinition",
                        "interaction": [{"code": "read"}, {"code": "update"}],
                        "operation": [
                            {
                                "name": "apply",
                                "definition": "http://hl7.org/fhir/OperationDefinition/ActivityDefinition-apply",
                            }
                        ],
                    },
                    {
                        "type": "Questionnaire",
                        "interaction": [{"code": "read"}, {"code": "update"}],
                    },
                    {
                        "type": "Library",
                        "interaction": [{"code": "read"}, {"code": "update"}],
                        "documentation": "Held as an artifact, never evaluated: a plan naming "
                        "a logic library is refused",
                    },
                ],
            }
        ],
    }
    return JSONResponse(statement, media_type=FHIR_JSON)


@router.get(
    "/PlanDefinition",
    summary="Every served CDS service, and every PlanDefinition the service holds (a searchset)",
)
def search_plans(request: Request, deployments: DeploymentsDep) -> JSONResponse:
    base = _base(request)
    held = running(request.app).definitions.of_type("PlanDefinition")
    authored = {p.get("id") for p in held}
    found: list[tuple[str, Any]] = [
        (p["url"], p) for p in plans(deployments, base).values() if p["id"] not in authored
    ]
    found += [(f"{base}/fhir/PlanDefinition/{p.get('id')}", p) for p in held]
    bundle = {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": len(found),
        "entry": [
            {"fullUrl": url, "resource": plan, "search": {"mode": "match"}} for url, plan in found
        ],
    }
    return JSONResponse(bundle, media_type=FHIR_JSON)


@router.get(
    "/PlanDefinition/{plan_id}",
    summary="A served CDS service as a PlanDefinition, or a PlanDefinition the service holds",
)
def read_plan(plan_id: str, request: Request, deployments: DeploymentsDep) -> JSONResponse:
    held = running(request.app).definitions.by_id("PlanDefinition", plan_id)
    if held is not None:
        return JSONResponse(dict(held), media_type=FHIR_JSON)  # as authored, served or not
    found = plans(deployments, _base(request)).get(plan_id)
    if found is None:
        return _outcome(404, "not-found", f"no PlanDefinition {plan_id!r}", "id")
    return JSONResponse(found, media_type=FHIR_JSON)


def _read_held(request: Request, resource_type: str, ident: str) -> JSONResponse:
    held = running(request.app).definitions.by_id(resource_type, ident)
    if held is None:
        return _outcome(404, "not-found", f"no {resource_type} {ident!r}", "id")
    return JSONResponse(dict(held), media_type=FHIR_JSON)


@router.get(
    "/ActivityDefinition/{definition_id}",
    summary="An ActivityDefinition the service holds",
)
def read_activity_definition(definition_id: str, request: Request) -> JSONResponse:
    return _read_held(request, "ActivityDefinition", definition_id)


@router.get(
    "/Questionnaire/{questionnaire_id}",
    summary="A Questionnaire the service holds (a plan's action may point at it)",
)
def read_questionnaire(questionnaire_id: str, request: Request) -> JSONResponse:
    return _read_held(request, "Questionnaire", questionnaire_id)


@router.get(
    "/Library/{library_id}",
    summary="A Library the service holds, as written (an artifact: never evaluated)",
)
def read_library(library_id: str, request: Request) -> JSONResponse:
    return _read_held(request, "Library", library_id)


async def _operation(
    request: Request,
    answer: Callable[[Running, Any, str, Fetch], dict[str, Any] | ServedApply],
) -> JSONResponse:
    """An ``$apply`` call: the client JWT a hook call asks for, the JSON body, then ``answer``
    (in a worker thread: a served plan runs a hook's decision) as FHIR JSON, or the
    OperationOutcome of its refusal. ``answer`` reads the call's ``dataEndpoint`` through the
    fetch it is given, on this event loop, once it knows the call applies a definition that
    reads it (``app.plandefinition.endpoint``)."""
    parts = running(request.app)
    audience, run_base = called_url(request)
    await parts.authenticator.verify(request.headers.get("authorization"), audience)
    body = await read_json_body(request)
    base = _base(request)

    def fetch(given: Mapping[str, Any], refs: Sequence[str]) -> dict[str, dict[str, Any]]:
        return from_thread.run(
            partial(
                read_endpoint,
                given,
                refs,
                allowed=parts.hooks.deps.allowed_fhir_servers,
                http=parts.http,
                readers=parts.hooks.deps.fhir_readers,
            )
        )

    try:
        # in a pool of its own: an authored plan's conditions are decided by hook runs on this
        # event loop that the thread waits for, and their own thread steps use the shared pool
        result = await to_thread.run_sync(
            partial(answer, parts, body, base, fetch), limiter=parts.apply_threads
        )
        if isinstance(result, ServedApply):
            # on this event loop, as a hook call runs: its own thread hops never wait on ours
            response = await parts.hooks.applied(
                result.service_id, result.request, base_url=run_base
            )
            undecided = await run_in_threadpool(stored_undecided, parts.engine, response)
            result = result.answer(response, undecided)
    except ApplyRefused as exc:
        return _refused(exc)
    except CdsError as exc:  # the hook run a served service's $apply made: said as FHIR says it
        return JSONResponse(
            exc.outcome(), status_code=exc.status, headers=exc.headers(), media_type=FHIR_JSON
        )
    return JSONResponse(result, media_type=FHIR_JSON)


async def _apply(
    plan_id: str | None, request: Request, deployments: DeploymentsDep, *, r5: bool = False
) -> JSONResponse:
    _audience, run_base = called_url(request)
    hooks = running(request.app).hooks

    def answer(
        service_id: str, body: dict[str, Any], on: Deployments
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        return hooks.applied(service_id, body, base_url=run_base, deployments=on)

    return await _operation(
        request,
        lambda parts, body, base, fetch: apply_plan(
            deployments,
            parts.definitions,
            plan_id,
            body,
            base=base,
            runs=StoredPlanRuns(parts.engine, answer),
            packaged=parts.tool_host.packaged,
            r5=r5,
            fetch=fetch,
            allowed_fhir_servers=parts.hooks.deps.allowed_fhir_servers,
        ),
    )


@router.post(
    "/PlanDefinition/{plan_id}/$apply",
    summary="Apply a PlanDefinition (a served CDS service or one the service holds) to a "
    "subject: a Bundle with the RequestGroup first",
)
async def apply_by_id(plan_id: str, request: Request, deployments: DeploymentsDep) -> JSONResponse:
    return await _apply(plan_id, request, deployments)


@router.post(
    "/PlanDefinition/$apply",
    summary="Apply the PlanDefinition sent inline, or named by the url parameter",
)
async def apply_by_url(request: Request, deployments: DeploymentsDep) -> JSONResponse:
    return await _apply(None, request, deployments)


@router.post(
    "/PlanDefinition/{plan_id}/$r5.apply",
    summary="Apply a PlanDefinition with the R5/CPG 2.0 semantics: always a Bundle with the "
    "RequestGroup first ($apply answers the same, or a CarePlan on request)",
)
async def r5_apply_by_id(
    plan_id: str, request: Request, deployments: DeploymentsDep
) -> JSONResponse:
    return await _apply(plan_id, request, deployments, r5=True)


@router.post(
    "/PlanDefinition/$r5.apply",
    summary="$r5.apply on the PlanDefinition sent inline, or named by the url parameter",
)
async def r5_apply_by_url(request: Request, deployments: DeploymentsDep) -> JSONResponse:
    return await _apply(None, request, deployments, r5=True)


async def _apply_activity(definition_id: str | None, request: Request) -> JSONResponse:
    return await _operation(
        request,
        lambda parts, body, _base, fetch: apply_activity_definition(
            parts.definitions, definition_id, body, fetch
        ),
    )


@router.post(
    "/ActivityDefinition/$apply",
    summary="Apply an ActivityDefinition (inline, or held by url) to a subject: the request "
    "resource it defines",
)
async def apply_activity_by_url(request: Request) -> JSONResponse:
    return await _apply_activity(None, request)


@router.post(
    "/ActivityDefinition/{definition_id}/$apply",
    summary="Apply an ActivityDefinition the service holds to a subject",
)
async def apply_activity_by_id(definition_id: str, request: Request) -> JSONResponse:
    return await _apply_activity(definition_id, request)


@router.put(
    "/{resource_type}/{ident}",
    summary="Write an ActivityDefinition, PlanDefinition, Questionnaire or Library: checked as "
    "it would be applied (a Library is held, never evaluated), stored as the next version of "
    "its id",
    responses={
        200: {"description": "A new version of a definition already stored"},
        201: {"description": "The first version of the definition"},
        400: {"description": "Not a valid R4 definition, or the body disagrees with the path"},
        403: {"description": f"Issuers are configured and the JWT lacks {WRITE_SCOPE}"},
        409: {
            "description": "The service's definition files define this id or url, a served "
            "service has this id, or other writes of the id keep taking the next version"
        },
        422: {"description": "A definition this host could not apply; the body says why"},
    },
)
async def write(resource_type: str, ident: str, request: Request) -> JSONResponse:
    parts = running(request.app)
    audience, _base_url = called_url(request)
    caller = await parts.authenticator.verify(request.headers.get("authorization"), audience)
    try:
        author = author_of(caller.claims if caller is not None else None)
    except ApplyRefused as exc:
        return _refused(exc)
    body = await read_json_body(request)
    try:
        stored, created = await run_in_threadpool(
            write_definition,
            resource_type,
            ident,
            body,
            files=parts.definition_files,
            engine=parts.engine,
            packaged=parts.tool_host.packaged,
            author=author,
            # a written plan's own activated deployment does not stand in its way
            served=frozenset(
                s.id
                for s, d in parts.catalog.current().services()
                if d.id != f"plandefinition-{ident}"
            ),
        )
    except ApplyRefused as exc:
        return _refused(exc)
    version = stored["meta"]["versionId"]
    return JSONResponse(
        stored,
        status_code=201 if created else 200,
        media_type=FHIR_JSON,
        headers={
            "Location": f"{_base(request)}/fhir/{resource_type}/{ident}/_history/{version}",
            "ETag": f'W/"{version}"',
        },
    )

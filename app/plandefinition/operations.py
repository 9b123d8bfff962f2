"""Which definition a ``$apply`` call applies, and how.

``PlanDefinition/$apply``: a plan sent inline (``planDefinition``) or held among the service's
definitions (by id, or by the ``url`` parameter) is expanded (``app.plandefinition.authored``);
a served CDS service (by its id, or by its ``{base}/fhir/PlanDefinition/{id}`` url) is run as a
hook call (``app.plandefinition.apply``). ``ActivityDefinition/$apply``: the definition sent
inline, or held by id or url (``app.plandefinition.activity``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.deployments import Deployments
from app.plandefinition.activity import Call, apply_activity, checked
from app.plandefinition.apply import ServedApply, apply
from app.plandefinition.authored import Decider, expand
from app.plandefinition.careplan import care_plan, wants_care_plan
from app.plandefinition.conditions import PlanRuns, decide
from app.plandefinition.endpoint import Fetch
from app.plandefinition.library import DefinitionSource
from app.plandefinition.refusals import ApplyRefused, parameters
from app.tools.packaged import PackagedTools


def _served(deployments: Deployments, service_id: str) -> bool:
    return any(s.id == service_id for s, _d in deployments.services())


def _held(
    definitions: DefinitionSource, resource_type: str, ident: str | None, url: Any
) -> Mapping[str, Any] | None:
    if ident is not None:
        return definitions.by_id(resource_type, ident)
    if isinstance(url, str):
        held = definitions.canonical(url)
        if held is not None and held["resourceType"] == resource_type:
            return held
    return None


def _decider(call: Call, runs: PlanRuns, packaged: PackagedTools) -> Decider:
    """Decides each plan's conditions for the call's subject, on its data, in a recorded run."""
    subject = call.refs["subject"] or ""
    encounter = call.refs.get("encounter")
    return lambda plan, where: decide(
        plan,
        subject=subject,
        patient=call.found.get(subject),
        practitioner=call.refs.get("practitioner"),
        runs=runs,
        packaged=packaged,
        where=where,
        encounter=encounter,
        found=call.found,
        values=call.parameters,
    )


def _expand(
    plan: Mapping[str, Any],
    definitions: DefinitionSource,
    given: Mapping[str, Any],
    runs: PlanRuns,
    packaged: PackagedTools,
    fetch: Fetch | None,
) -> dict[str, Any]:
    call = Call.of(given, fetch=fetch)
    return expand(plan, definitions, call, _decider(call, runs, packaged))


def apply_plan(
    deployments: Deployments,
    definitions: DefinitionSource,
    plan_id: str | None,
    body: Any,
    *,
    base: str,
    runs: PlanRuns,
    packaged: PackagedTools,
    r5: bool = False,
    fetch: Fetch | None = None,
    allowed_fhir_servers: Sequence[str] = (),
) -> dict[str, Any] | ServedApply:
    """The ``$apply`` answer: the Bundle, or with ``returnCarePlan`` the CarePlan holding it
    (``r5``: ``$r5.apply``, whose answer is the Bundle, always); ``fetch`` reads the call's
    resources from its ``dataEndpoint`` once the plan applied is an authored one; ``runs``
    makes and records the run deciding an authored plan's conditions. A served service's is a
    :class:`ServedApply`, for the operation to run through the hook service."""
    given = parameters(body)
    wrapped = wants_care_plan(given)
    if wrapped and r5:
        raise ApplyRefused(
            400,
            "not-supported",
            "$r5.apply answers a Bundle: ask $apply for the CarePlan",
            "returnCarePlan",
        )
    bundle = _apply_plan(
        deployments,
        definitions,
        plan_id,
        given,
        body,
        base,
        runs,
        packaged,
        fetch,
        allowed_fhir_servers,
    )
    if isinstance(bundle, ServedApply):
        return replace(bundle, care_plan=wrapped)
    return care_plan(bundle) if wrapped else bundle


def _apply_plan(
    deployments: Deployments,
    definitions: DefinitionSource,
    plan_id: str | None,
    given: Mapping[str, Any],
    body: Any,
    base: str,
    runs: PlanRuns,
    packaged: PackagedTools,
    fetch: Fetch | None,
    allowed: Sequence[str],
) -> dict[str, Any] | ServedApply:
    inline = given.get("planDefinition")
    if inline is not None:
        if plan_id is not None:
            raise ApplyRefused(
                400,
                "invalid",
                "planDefinition is not allowed when the operation names a PlanDefinition",
                "planDefinition",
            )
        plan = checked(inline, "PlanDefinition", "planDefinition")
        return _expand(plan, definitions, given, runs, packaged, fetch)
    url = given.get("url")
    served_prefix = f"{base}/fhir/PlanDefinition/"
    if plan_id is None and isinstance(url, str) and url.startswith(served_prefix):
        # the fullUrl the search gives: a plan the service holds, else a served service
        plan_id = url.removeprefix(served_prefix).split("|", 1)[0]
        held = definitions.by_id("PlanDefinition", plan_id)
        if held is None:
            return apply(deployments, None, body, base=base, allowed_fhir_servers=allowed)
    else:
        held = _held(definitions, "PlanDefinition", plan_id, url)
    if held is None and plan_id is not None and _served(deployments, plan_id):
        # a Turtle service; a plan the service holds (and may serve) applies as authored
        return apply(deployments, plan_id, body, base=base, allowed_fhir_servers=allowed)
    if held is None:
        named = f"id {plan_id!r}" if plan_id is not None else f"url {url!r}"
        raise ApplyRefused(
            404,
            "not-found",
            f"no PlanDefinition with {named}: neither a served CDS service nor one of the "
            "service's definitions",
            "id" if plan_id is not None else "url",
        )
    return _expand(held, definitions, given, runs, packaged, fetch)


def apply_activity_definition(
    definitions: DefinitionSource,
    definition_id: str | None,
    body: Any,
    fetch: Fetch | None = None,
) -> dict[str, Any]:
    given = parameters(body)
    if definition_id is None and given.get("activityDefinition") is not None:
        return apply_activity(body, fetch=fetch)
    held = _held(definitions, "ActivityDefinition", definition_id, given.get("url"))
    if held is None:
        if definition_id is None and given.get("url") is None:
            return apply_activity(body)  # names neither: the inline parameter's refusal
        named = f"id {definition_id!r}" if definition_id is not None else f"url {given['url']!r}"
        raise ApplyRefused(
            404,
            "not-found",
            f"no ActivityDefinition with {named} among the service's definitions",
            "id" if definition_id is not None else "url",
        )
    return apply_activity(body, stored=held, fetch=fetch)


__all__ = ["apply_activity_definition", "apply_plan"]

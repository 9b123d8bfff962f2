"""PlanDefinitions in the definition files served as CDS services: CDS-on-FHIR through the same
model, not a second engine.

A PlanDefinition read from ``HORISMOS_DEFINITION_PATHS`` whose actions carry a ``named-event``
trigger is, like a Turtle file in ``HORISMOS_ONTOLOGY_PATHS``, part of the release the service
starts with: it is compiled into a deployment (``app.plandefinition.conditions.compile_plan``)
and served at ``/cds-services/{its id}`` on that hook, through the hook call's own path — the
run store, the proof, the trace, replay and change control's view of deployments apply to it.

Its cards offer the override reasons ``ontologies/templates/plan-service.ttl.template`` declares
(data, with its source), and link to the plan's documentation (its ``relatedArtifact`` of type
documentation) as their source. Its cards, one per top-level action, in order:

- ``summary`` the action's title (or description, cut to a card summary's length),
  ``detail`` its description, ``indicator``
  from its priority (routine → info, urgent and asap → warning, stat → critical; none: info);
- an action with applicability conditions shows only when the rules decide they hold;
- a run that cannot decide every condition ends at ``Undecided``: a warning card says the plan
  could not be checked (the decision record behind it names what was missing), beside the
  cards of the actions without conditions and of those decided to apply.

A plan that cannot be served — logic in CQL, a trigger naming no CDS Hooks hook, conditions
that do not compile — is a refused deployment, named by ``/readyz`` and
``horismos deployments`` like a Turtle deployment that does not verify; the others serve.
A card's suggestions are its action's requests and child actions
(``app.plandefinition.suggestions``), built for the patient when the card is; those the
clinician may not leave out (``requiredBehavior`` must) are the response's ``systemActions``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from app.deployments import Deployment, Deployments, load_deployments
from app.ontology.card_text import SUMMARY_MAX_LENGTH, absolute_http, inert
from app.ontology.errors import Problem
from app.ontology.hooks import HOOKS
from app.plandefinition.authored import check_plan
from app.plandefinition.conditions import (
    Served,
    compile_plan,
    plan_file,
    refuse_timing,
    turtle_literal,
)
from app.plandefinition.export import PRIORITY
from app.plandefinition.library import Definitions, DefinitionSource
from app.plandefinition.refusals import ApplyRefused
from app.plandefinition.suggestions import card_suggestions, plan_prefetch
from app.resources import resource_dir
from app.tools.packaged import PackagedTools

#: What every served plan offers beside its cards (override reasons), as data.
EXTRA = resource_dir("ontologies") / "templates" / "plan-service.ttl.template"
#: An action's priority as a card's indicator: the export's mapping read backwards, and asap
#: (between urgent and stat) a warning
INDICATOR = {priority: indicator for indicator, priority in PRIORITY.items()} | {"asap": "warning"}


def _triggers(actions: Any) -> list[str]:
    found = []
    for action in actions or ():
        for trigger in action.get("trigger") or ():
            if trigger.get("type") == "named-event" and isinstance(trigger.get("name"), str):
                found.append(str(trigger["name"]))
        found.extend(_triggers(action.get("action")))
    return found


def trigger_hook(plan: Mapping[str, Any]) -> str | None:
    """The hook the ``named-event`` triggers of the plan's actions (at any depth) name, if
    any; a plan whose triggers name two hooks is refused (it would be two services)."""
    hooks = sorted(set(_triggers(plan.get("action"))))
    if len(hooks) > 1:
        raise ApplyRefused(
            422,
            "not-supported",
            f"its triggers name several hooks ({', '.join(hooks)}): one plan is one service",
            "PlanDefinition.action.trigger",
        )
    return hooks[0] if hooks else None


def served_iri(plan: Mapping[str, Any]) -> str:
    """The compiled deployment's IRI: the plan's id under this service's namespace (never its
    url, which another deployment or another version of the plan may share), so the
    deployment is ``plandefinition-{id}``."""
    return f"https://horismos.dev/plandefinition-{plan['id']}"


def _not_checked(title: str) -> str:
    suffix = ": not checked"
    return inert(title, SUMMARY_MAX_LENGTH - len(suffix)) + suffix


@cache
def _extra() -> str:
    return EXTRA.read_text(encoding="utf-8")


def served_as(plan: Mapping[str, Any], hook: str, definitions: DefinitionSource) -> Served:
    """The CDS service ``plan`` is: its id, its hook, its prefetch, one card per top-level
    action with its suggestions (``app.plandefinition.suggestions``)."""
    title = str(plan.get("title") or plan.get("name") or plan["id"])
    offered, reads = card_suggestions(plan, definitions)
    cards = []
    actions = []
    for i, (action, suggestions) in enumerate(zip(plan.get("action") or (), offered, strict=True)):
        for description, activity, child in suggestions.system:
            # sent when its card shows: its action applies (and, a child, it applies too)
            whens = [f"applies_{i}"] if action.get("condition") else []
            whens += [f"applies_{child}"] if child is not None else []
            actions.append(
                "[ "
                + " ;\n                 ".join(
                    [
                        'horis:actionType "create"',
                        f"horis:description {turtle_literal(description)}",
                        f"horis:activity {turtle_literal(activity)}",
                        *(f"horis:when [ horis:property :{w} ; horis:is true ]" for w in whens),
                    ]
                )
                + " ]"
            )
        summary = inert(
            action.get("title") or action.get("description") or title, SUMMARY_MAX_LENGTH
        )
        parts = [
            f"horis:indicator {turtle_literal(INDICATOR.get(str(action.get('priority')), 'info'))}",
            f"horis:summary {turtle_literal(summary)}",
        ]
        if action.get("description"):
            parts.append(f"horis:detail {turtle_literal(inert(action['description']))}")
        if action.get("condition"):
            parts.append(f"horis:when [ horis:property :applies_{i} ; horis:is true ]")
        parts.extend(
            f"horis:link [ horis:label {turtle_literal(label)} ; horis:url {turtle_literal(url)} ]"
            for label, url in _documentation_links(action)
        )
        parts.extend(f"horis:suggest {node}" for node in suggestions.nodes)
        if suggestions.selection is not None:
            parts.append(f"horis:selectionBehavior {turtle_literal(suggestions.selection)}")
        # the same card whether or not every other action could be decided: an action
        # decided to apply (or without conditions) shows beside the not-checked card
        for terminal in (":Decided", ":Undecided"):
            body = " ;\n                 ".join([f"horis:terminal {terminal}", *parts])
            cards.append(f"[ {body} ]")
    cards.append(
        '[ horis:terminal :Undecided ; horis:indicator "warning" ;\n'
        f"                 horis:summary {turtle_literal(_not_checked(title))} ;\n"
        "                 horis:detail \"The record lacks what the plan's conditions read: the "
        'decision record behind this card names it." ]'
    )
    pages = _documentation_links(plan, "relatedArtifact")
    return Served(
        iri=served_iri(plan),
        documentation=pages[0][1] if pages else None,
        extra=_extra(),
        service_id=str(plan["id"]),
        hook=hook,
        title=inert(title),
        description=inert(plan.get("description") or title),
        cards=tuple(cards),
        system_actions=tuple(actions),
        prefetch=plan_prefetch(plan, hook, reads),
    )


def _documentation_links(
    element: Mapping[str, Any], key: str = "documentation"
) -> list[tuple[str, str]]:
    """``element``'s related artifacts of type documentation that name a web page, as (label,
    url): labelled by their ``label``, ``display`` or ``citation``, else the page's address. An
    artifact naming no http(s) page (a document attached, a canonical) is not a card link."""
    out = []
    for artifact in element.get(key) or ():
        if not isinstance(artifact, Mapping) or artifact.get("type") != "documentation":
            continue
        url = artifact.get("url")
        if not isinstance(url, str):
            continue
        if not re.fullmatch(r"https?://[^\s<>\"{}|\\^`]+", url) or not absolute_http(url):
            continue
        label = next(
            (
                str(artifact[k])
                for k in ("label", "display", "citation")
                if str(artifact.get(k) or "").strip()
            ),
            url,
        )
        out.append((inert(label, SUMMARY_MAX_LENGTH), url))
    return out


def refused(ident: str, version: str, message: str) -> Deployment:
    """The plan ``ident`` as a deployment that does not serve, with why; it claims no service
    id, so it can never stand in the way of a service that does serve."""
    iri = served_iri({"id": ident})
    return Deployment(
        id=f"plandefinition-{ident}",
        iri=iri,
        version=version,
        digest=None,
        status="refused",
        files=(),
        problems=(Problem(code="service", node=iri, message=message),),
    )


def _service(
    plan: Mapping[str, Any], definitions: Definitions, packaged: PackagedTools
) -> Deployment | None:
    """The deployment serving ``plan``, None when no trigger names a hook, or the refusal
    saying why it cannot be served."""
    hook = trigger_hook(plan)
    if hook is None:
        return None
    if hook not in HOOKS:
        raise ApplyRefused(
            422,
            "not-supported",
            f"its trigger names {hook!r}, not a CDS Hooks hook",
            "PlanDefinition.action.trigger",
        )
    deployment: Deployment
    [deployment] = list(
        load_deployments([plan_file(compiled_service(plan, hook, definitions))], packaged)
    )
    return deployment


def compiled_service(plan: Mapping[str, Any], hook: str, definitions: DefinitionSource) -> str:
    """The Turtle deployment serving ``plan`` as a CDS service on ``hook``, or the refusal
    saying why a card cannot carry it: a start or stop condition first, then what ``$apply``
    itself refuses, then the cards' own checks."""
    refuse_timing(plan.get("action"))
    check_plan(plan)
    text, _service_id = compile_plan(plan, "PlanDefinition", served_as(plan, hook, definitions))
    return text


def plan_services(definitions: Definitions, packaged: PackagedTools) -> list[Deployment]:
    """A deployment for each plan of ``definitions`` with a named-event trigger: serving, or
    refused with why."""
    out: list[Deployment] = []
    for plan in definitions.of_type("PlanDefinition"):
        try:
            deployment = _service(plan, definitions, packaged)
        except ApplyRefused as exc:
            deployment = refused(str(plan["id"]), str(plan.get("version") or "unknown"), str(exc))
        if deployment is not None:
            out.append(deployment)
    return out


def beside(turtle: Deployments, plans: list[Deployment]) -> Deployments:
    """The Turtle deployments and the plans' together: a plan whose service id a Turtle
    deployment already serves, or that another plan serves, is refused rather than either
    replacing the other."""
    taken = {service: d.id for d in turtle for service in d.services}
    kept: list[Deployment] = []
    for deployment in plans:
        clash = [s for s in deployment.services if s in taken]
        if clash:
            ident = deployment.id.removeprefix("plandefinition-")
            message = f"the service id {clash[0]} is served by {taken[clash[0]]}"
            kept.append(refused(ident, deployment.version, message))
            continue
        taken.update({s: deployment.id for s in deployment.services})
        kept.append(deployment)
    return Deployments([*turtle, *kept])


__all__ = [
    "INDICATOR",
    "beside",
    "plan_services",
    "refused",
    "served_as",
    "served_iri",
    "trigger_hook",
]

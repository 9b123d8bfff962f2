"""Every served CDS service readable as a FHIR R4 PlanDefinition, so that other engines and
authoring tools (the HL7 CPG-on-FHIR guide's, HAPI's clinical-reasoning module) can list what
Horismos serves in the shape they author guidelines in.

The mapping, from a ``horis:CdsService``:

- the PlanDefinition: ``id`` and ``name`` from the service id, ``url`` under the service's
  ``/fhir`` base, ``version`` the deployment's ``owl:versionInfo``, ``identifier`` the
  deployment's IRI and digest, ``type`` ``eca-rule``, ``status`` ``active``, ``title``,
  ``description``, the documentation page as a ``documentation`` related artifact;
- one top-level action, triggered by the hook (``trigger`` ``named-event`` with the hook's name),
  whose ``input`` are the prefetch templates (a DataRequirement per template, its type the
  resource type searched, the query in the ``cqf-fhirQueryPattern`` extension);
- under it, one action per card declaration: ``title`` the summary (placeholders shown as
  "…"; the template itself as a ``dynamicValue`` on ``title``, language
  ``text/x-horismos-template``), ``description`` the detail likewise, ``priority`` from the
  indicator (info → routine, warning → urgent, critical → stat), an ``applicability`` condition
  describing when the card is shown (the terminal step and the conditions, in the deployment's
  labels; language ``text/x-horismos-rule``: Horismos rules, not CQL or FHIRPath, decide it), the
  suggestions as child actions (``create``, ``update``, ``remove``), ``selectionBehavior`` as
  declared, the pages the card links to (``horis:link``) as ``documentation`` related artifacts.

A ``horis:CombinedService`` is a PlanDefinition whose actions are the services it combines
(``definitionCanonical`` naming each one's PlanDefinition), in order of importance.
"""

from __future__ import annotations

import re
from typing import Any

from app.deployments import Deployment, Deployments
from app.ontology.activity import parse_activity
from app.ontology.model import CardDecl, CdsServiceDef, Ontology, humanise, local_name
from app.ontology.rules import Condition
from app.ontology.services import CombinedServiceDef, SuggestionDecl

PRIORITY = {"info": "routine", "warning": "urgent", "critical": "stat"}
ACTION_TYPE = {"create": "create", "update": "update", "delete": "remove"}
ACTION_TYPES = "http://terminology.hl7.org/CodeSystem/action-type"
PLAN_TYPES = "http://terminology.hl7.org/CodeSystem/plan-definition-type"
QUERY_PATTERN = "http://hl7.org/fhir/StructureDefinition/cqf-fhirQueryPattern"
TEMPLATE_LANGUAGE = "text/x-horismos-template"
RULE_LANGUAGE = "text/x-horismos-rule"
_PLACEHOLDER = re.compile(r"\{\{[#/]?[^}]*\}\}")
_OPS = {
    "is": "is",
    "isNot": "is not",
    "isA": "is a",
    "greaterThan": "is above",
    "atLeast": "is at least",
    "lessThan": "is below",
    "atMost": "is at most",
    "in": "is one of",
    "notIn": "is none of",
    "isAssigned": "is known",
    "inValueSet": "is in the value set",
}


def _name(service_id: str) -> str:
    """A computable name (``opioidcds-08`` → ``Opioidcds08``)."""
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", service_id) if p)


def _label(o: Ontology, iri: str) -> str:
    try:
        step = o.step(iri)
    except KeyError:
        step = None
    if step is not None and getattr(step, "label", None):
        return str(step.label)
    for table in (o.properties, o.classes, o.individuals):
        found = table.get(iri)
        label = getattr(found, "label", None) if found is not None else None
        if label:
            return str(label)
    return humanise(local_name(iri)).lower() if iri.startswith(("http", "urn")) else iri


def _static(template: str) -> str:
    """A card template as static text: every placeholder and section marker shown as "…"."""
    text = _PLACEHOLDER.sub("…", template)
    text = re.sub(r"(…\s*)+", "… ", text)
    return re.sub(r"… ([.,:;])", r"…\1", text).strip()


def _condition(o: Ontology, c: Condition) -> str:
    subject = " of ".join(_label(o, p) for p in reversed(c.path))
    if c.op == "isAssigned":
        return f"{subject} {'is known' if c.value else 'is not known'}"
    values = c.value if isinstance(c.value, tuple) else (c.value,)
    shown = ", ".join(_label(o, str(v)) if isinstance(v, str) else str(v) for v in values)
    return f"{subject} {_OPS.get(c.op, c.op)} {shown}"


def _when(o: Ontology, card: CardDecl) -> str:
    parts = []
    if card.terminal is not None:
        parts.append(f"the workflow ends at {_label(o, card.terminal)}")
    parts.extend(_condition(o, c) for c in card.when)
    if card.for_each:
        each = " / ".join(_label(o, p) for path in card.for_each for p in path)
        parts.append(f"one card for each {each}")
    return "; ".join(parts) or "always"


def _card_action(o: Ontology, card: CardDecl) -> dict[str, Any]:
    action: dict[str, Any] = {
        "title": _static(card.summary),
        "priority": PRIORITY[card.indicator],
        "condition": [
            {
                "kind": "applicability",
                "expression": {
                    "language": RULE_LANGUAGE,
                    "description": _when(o, card),
                },
            }
        ],
        "dynamicValue": [
            {
                "path": "title",
                "expression": {"language": TEMPLATE_LANGUAGE, "expression": card.summary},
            }
        ],
    }
    if card.detail is not None:
        action["description"] = _static(card.detail)
        action["dynamicValue"].append(
            {
                "path": "description",
                "expression": {"language": TEMPLATE_LANGUAGE, "expression": card.detail},
            }
        )
    if card.links:
        action["documentation"] = [
            {"type": "documentation", "display": label, "url": url} for label, url in card.links
        ]
    if card.suggestions:
        action["selectionBehavior"] = card.selection_behavior or "at-most-one"
        action["action"] = [_suggestion(s) for s in card.suggestions]
    return action


def _suggestion(s: SuggestionDecl) -> dict[str, Any]:
    """A card's suggestion as a child action: its type (none for one without action), and the
    ActivityDefinition it applies named by its url, where it has one."""
    out: dict[str, Any] = {"title": _static(s.label)}
    if s.description:
        out["description"] = s.description
    if s.action_type in ACTION_TYPE:
        out["type"] = {"coding": [{"system": ACTION_TYPES, "code": ACTION_TYPE[s.action_type]}]}
    urls = []
    for text in s.activities:
        definition = parse_activity(text).definition
        if isinstance(definition.get("url"), str):
            version = definition.get("version")
            urls.append(definition["url"] + (f"|{version}" if version else ""))
    if len(urls) == 1 and len(s.activities) == 1:
        out["definitionCanonical"] = urls[0]
    return out


def _input(query: str) -> dict[str, Any]:
    kind = re.split(r"[/?]", query, maxsplit=1)[0]
    return {"type": kind, "extension": [{"url": QUERY_PATTERN, "valueString": query}]}


def _header(
    sid: str, title: str, description: str, documentation: str | None, d: Deployment, base: str
) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "resourceType": "PlanDefinition",
        "id": sid,
        "url": f"{base}/fhir/PlanDefinition/{sid}",
        "identifier": [{"system": "urn:ietf:rfc:3986", "value": d.iri}],
        "version": d.version,
        "name": _name(sid),
        "title": title,
        "type": {"coding": [{"system": PLAN_TYPES, "code": "eca-rule", "display": "ECA Rule"}]},
        "status": "active",
        "description": description,
    }
    if documentation:
        plan["relatedArtifact"] = [{"type": "documentation", "url": documentation}]
    return plan


def service_plan(s: CdsServiceDef, d: Deployment, base: str) -> dict[str, Any]:
    """The PlanDefinition of one service."""
    o = d.ontology
    assert o is not None  # a served deployment is compiled
    plan = _header(s.id, s.title or s.id, s.description, s.documentation, d, base)
    top: dict[str, Any] = {
        "title": s.title or s.id,
        "trigger": [{"type": "named-event", "name": s.hook}],
    }
    if s.prefetch:
        top["input"] = [_input(t.query) for t in s.prefetch]
    cards = [_card_action(o, c) for c in sorted(s.cards, key=lambda c: c.order)]
    if cards:
        top["selectionBehavior"] = "any"
        top["action"] = cards
    plan["action"] = [top]
    return plan


def combined_plan(c: CombinedServiceDef, d: Deployment, base: str) -> dict[str, Any]:
    """The PlanDefinition of a combined service: its services' PlanDefinitions, in order."""
    plan = _header(c.id, c.title, c.description, c.documentation, d, base)
    plan["action"] = [
        {
            "title": c.title,
            "trigger": [{"type": "named-event", "name": c.hook}],
            "selectionBehavior": "any",
            "action": [
                {"definitionCanonical": f"{base}/fhir/PlanDefinition/{member}"}
                for member in c.members
            ],
        }
    ]
    return plan


def plans(deployments: Deployments, base: str) -> dict[str, dict[str, Any]]:
    """Every served service's PlanDefinition, by service id."""
    out = {s.id: service_plan(s, d, base) for s, d in deployments.services()}
    out.update({c.id: combined_plan(c, d, base) for c, d in deployments.combined()})
    return dict(sorted(out.items()))


__all__ = ["PRIORITY", "combined_plan", "plans", "service_plan"]

"""``horis:activity`` on a suggestion: the request a card offers to create, declared as FHIR
declares requests — an R4 ActivityDefinition, applied for the call's patient when the card is
built — rather than as a resource written out in advance.

The literal is JSON::

    {"activityDefinition": {…an R4 ActivityDefinition…},
     "dynamicValue": [{"path": "…", "expression": {"language": "text/fhirpath", …}}, …],
     "context": {…the resource those further dynamic values read as their context…}}

``dynamicValue`` (optional) holds values set after the definition's own, as a PlanDefinition
action's are (``context`` then the PlanDefinition, and ``action``, optional, the action they
read as ``%action``). What is checked at load, here: the shape,
the definition's validity as R4, that every expression is FHIRPath (this host evaluates
FHIRPath and its own rules, not CQL), and what ``ActivityDefinition/$apply`` would refuse
whatever the patient (``app.ontology.request_kinds``: its kind, an element the request would be
built without). What the definition builds for a patient is checked when it is applied
(``app.plandefinition.declared``): a definition that cannot be built for a patient makes no
suggestion, and the card says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.fhir_validate import problems
from app.ontology.request_kinds import FHIRPATH, check_activity
from app.plandefinition.refusals import ApplyRefused


@dataclass(frozen=True)
class Activity:
    """A parsed ``horis:activity``."""

    definition: dict[str, Any]
    dynamic_values: tuple[dict[str, Any], ...] = ()
    context: dict[str, Any] | None = None
    #: the PlanDefinition action the further dynamic values belong to (their ``%action``)
    action: dict[str, Any] | None = None


class ActivityError(ValueError):
    """A ``horis:activity`` literal that is not the JSON it must be."""


def parse_activity(text: str) -> Activity:
    """The ``horis:activity`` literal ``text``; :class:`ActivityError` saying what is wrong."""
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise ActivityError(f"not JSON ({exc})") from None
    if not isinstance(given, dict):
        raise ActivityError("must be a JSON object")
    definition = given.get("activityDefinition")
    if not isinstance(definition, dict) or definition.get("resourceType") != "ActivityDefinition":
        raise ActivityError("activityDefinition must be an ActivityDefinition resource")
    values = given.get("dynamicValue") or []
    if not isinstance(values, list) or not all(isinstance(v, dict) for v in values):
        raise ActivityError("dynamicValue must be a list of dynamic values")
    context = given.get("context")
    if values and (not isinstance(context, dict) or "resourceType" not in context):
        raise ActivityError("dynamicValue needs context: the resource its expressions read")
    unknown = sorted(set(given) - {"activityDefinition", "dynamicValue", "context", "action"})
    if unknown:
        raise ActivityError(f"unknown member {unknown[0]!r}")
    action = given.get("action")
    if action is not None and not isinstance(action, dict):
        raise ActivityError("action must be a JSON object: the PlanDefinition action")
    return Activity(
        definition=definition, dynamic_values=tuple(values), context=context, action=action
    )


def activity_problems(text: str) -> list[str]:
    """What is wrong with the ``horis:activity`` literal ``text`` (nothing: ``[]``)."""
    try:
        activity = parse_activity(text)
    except ActivityError as exc:
        return [str(exc)]
    out = [f"ActivityDefinition{where}: {rule}" for where, rule in problems(activity.definition)]
    if activity.definition.get("library"):
        out.append(
            "the ActivityDefinition names a logic library (CQL), which this host does not run"
        )
    listed = [("dynamicValue", list(activity.dynamic_values))]
    if not out and not activity.definition.get("library"):
        # what ActivityDefinition/$apply would refuse whatever the patient: its logic, its
        # kind, an element the request would be built without, a doNotPerform it cannot say
        try:
            check_activity(activity.definition)
        except ApplyRefused as exc:
            out.append(str(exc))
    else:
        listed.insert(
            0, ("ActivityDefinition.dynamicValue", activity.definition.get("dynamicValue") or [])
        )
    for where, values in listed:
        for i, value in enumerate(values):
            expression = (value or {}).get("expression") or {}
            if expression.get("language") != FHIRPATH or not value.get("path"):
                out.append(
                    f"{where}[{i}] must have a path and a FHIRPath ({FHIRPATH}) expression, "
                    f"not {expression.get('language') or 'none'}"
                )
    return out


__all__ = ["Activity", "ActivityError", "activity_problems", "parse_activity"]

"""``$apply`` on an authored PlanDefinition: its action tree expanded for one subject into a
RequestGroup, as the CPG-on-FHIR guide's unit tests expect it in R4, keeping the actions whose
applicability conditions this host's rules decide to hold (``app.plandefinition.conditions``).

- the RequestGroup: ``status`` draft, ``intent`` proposal (option for a plan nested in
  another), ``subject``, ``encounter``, ``author`` (the practitioner), ``instantiatesCanonical``
  (the plan's ``url|version``), a ``resource-pertainsToGoal`` extension per goal and, for a
  plan with conditions, the decision (with its proof, or the inputs that kept it from
  deciding) and each action that could not be decided;
- each action kept with what R4's RequestGroup action carries (:data:`CARRIED`) and its
  ``start`` and ``stop`` conditions as written (when the system carrying the plan out starts
  or stops it: not decided by ``$apply``), its children the same way, and its
  ``definitionCanonical`` resolved among the service's definitions
  (``app.plandefinition.library``): an ActivityDefinition is applied
  (``app.plandefinition.activity``) and then the action's own ``dynamicValue``s set on the
  request it made, evaluated with the plan as their context; a PlanDefinition is applied in
  turn as a nested RequestGroup; a Questionnaire is referenced. The resource made is in the
  Bundle and the action's ``resource`` points at it;
- each ``goal`` a Goal (``lifecycleStatus`` proposed: the RequestGroup is a proposal) for the
  subject.

Refused rather than skipped: a condition the rules cannot decide (see the conditions module),
a plan or definition naming a logic ``library``, an expression not in FHIRPath, a
``definitionCanonical`` the service does not hold and an element of an action the RequestGroup
would lose (``participant``, whose shape differs, ``transform``, ``definitionUri``,
``subject[x]``, ``modifierExtension``).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.plandefinition.activity import (
    Call,
    instantiate,
    refuse_other_languages,
    set_dynamic_values,
    valid_result,
)
from app.plandefinition.apply import DECISION_EXTENSION
from app.plandefinition.conditions import (
    TIMING_KINDS,
    Decided,
    applicability,
    fhirpath_of,
    has_conditions,
    timing,
)
from app.plandefinition.export import ACTION_TYPES
from app.plandefinition.library import DefinitionSource, resolve
from app.plandefinition.refusals import ApplyRefused

UNDECIDED_ACTION = "https://horismos.dev/fhir/StructureDefinition/undecided-action"
PERTAINS_TO_GOAL = "http://hl7.org/fhir/StructureDefinition/resource-pertainsToGoal"
#: Elements of a plan's action a RequestGroup action carries as they are.
CARRIED = (
    "id",
    "prefix",
    "title",
    "description",
    "textEquivalent",
    "priority",
    "code",
    "documentation",
    "relatedAction",
    "timingDateTime",
    "timingAge",
    "timingPeriod",
    "timingDuration",
    "timingRange",
    "timingTiming",
    "type",
    "groupingBehavior",
    "selectionBehavior",
    "requiredBehavior",
    "precheckBehavior",
    "cardinalityBehavior",
)
#: Elements of an action read here rather than carried.
READ = (
    "action",
    # applicability decided by rules (app.plandefinition.conditions); start and stop carried
    "condition",
    "definitionCanonical",
    "dynamicValue",
    "goalId",
    "reason",
    "extension",
    # when the plan applies and what data its logic reads: $apply is the call, and a plan
    # without conditions reads nothing
    "trigger",
    "input",
    "output",
)
#: How deep plans may nest in one another.
MAX_NESTING = 8


#: Decides a plan's applicability conditions (``app.plandefinition.conditions.decide`` bound to
#: the call): the plan and the element naming it in refusals.
Decider = Callable[[Mapping[str, Any], str], Decided]


@dataclass
class _Applying:
    """One plan being applied: the plan (the context of its actions' dynamic values), how deep
    it is nested, which of its conditioned actions apply, and those that could not be decided
    (named as they are met)."""

    plan: Mapping[str, Any]
    nested: int
    decided: Decided
    undecided: list[str] = field(default_factory=list)


class _Expansion:
    def __init__(self, definitions: DefinitionSource, call: Call, decider: Decider) -> None:
        self.definitions = definitions
        self.call = call
        self.decider = decider
        self.made: list[dict[str, Any]] = []

    def plan(self, plan: Mapping[str, Any], *, nested: int, where: str) -> dict[str, Any]:
        if nested > MAX_NESTING:
            raise ApplyRefused(422, "too-costly", f"plans nest deeper than {MAX_NESTING}", where)
        check_plan(plan, where)  # what no subject could make applicable
        goals = [
            self._goal(goal, f"{where}.goal[{i}]") for i, goal in enumerate(plan.get("goal") or ())
        ]
        group: dict[str, Any] = {
            "resourceType": "RequestGroup",
            "id": str(uuid.uuid4()),
            "status": "draft",
            "intent": "option" if nested else "proposal",
            "subject": {"reference": self.call.refs["subject"]},
        }
        for name, element in (("encounter", "encounter"), ("practitioner", "author")):
            ref = self.call.reference(name)
            if ref:
                group[element] = ref
        url = plan.get("url")
        if isinstance(url, str):
            version = plan.get("version")
            group["instantiatesCanonical"] = [f"{url}|{version}" if version else url]
        extensions: list[dict[str, Any]] = [
            {"url": PERTAINS_TO_GOAL, "valueReference": {"reference": f"Goal/{g['id']}"}}
            for g in goals
        ]
        decided = Decided()
        if has_conditions(plan):
            decided = self.decider(plan, where)
            extensions.append(
                {
                    "url": DECISION_EXTENSION,
                    "valueString": json.dumps(decided.extension, default=str, sort_keys=True),
                }
            )
        applying = _Applying(plan=plan, nested=nested, decided=decided)
        actions = self._actions(applying, plan.get("action"), where=where, prefix="")
        _drop_relations_to_absent(actions)
        extensions.extend({"url": UNDECIDED_ACTION, "valueString": u} for u in applying.undecided)
        if extensions:
            group["extension"] = extensions
        if actions:
            group["action"] = actions
        return valid_result(group, where)

    def _goal(self, goal: Mapping[str, Any], where: str) -> dict[str, Any]:
        """A Goal for the subject from a plan's goal: R4 names two of its elements otherwise
        (``start`` → ``startCodeableConcept``, a target's ``due`` → ``dueDuration``); what it
        has no place for (``addresses``, ``documentation``) :func:`check_plan` refuses."""
        made: dict[str, Any] = {
            "resourceType": "Goal",
            "id": str(uuid.uuid4()),
            "lifecycleStatus": "proposed",
            "subject": {"reference": self.call.refs["subject"]},
        }
        for key in ("category", "priority", "description"):
            if key in goal:
                made[key] = copy.deepcopy(goal[key])
        if "start" in goal:
            made["startCodeableConcept"] = copy.deepcopy(goal["start"])
        targets = []
        for target in goal.get("target") or ():
            out = {k: copy.deepcopy(v) for k, v in target.items() if k != "due"}
            if "due" in target:
                out["dueDuration"] = copy.deepcopy(target["due"])
            targets.append(out)
        if targets:
            made["target"] = targets
        self.made.append(valid_result(made, where))
        return made

    def _actions(
        self, applying: _Applying, actions: Any, *, where: str, prefix: str
    ) -> list[dict[str, Any]]:
        """The RequestGroup actions for ``actions`` (the plan's, or an action's children) that
        are kept."""
        kept = []
        for i, action in enumerate(actions or ()):
            made = self.action(applying, action, where=f"{where}.action[{i}]", path=f"{prefix}{i}")
            if made is not None:
                kept.append(made)
        return kept

    def action(
        self, applying: _Applying, action: Mapping[str, Any], *, where: str, path: str
    ) -> dict[str, Any] | None:
        """The RequestGroup action for ``action``, or None when its conditions rule it out
        (or could not be decided: then the plan's ``undecided`` names it)."""
        if applicability(action):
            applies = applying.decided.applies.get(path)
            if applies is None:
                title = action.get("title") or action.get("description")
                applying.undecided.append(f"{where}: {title}")
                return None
            if applies is False:
                return None
        out: dict[str, Any] = {k: copy.deepcopy(action[k]) for k in CARRIED if k in action}
        carried = timing(action)
        if carried:  # when the action starts or stops is the executing system's to decide
            out["condition"] = copy.deepcopy(carried)
        canonical = action.get("definitionCanonical")
        if isinstance(canonical, str):
            out["resource"], defined = self._definition(applying, action, canonical, where)
            if "type" not in out and defined == "ActivityDefinition":
                # the action made a request: what it proposes is to create it
                out["type"] = {"coding": [{"system": ACTION_TYPES, "code": "create"}]}
        elif action.get("dynamicValue"):
            raise ApplyRefused(
                422,
                "not-supported",
                f"{where} has dynamic values but no definition to set them on",
                f"{where}.dynamicValue",
            )
        children = self._actions(applying, action.get("action"), where=where, prefix=f"{path}.")
        if children:
            out["action"] = children
        return out

    def _definition(
        self, applying: _Applying, action: Mapping[str, Any], canonical: str, where: str
    ) -> tuple[dict[str, str], str]:
        """The reference to what ``canonical`` made for the action, and the definition's type."""
        held = resolve(self.definitions, canonical, where)
        kind = held["resourceType"]
        if kind != "ActivityDefinition" and action.get("dynamicValue"):
            role = "referenced, not made" if kind == "Questionnaire" else "a nested RequestGroup"
            raise ApplyRefused(
                422,
                "not-supported",
                f"{where} sets dynamic values on a {kind} ({role}): not built",
                f"{where}.dynamicValue",
            )
        if kind == "Questionnaire":
            return {"reference": f"Questionnaire/{held.get('id')}"}, kind
        if kind == "PlanDefinition":
            made = self.plan(held, nested=applying.nested + 1, where=f"{where}.definitionCanonical")
        else:
            made = instantiate(held, self.call)
            values = action.get("dynamicValue")
            set_dynamic_values(made, applying.plan, values, self.call, where, action=action)
            made = valid_result(made, where)
        self.made.append(made)
        return {"reference": f"{made['resourceType']}/{made['id']}"}, kind


def _drop_relations_to_absent(actions: list[dict[str, Any]]) -> None:
    """Leave out each ``relatedAction`` naming an action the RequestGroup does not hold (its
    conditions ruled it out, or could not be decided): a relation to an action that will not be
    carried out binds nothing, and the RequestGroup names only its own actions."""

    def every(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [a for item in items for a in (item, *every(item.get("action") or []))]

    everyone = every(actions)
    held = {a["id"] for a in everyone if isinstance(a.get("id"), str)}
    for action in everyone:
        related = action.get("relatedAction")
        if related:
            kept = [r for r in related if r.get("actionId") in held]
            if kept:
                action["relatedAction"] = kept
            else:
                del action["relatedAction"]


def check_plan(plan: Mapping[str, Any], where: str = "PlanDefinition") -> None:
    """Refuse what this host could never apply in ``plan`` (a valid PlanDefinition), whatever
    the subject: a logic library, an action element it would drop, a dynamic value not in
    FHIRPath, a goal element a Goal has no place for. Its conditions are compiled and verified
    apart (``app.plandefinition.conditions``); a ``definitionCanonical`` is resolved when the
    plan is applied (the definition it names may be written later)."""
    if plan.get("library"):
        raise ApplyRefused(
            422,
            "not-supported",
            "the PlanDefinition names a logic library: this host evaluates FHIRPath and its own "
            "rules, not CQL",
            f"{where}.library",
        )
    for i, goal in enumerate(plan.get("goal") or ()):
        for key in ("addresses", "documentation"):
            if key in goal:
                raise ApplyRefused(
                    422,
                    "not-supported",
                    f"{where}.goal[{i}].{key} has no place in the Goal made for a subject",
                    f"{where}.goal[{i}].{key}",
                )

    def walk(actions: Any, at: str) -> None:
        for i, action in enumerate(actions or ()):
            here = f"{at}.action[{i}]"
            lost = [key for key in action if key not in CARRIED and key not in READ]
            if lost:
                raise ApplyRefused(
                    422,
                    "not-supported",
                    f"{here}.{lost[0]} is not carried into a RequestGroup here",
                    f"{here}.{lost[0]}",
                )
            refuse_other_languages(action.get("dynamicValue"), here)
            for j, condition in enumerate(action.get("condition") or ()):
                # a start or stop condition is carried as written; one with an expression in
                # another language than FHIRPath is refused (one without is carried)
                if condition.get("kind") in TIMING_KINDS and condition.get("expression"):
                    fhirpath_of(condition, f"{here}.condition[{j}]")
            walk(action.get("action"), here)

    walk(plan.get("action"), where)


def expand(
    plan: Mapping[str, Any], definitions: DefinitionSource, call: Call, decider: Decider
) -> dict[str, Any]:
    """The ``$apply`` Bundle for ``plan`` (a valid PlanDefinition): the RequestGroup first,
    then every resource it made; ``decider`` decides the conditions of each plan with any."""
    expansion = _Expansion(definitions, call, decider)
    group = expansion.plan(plan, nested=0, where="PlanDefinition")
    return {
        "resourceType": "Bundle",
        "id": str(uuid.uuid4()),
        "type": "collection",
        "entry": [{"resource": group}, *({"resource": r} for r in expansion.made)],
    }


__all__ = ["CARRIED", "check_plan", "expand"]

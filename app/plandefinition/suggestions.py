"""What a served plan's card offers: its top-level action's requests and child actions as the
card's suggestions, and what the plan reads as the service's prefetch.

A card is a top-level action (``app.plandefinition.services``). Its suggestions, in order:

- the action's own ``definitionCanonical``, when it names an ActivityDefinition: a suggestion
  labelled with the action's title that creates the request the definition defines for the
  call's patient, the action's own dynamic values set after the definition's (the plan their
  context), built when the card is (``horis:activity``: ``app.plandefinition.declared``);
- each child action: a suggestion labelled with its title (or ``textEquivalent``, or
  description) creating its ActivityDefinition's request, or without action when it names no
  definition (the clinician acknowledges it); a child with applicability conditions is offered
  only when the rules decide they hold (unknown: not offered, and the card says so).

An action the clinician may not leave out (``requiredBehavior`` must: the top-level action's
own definition, or a child's) is not a suggestion the clinician could decline: its request is
one of the service's ``systemActions`` (``app.cds.system_actions``), sent when its card shows
and, a child with conditions, when they hold.

The action's ``selectionBehavior`` becomes what CDS Hooks allows (``at-most-one`` or ``any``):
``any`` and ``one-or-more`` → ``any`` (a client cannot require one); ``at-most-one`` and
``exactly-one`` → ``at-most-one``; ``all`` and ``all-or-none`` → **one** suggestion holding every
request (CDS Hooks accepts a suggestion's actions as a unit), ``at-most-one``; none → ``any``.

Refused, naming the element (the plan is then not served): a child action with children of its
own (a suggestion holds no further choices), a definition that is not an ActivityDefinition (a
nested plan or a Questionnaire is not a request a card can create), one that is not held, one
``$apply`` would refuse, dynamic values without a definition, a child without any text to
label it, and conditions on the members of an ``all`` group (taken as a unit, no member can be
left out).

Prefetch: ``patient``, then ``practitioner`` (``Practitioner/{{userPractitionerId}}``) when
one reads ``%practitioner``, ``encounter`` when one reads ``%encounter`` and the hook names an
encounter,
then one template per ``input`` data requirement of the plan's actions: its type for the patient
with its code filters' codes (a filter by value set only, or by date, is not put in the query:
the EHR sends a superset, never less).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.ontology._fhir_model import is_resource_type
from app.ontology.card_text import inert
from app.ontology.hooks import HOOKS
from app.plandefinition.activity import CALL_RESOURCES, check_activity, variables
from app.plandefinition.condition_reads import ENCOUNTER_TEMPLATE, PRACTITIONER_TEMPLATE
from app.plandefinition.conditions import turtle_literal
from app.plandefinition.library import DefinitionSource, resolve
from app.plandefinition.refusals import ApplyRefused

#: A PlanDefinition action's selectionBehavior as a CDS Hooks card's; None: one suggestion
#: holding every request
SELECTION: dict[str, str | None] = {
    "any": "any",
    "one-or-more": "any",
    "at-most-one": "at-most-one",
    "exactly-one": "at-most-one",
    "all": None,
    "all-or-none": None,
}
#: codeFilter paths that are search parameters of the same name (others need searchParam)
_SEARCHABLE = frozenset({"code", "category", "status"})


@dataclass(frozen=True)
class CardSuggestions:
    """One card's suggestions as Turtle ``horis:suggest`` nodes, its selection behaviour, and
    the call resources their definitions read (``practitioner``, ``encounter``)."""

    nodes: tuple[str, ...] = ()
    selection: str | None = None
    reads: frozenset[str] = frozenset()
    #: the requests the system sends (``requiredBehavior`` must): (description, its
    #: ``horis:activity``, the ``applies`` property of the child it is, if a child with
    #: conditions)
    system: tuple[tuple[str, str, str | None], ...] = ()


def _refused(message: str, element: str) -> ApplyRefused:
    return ApplyRefused(422, "not-supported", message, element)


def _label(action: Mapping[str, Any]) -> str | None:
    for key in ("title", "textEquivalent", "description"):
        if isinstance(action.get(key), str) and action[key].strip():
            return inert(action[key])
    return None


@dataclass
class _Builder:
    plan: Mapping[str, Any]
    definitions: DefinitionSource
    reads: set[str]

    def activity(self, action: Mapping[str, Any], where: str) -> str | None:
        """The ``horis:activity`` JSON of the action's definition, None without one."""
        canonical = action.get("definitionCanonical")
        if not isinstance(canonical, str):
            if action.get("dynamicValue"):
                raise _refused(
                    f"{where} has dynamic values but no definition to set them on",
                    f"{where}.dynamicValue",
                )
            return None
        held = resolve(self.definitions, canonical, where)
        if held.get("resourceType") != "ActivityDefinition":
            raise _refused(
                f"{where}.definitionCanonical names a {held.get('resourceType')}: a card's "
                "suggestion creates a request, which only an ActivityDefinition defines",
                f"{where}.definitionCanonical",
            )
        check_activity(held)
        own = list(action.get("dynamicValue") or ())
        for value in [*(held.get("dynamicValue") or ()), *own]:
            expression = str((value.get("expression") or {}).get("expression", ""))
            self.reads.update(n for n in variables(expression) if n in CALL_RESOURCES)
        literal: dict[str, Any] = {"activityDefinition": dict(held)}
        if own:
            # as $apply evaluates them: the whole plan their context, the action their %action
            literal.update(dynamicValue=own, context=dict(self.plan), action=dict(action))
        return json.dumps(literal, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def check_required(action: Mapping[str, Any], where: str, every: bool) -> None:
        """Children the clinician may not leave out (sent by the system) in a group whose
        selection says otherwise are refused: a required member of a pick-one group, or of an
        all-or-none group whose other members stay a choice (the unit would be split)."""
        behavior = action.get("selectionBehavior")
        if behavior in ("at-most-one", "exactly-one"):
            raise _refused(
                f"{where} selects its actions {behavior}, and an action of it is required "
                "(requiredBehavior must): sent without the clinician, it would be one picked "
                "beside the one the clinician picks",
                f"{where}.selectionBehavior",
            )
        if behavior in ("all", "all-or-none"):
            conditioned = any(c.get("condition") for c in action.get("action") or ())
            if not every or conditioned:
                raise _refused(
                    f"{where} selects its actions {behavior}, and an action of it is required "
                    "(requiredBehavior must): taken as a unit, the group is sent whole only "
                    "when every action of it is required and none has conditions",
                    f"{where}.selectionBehavior",
                )

    def card(self, action: Mapping[str, Any], index: int) -> CardSuggestions:
        where = f"PlanDefinition.action[{index}]"
        items: list[tuple[str, list[str], str | None]] = []  # label, activities, condition
        #: what the clinician may not leave out (requiredBehavior must): sent by the system
        system: list[tuple[str, str, str | None]] = []
        own = self.activity(action, where)
        if own is not None:
            label = _label(action) or f"Create the {json.loads(own)['activityDefinition']['kind']}"
            if action.get("requiredBehavior") == "must":
                system.append((label, own, None))
            else:
                items.append((label, [own], None))
        children = list(action.get("action") or ())
        required = 0  # children sent by the system
        for j, child in enumerate(children):
            at = f"{where}.action[{j}]"
            if child.get("action"):
                raise _refused(
                    f"{at} has actions of its own: a card's suggestion holds no further choices",
                    f"{at}.action",
                )
            named = _label(child)
            if named is None:
                raise _refused(
                    f"{at} has no title, textEquivalent or description to label its suggestion",
                    f"{at}.title",
                )
            made = self.activity(child, at)
            condition = f"{index}_{j}" if child.get("condition") else None
            if made is not None and child.get("requiredBehavior") == "must":
                system.append((named, made, condition))
                required += 1
            else:
                items.append((named, [made] if made else [], condition))
        behavior = action.get("selectionBehavior")
        if required:
            self.check_required(action, where, required == len(children))
        if not items:
            return CardSuggestions(system=tuple(system))
        selection = SELECTION.get(behavior, "any") if isinstance(behavior, str) else "any"
        if selection is None:  # all, all-or-none: every request taken as one
            if any(not activities for _label_, activities, _c in items):
                raise _refused(
                    f"{where} selects its actions {behavior}, and an action of it proposes no "
                    "request: taken as a unit, its text would be lost from the one suggestion",
                    f"{where}.selectionBehavior",
                )
            conditioned = [i for i, item in enumerate(items) if item[2] is not None]
            if conditioned:
                raise _refused(
                    f"{where} selects its actions {behavior}, and an action of it has "
                    "conditions: taken as a unit, none of them can be left out",
                    f"{where}.selectionBehavior",
                )
            whole = [a for _label_, activities, _c in items for a in activities]
            label = _label(action) or items[0][0]
            items = [(label, whole, None)]
            selection = "at-most-one"
        nodes = []
        for label, activities, condition in items:
            parts = [f"horis:label {turtle_literal(label)}"]
            parts.extend(f"horis:activity {turtle_literal(a)}" for a in activities)
            if not activities:
                parts.append('horis:actionType "none"')
            if condition is not None:
                parts.append(f"horis:when [ horis:property :applies_{condition} ; horis:is true ]")
            nodes.append("[ " + " ;\n                   ".join(parts) + " ]")
        return CardSuggestions(nodes=tuple(nodes), selection=selection, system=tuple(system))


def card_suggestions(
    plan: Mapping[str, Any], definitions: DefinitionSource
) -> tuple[list[CardSuggestions], frozenset[str]]:
    """Each top-level action's suggestions, in order, and the call resources they read."""
    builder = _Builder(plan, definitions, set())
    cards = [builder.card(action, i) for i, action in enumerate(plan.get("action") or ())]
    return cards, frozenset(builder.reads)


def _inputs(actions: Any, at: str) -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = []
    for i, action in enumerate(actions or ()):
        here = f"{at}.action[{i}]"
        out.extend((f"{here}.input[{j}]", req) for j, req in enumerate(action.get("input") or ()))
        out.extend(_inputs(action.get("action"), here))
    return out


def plan_prefetch(
    plan: Mapping[str, Any], hook: str, reads: frozenset[str]
) -> tuple[tuple[str, str], ...]:
    """The prefetch templates beyond ``patient`` the served plan declares (key, query)."""
    out: list[tuple[str, str]] = []
    if "practitioner" in reads:
        out.append(("practitioner", PRACTITIONER_TEMPLATE))
    fields = {f.name for f in HOOKS.get(hook, ())}
    if "encounter" in reads and "encounterId" in fields:
        out.append(("encounter", ENCOUNTER_TEMPLATE))
    taken = {"patient", *(key for key, _q in out)}
    for where, requirement in _inputs(plan.get("action"), "PlanDefinition"):
        kind = requirement.get("type")
        if not isinstance(kind, str) or not is_resource_type(kind):
            raise _refused(f"{where}.type {kind!r} is not an R4 resource type", f"{where}.type")
        if kind == "Patient":
            continue
        query = f"{kind}?patient={{{{context.patientId}}}}"
        for code_filter in requirement.get("codeFilter") or ():
            param = code_filter.get("searchParam") or (
                code_filter.get("path") if code_filter.get("path") in _SEARCHABLE else None
            )
            codes = [
                f"{c['system']}|{c['code']}" if c.get("system") else str(c["code"])
                for c in code_filter.get("code") or ()
                if isinstance(c, dict) and c.get("code")
            ]
            if codes and isinstance(param, str):  # else not in the query: a superset
                query += f"&{param}={','.join(codes)}"
        key = kind[0].lower() + kind[1:]
        n = 2
        while key in taken:
            key, n = f"{kind[0].lower()}{kind[1:]}{n}", n + 1
        taken.add(key)
        out.append((key, query))
    return tuple(out)


__all__ = ["SELECTION", "CardSuggestions", "card_suggestions", "plan_prefetch"]

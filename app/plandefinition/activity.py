"""``$apply`` on an ActivityDefinition: the one request resource it defines, for one subject.

An ActivityDefinition is a template for a request (an order, a task, a message). Applying it
to a subject builds the resource its ``kind`` names, as the CPG-on-FHIR guide's unit tests
expect, in FHIR R4:

- from the call: the subject (``subject``, ``for`` on a Task, ``patient`` on an
  ImmunizationRecommendation), ``encounter`` and ``requester`` (the ``practitioner``);
- from the definition: ``status`` draft, its ``intent``, ``priority``, ``code``, ``doNotPerform``
  (on a Task, which has no such element, the ``request-doNotPerform`` modifier extension),
  ``instantiatesCanonical`` (its url and version), the product and dosage of a medication and
  the profile it names as ``meta.profile`` — each where the request's type has the element
  (:data:`KINDS`);
- then each ``dynamicValue``: a FHIRPath expression evaluated with the definition as its
  context, the call's resources as ``%subject``, ``%practitioner``, ``%encounter``,
  ``%organization`` and each entry of the ``parameters`` parameter as ``%name``; its value set
  at the ``path`` the dynamic value names.

Nothing is guessed around. A definition whose expressions are CQL (this host evaluates FHIRPath
and its own rules, not CQL), a kind this module does not build, a path the request's type does
not have, an expression that does not parse or fails, a resource an expression reads that the
``data`` Bundle does not hold, a ``dataEndpoint`` (its data would not be read) and a result that
is not valid R4 are each refused with an OperationOutcome naming the element. Nothing is stored
and nothing is written to an EHR: the request is a proposal returned to the caller.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from fhirpathpy import evaluate as fhirpath_evaluate
from fhirpathpy.engine.nodes import FP_Quantity, FP_TimeBase
from fhirpathpy.models import models as fhirpath_models

from app.fhir_validate import problems
from app.ontology._fhir_model import type_info
from app.ontology.request_kinds import (
    KINDS,
    Kind,
    check_activity,
    refuse_other_languages,
)
from app.plandefinition.condition_values import typed_entries
from app.plandefinition.endpoint import Fetch
from app.plandefinition.refusals import ApplyRefused, parameters

DO_NOT_PERFORM = "http://hl7.org/fhir/StructureDefinition/request-doNotPerform"
#: Variables FHIRPath and the CPG guide define themselves, not resources of the call.
_BUILT_IN = frozenset({"resource", "context", "rootResource", "ucum", "sct", "loinc"})
#: The call's resources an expression may name, and the parameter each comes from.
CALL_RESOURCES = {
    "subject": "subject",
    "practitioner": "practitioner",
    "encounter": "encounter",
    "organization": "organization",
}


#: a FHIRPath string literal, and a ``%variable`` (its name the group)
STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'")
VARIABLE = re.compile(r"%`?([A-Za-z_][A-Za-z0-9_-]*)`?")
_STEP = re.compile(r"^([A-Za-z][A-Za-z0-9]*)(?:\[(\d+)\])?$")


def variables(expression: str) -> dict[str, None]:
    """The ``%name`` variables an expression reads (string literals left out), each once, in
    the order they first appear (so a refusal names the same one on every run)."""
    return dict.fromkeys(
        m.group(1) for m in VARIABLE.finditer(STRING_LITERAL.sub("''", expression))
    )


def _steps(kind: str, path: str, at: str) -> list[tuple[str, int | None, bool]]:
    """A dynamic value's path as (element, index, repeats) steps through the request's type,
    or a refusal naming the step R4 does not define."""
    steps: list[tuple[str, int | None, bool]] = []
    owner = kind
    for part in path.split("."):
        match = _STEP.match(part)
        info = type_info(owner)
        element = info.elements.get(match.group(1)) if match and info else None
        if match is None or element is None:
            raise ApplyRefused(
                422,
                "invalid",
                f"{at}.path {path!r}: {owner} has no element {part!r}",
                f"{at}.path",
            )
        index = int(match.group(2)) if match.group(2) is not None else None
        steps.append((element.name, index, element.repeats))
        owner = element.types[0] if element.types else owner
    return steps


def _place(
    target: dict[str, Any], steps: list[tuple[str, int | None, bool]], value: Any, at: str
) -> None:
    """Set ``value`` (a non-empty list) at ``steps``; a step through something that is not an
    element holding others, or past the next free place of a list, is refused naming the
    dynamic value's path."""

    def refused(why: str) -> ApplyRefused:
        return ApplyRefused(422, "invalid", f"{at}.path: {why}", f"{at}.path")

    def slot(items: list[Any], position: int) -> None:
        if position > len(items):
            raise refused(f"index {position} leaves a gap (the list holds {len(items)})")
        if position == len(items):
            items.append({})

    *inner, (name, index, repeats) = steps
    for step, position, many in inner:
        held = target.setdefault(step, [] if many else {})
        if many:
            if not isinstance(held, list):
                raise refused(f"{step} already holds a value that is not a list")
            slot(held, position or 0)
            held = held[position or 0]
        if not isinstance(held, dict):
            raise refused(f"{step} already holds a value that is not an element")
        target = held
    one = value[0] if len(value) == 1 else value
    if not repeats:
        target[name] = one
    elif index is None:
        target[name] = list(value)
    else:
        items = target.setdefault(name, [])
        if not isinstance(items, list):
            raise refused(f"{name} already holds a value that is not a list")
        slot(items, index)
        items[index] = one


def plain(value: Any, at: str) -> Any:
    """A FHIRPath result as JSON: a decimal as a number, a date or time as its text, a
    quantity as a Quantity; every value copied, so no definition is written through."""
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        if not value.is_finite() or not isinstance(exponent, int):
            raise ApplyRefused(422, "invalid", f"{at} gives {value}, which is not a number", at)
        return int(value) if exponent >= 0 else float(value)
    if isinstance(value, FP_Quantity):
        unit = str(value.unit)
        quantity: dict[str, Any] = {"value": plain(value.value, at)}
        if unit.startswith("'") and unit.endswith("'"):
            code = unit[1:-1]
            quantity.update(unit=code, system="http://unitsofmeasure.org", code=code)
        elif unit:
            quantity["unit"] = unit
        return quantity
    if isinstance(value, FP_TimeBase):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v, at) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, at) for v in value]
    raise ApplyRefused(
        422, "invalid", f"{at} gives a {type(value).__name__}, which is not FHIR data", at
    )


def _found(data: Any) -> dict[str, dict[str, Any]]:
    if data is None:
        return {}
    if not isinstance(data, dict) or data.get("resourceType") != "Bundle":
        raise ApplyRefused(400, "value", "data must be a Bundle", "data")
    found: dict[str, dict[str, Any]] = {}
    entries = data.get("entry") or []
    if not isinstance(entries, list):
        raise ApplyRefused(400, "structure", "data.entry must be a list", "data")
    for entry in entries:
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if (
            isinstance(resource, dict)
            and isinstance(resource.get("resourceType"), str)
            and isinstance(resource.get("id"), str)
        ):
            found[f"{resource['resourceType']}/{resource['id']}"] = resource
    return found


def _reference(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        value = value.get("reference")
    if not isinstance(value, str) or not re.fullmatch(
        r"[A-Z][A-Za-z]+/[A-Za-z0-9\-.]{1,64}", value
    ):
        raise ApplyRefused(400, "value", f"{name} must be a reference Type/id", name)
    if name == "encounter" and not value.startswith("Encounter/"):
        # checked before anything is read for it (a dataEndpoint would be asked for it)
        raise ApplyRefused(400, "value", "encounter must be a reference to an Encounter", name)
    return value


def _base_request(
    definition: Mapping[str, Any], kind: Kind, resource_type: str, refs: Mapping[str, str | None]
) -> dict[str, Any]:
    made: dict[str, Any] = {"resourceType": resource_type, "id": str(uuid.uuid4())}
    if isinstance(definition.get("profile"), str):
        made["meta"] = {"profile": [definition["profile"]]}
    if kind.status:
        made["status"] = "draft"
    if kind.intent:
        made["intent"] = definition.get("intent") or "proposal"
    if kind.priority and definition.get("priority"):
        made["priority"] = definition["priority"]
    if kind.code and definition.get("code"):
        made[kind.code] = definition["code"]
    flag = definition.get("doNotPerform")
    if kind.do_not_perform == "element" and isinstance(flag, bool):
        made["doNotPerform"] = flag
    elif kind.do_not_perform == "extension" and flag is True:
        made["modifierExtension"] = [{"url": DO_NOT_PERFORM, "valueBoolean": True}]
    url = definition.get("url")
    if kind.canonical and isinstance(url, str):
        canonical = f"{url}|{definition['version']}" if definition.get("version") else url
        made["instantiatesCanonical"] = [canonical] if kind.canonical == "many" else canonical
    made[kind.subject] = {"reference": refs["subject"]}
    if kind.encounter and refs.get("encounter"):
        made[kind.encounter] = {"reference": refs["encounter"]}
    if kind.requester and refs.get("practitioner"):
        made[kind.requester] = {"reference": refs["practitioner"]}
    if kind.product:
        for key, value in definition.items():
            if key.startswith("product"):
                made[kind.product + key.removeprefix("product")] = value
    if kind.dosage and definition.get("dosage"):
        made[kind.dosage] = definition["dosage"]
    return made


def _immunization(made: dict[str, Any], definition: Mapping[str, Any], when: datetime) -> None:
    """An ImmunizationRecommendation is a recommendation, not a request: the vaccine is the
    definition's product, due now."""
    made["date"] = when.isoformat()
    recommendation: dict[str, Any] = {
        "forecastStatus": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/immunization-recommendation-status",
                    "code": "due",
                    "display": "Due",
                }
            ]
        }
    }
    if isinstance(definition.get("productCodeableConcept"), dict):
        recommendation["vaccineCode"] = [definition["productCodeableConcept"]]
    made["recommendation"] = [recommendation]


@dataclass(frozen=True, kw_only=True)
class Call:
    """What one ``$apply`` call gives every definition it applies: the references of its
    subject, encounter, practitioner and organization, the resources of its ``data`` Bundle by
    ``Type/id``, its ``parameters`` by name, and its time."""

    refs: dict[str, str | None]
    found: dict[str, dict[str, Any]]
    user: dict[str, Any]
    when: datetime
    #: each ``parameters`` entry by name: the key its value is under and the value
    #: (``app.plandefinition.condition_values``: what an applicability condition reads)
    parameters: dict[str, tuple[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        given: Mapping[str, Any],
        *,
        at: datetime | None = None,
        fetch: Fetch | None = None,
    ) -> Call:
        """The call ``given`` makes; ``fetch`` reads its resources from its ``dataEndpoint``
        once everything else in it is checked (None: a ``dataEndpoint`` is refused, not
        ignored)."""
        if given.get("dataEndpoint") is not None and fetch is None:
            raise ApplyRefused(
                422,
                "not-supported",
                "dataEndpoint is not read here: send the subject's records in the data parameter",
                "dataEndpoint",
            )
        refs = {name: _reference(given.get(name), name) for name in CALL_RESOURCES}
        if refs["subject"] is None:
            raise ApplyRefused(400, "required", "$apply needs the subject parameter", "subject")
        extra = given.get("parameters")
        if extra is not None and (
            not isinstance(extra, dict) or extra.get("resourceType") != "Parameters"
        ):
            raise ApplyRefused(
                400, "value", "parameters must be a Parameters resource", "parameters"
            )
        entries = (extra or {}).get("parameter") or []
        if not isinstance(entries, list):
            raise ApplyRefused(
                400, "structure", "parameters.parameter must be a list", "parameters"
            )
        user = {
            p["name"]: p.get(
                "resource", next((v for k, v in p.items() if k.startswith("value")), None)
            )
            for p in entries
            if isinstance(p, dict) and isinstance(p.get("name"), str)
        }
        clash = sorted(set(user) & set(CALL_RESOURCES))
        if clash:
            raise ApplyRefused(
                400,
                "invalid",
                f"a parameters entry is named {clash[0]}, which names the call's "
                f"{clash[0]}: give it another name",
                "parameters",
            )
        found = _found(given.get("data"))
        if given.get("dataEndpoint") is not None and fetch is not None:
            # what the caller sent stands: only the references it did not send are read
            wanted = [ref for ref in refs.values() if ref is not None and ref not in found]
            found = {**fetch(given, wanted), **found}
        return cls(
            refs=refs,
            found=found,
            user=user,
            when=at or datetime.now(UTC),
            parameters=typed_entries(extra),
        )

    def reference(self, name: str) -> dict[str, str] | None:
        ref = self.refs.get(name)
        return {"reference": ref} if ref else None


def checked(resource: Any, resource_type: str, name: str) -> dict[str, Any]:
    """``resource`` when it is a valid R4 ``resource_type``; else a 400 naming the element."""
    if not isinstance(resource, dict) or resource.get("resourceType") != resource_type:
        raise ApplyRefused(400, "required", f"{name} must be a {resource_type} resource", name)
    wrong = problems(resource)
    if wrong:
        where, rule = wrong[0]
        raise ApplyRefused(
            400, "structure", f"{resource_type}{where}: {rule}", f"{resource_type}{where}"
        )
    return resource


def set_dynamic_values(
    made: dict[str, Any],
    context: Mapping[str, Any],
    values: Any,
    call: Call,
    where: str,
    action: Mapping[str, Any] | None = None,
) -> None:
    """Evaluate each dynamic value of ``values`` with ``context`` as its context resource (and
    a PlanDefinition action's own as ``%action``) and set it in ``made`` at its path;
    ``where`` names the element holding them in refusals."""
    model = fhirpath_models["r4"]
    for i, dv in enumerate(values or ()):
        at_i = f"{where}.dynamicValue[{i}]"
        steps = _steps(made["resourceType"], str(dv.get("path", "")), at_i)
        expression = str(dv["expression"].get("expression", ""))
        env: dict[str, Any] = {"context": context, "resource": context}
        for name in (n for n in variables(expression) if n not in _BUILT_IN):
            if name == "action" and action is not None:
                env[name] = dict(action)
            elif name in call.user:
                env[name] = call.user[name]
            elif name in CALL_RESOURCES:
                ref = call.refs[CALL_RESOURCES[name]]
                if ref is None or ref not in call.found:
                    held = f"the data Bundle does not hold {ref}" if ref else f"no {name} was given"
                    raise ApplyRefused(
                        422, "not-found", f"{at_i} reads %{name}, but {held}", f"{at_i}.expression"
                    )
                env[name] = call.found[ref]
            else:
                raise ApplyRefused(
                    422,
                    "invalid",
                    f"{at_i} reads %{name}, which is neither a resource of the call nor a "
                    "parameter",
                    f"{at_i}.expression",
                )
        try:
            value = fhirpath_evaluate(dict(context), expression, env, model)
        except Exception as exc:  # fhirpathpy raises plain exceptions for bad expressions
            raise ApplyRefused(
                422,
                "invalid",
                f"{at_i} expression {expression!r} could not be evaluated: {exc}",
                f"{at_i}.expression",
            ) from None
        if value:
            _place(made, steps, [plain(v, f"{at_i}.expression") for v in value], at_i)


def valid_result(made: dict[str, Any], where: str) -> dict[str, Any]:
    wrong = problems(made)
    if wrong:  # a dynamic value of the wrong type for its element
        at, rule = wrong[0]
        kind = made["resourceType"]
        raise ApplyRefused(
            422, "invalid", f"the {kind} built is not valid R4 at {kind}{at}: {rule}", where
        )
    return made


def instantiate(definition: Mapping[str, Any], call: Call) -> dict[str, Any]:
    """The request ``definition`` (a valid ActivityDefinition) defines for ``call``; the
    definition is copied first, so nothing built for one call is written into it."""
    definition = copy.deepcopy(dict(definition))
    resource_type, kind = check_activity(definition)
    immunization = resource_type == "ImmunizationRecommendation"
    made = _base_request(definition, kind, resource_type, call.refs)
    if immunization:
        _immunization(made, definition, call.when)
    set_dynamic_values(made, definition, definition.get("dynamicValue"), call, "ActivityDefinition")
    return valid_result(made, "ActivityDefinition")


def apply_activity(
    body: Any,
    *,
    at: datetime | None = None,
    stored: Mapping[str, Any] | None = None,
    fetch: Fetch | None = None,
) -> dict[str, Any]:
    """The request resource an ActivityDefinition defines for the call's subject: the one sent
    inline (the ``activityDefinition`` parameter), or ``stored`` (one of the service's
    definitions, chosen by the route); ``fetch`` reads the call's resources from its
    ``dataEndpoint`` (``app.plandefinition.endpoint``)."""
    given = parameters(body)
    if stored is not None:
        if given.get("activityDefinition") is not None:
            raise ApplyRefused(
                400,
                "invalid",
                "activityDefinition is not allowed when the operation names a definition",
                "activityDefinition",
            )
        definition: Mapping[str, Any] = stored
    else:
        definition = checked(
            given.get("activityDefinition"), "ActivityDefinition", "activityDefinition"
        )
    return instantiate(definition, Call.of(given, at=at, fetch=fetch))


__all__ = [
    "KINDS",
    "STRING_LITERAL",
    "VARIABLE",
    "Call",
    "Kind",
    "apply_activity",
    "check_activity",
    "checked",
    "instantiate",
    "refuse_other_languages",
    "set_dynamic_values",
    "valid_result",
    "variables",
]

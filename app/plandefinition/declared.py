"""A request declared as an ActivityDefinition (``horis:activity``), built for one call: on a
card's suggestion (``app.cds.cards``) and in a tool's create commit (``adapters.fhir.create``)
— the same application ``ActivityDefinition/$apply`` answers with
(``app.plandefinition.activity``), never a resource written out in advance or by a language
model.

The call gives the definition what ``$apply`` takes as parameters: the patient
(``Patient/{patientId}``) as the subject, the user (a ``Practitioner/…`` or
``PractitionerRole/…`` ``userId``) as the practitioner, the encounter (``encounterId``), the
resources the call carried or read as its data, by ``Type/id`` — a dynamic value reading
``%practitioner`` reads the user's resource when the EHR sent it (a prefetch of
``Practitioner/{{userPractitionerId}}``) — and, for a commit, the tool's arguments as
``%name`` parameters. The time is the run's, so a replay builds the same request.

A definition that cannot be built for this call (an expression reads a resource the call did
not carry, a value of the wrong type for its element) builds nothing, and says why: a card then
offers no suggestion and says so, a commit is not sent and the run's notices say so — never
half a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from app.ontology.activity import ActivityError, parse_activity
from app.plandefinition.activity import (
    CALL_RESOURCES,
    Call,
    instantiate,
    set_dynamic_values,
    valid_result,
)
from app.plandefinition.refusals import ApplyRefused

_USER_TYPES = ("Practitioner/", "PractitionerRole/")


def call_refs(context: Mapping[str, Any]) -> dict[str, str | None]:
    """The references a definition applied in a hook call reads as ``%subject``,
    ``%practitioner``, ``%encounter`` (``%organization``: none) from the hook's context."""
    user = context.get("userId")
    encounter = context.get("encounterId")
    return {
        "subject": f"Patient/{context['patientId']}" if context.get("patientId") else None,
        "practitioner": user if isinstance(user, str) and user.startswith(_USER_TYPES) else None,
        "encounter": f"Encounter/{encounter}" if isinstance(encounter, str) else None,
        "organization": None,
    }


def created_request(
    text: str,
    *,
    refs: Mapping[str, str | None],
    resources: Mapping[str, Mapping[str, Any]],
    now: datetime | None,
    params: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """The request the ``horis:activity`` literal ``text`` defines for this call (``params``:
    what its expressions read as ``%name``), or None and why it could not be built."""
    try:
        activity = parse_activity(text)
    except ActivityError as exc:  # verified at load: only a deployment bypassing it
        return None, f"its declaration is not valid ({exc})"
    clash = sorted(set(params or {}) & set(CALL_RESOURCES))
    if clash:  # %subject and the others name the call's resources, never an argument
        return None, f"an argument is named {clash[0]}, which names the call's {clash[0]}"
    call = Call(
        refs=dict(refs),
        found={ref: dict(resource) for ref, resource in resources.items()},
        user=dict(params or {}),
        when=now or datetime.now(UTC),
    )
    try:
        made = instantiate(activity.definition, call)
        if activity.dynamic_values:
            set_dynamic_values(
                made,
                activity.context or {},
                activity.dynamic_values,
                call,
                "dynamicValue",
                action=activity.action,
            )
            made = valid_result(made, "dynamicValue")
    except ApplyRefused as exc:
        return None, str(exc).replace("the data Bundle does not hold", "the call did not carry")
    return made, None


__all__ = ["call_refs", "created_request"]

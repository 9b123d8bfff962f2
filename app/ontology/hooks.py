"""The CDS Hooks registry: each hook's context fields, and the prefetch tokens they give.

One table serves two readers: request validation (``app.cds.requests`` checks a hook call's
``context`` against it) and verification (a service's ``horis:hook`` must be a hook of this
registry, or declared ``horis:customHook true``, and its prefetch templates may use only the
tokens its hook provides). Versions are those current with CDS Hooks 2.0.

A context field is a prefetch token when the registry says so: the string-valued ids and
references (``{{context.patientId}}``), not the Bundles and arrays (``draftOrders``). The 2.0
user tokens (``{{userPractitionerId}}`` …) are derived from ``context.userId``, so they exist
only for hooks that have one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FieldKind = Literal["id", "user", "ref", "bundle", "refs", "bundle-list"]

_CLINICIAN = ("Practitioner", "PractitionerRole")
_ANY_USER = ("Practitioner", "PractitionerRole", "Patient", "RelatedPerson")


@dataclass(frozen=True, kw_only=True)
class ContextField:
    """One field of a hook's ``context``."""

    name: str
    kind: FieldKind  # id: a bare FHIR id; user/ref: "Type/id"; bundle(-list)/refs: collections
    required: bool = True
    types: tuple[str, ...] = ()  # resource types a user/ref field may reference

    @property
    def token(self) -> bool:
        """Whether ``{{context.<name>}}`` may appear in a prefetch template."""
        return self.kind in ("id", "user", "ref")


#: Context fields per hook.
HOOKS: dict[str, tuple[ContextField, ...]] = {
    "patient-view": (
        ContextField(name="userId", kind="user", types=_ANY_USER),
        ContextField(name="patientId", kind="id"),
        ContextField(name="encounterId", kind="id", required=False),
    ),
    "order-select": (
        ContextField(name="userId", kind="user", types=_CLINICIAN),
        ContextField(name="patientId", kind="id"),
        ContextField(name="encounterId", kind="id", required=False),
        ContextField(name="selections", kind="refs"),
        ContextField(name="draftOrders", kind="bundle"),
    ),
    "order-sign": (
        ContextField(name="userId", kind="user", types=_CLINICIAN),
        ContextField(name="patientId", kind="id"),
        ContextField(name="encounterId", kind="id", required=False),
        ContextField(name="draftOrders", kind="bundle"),
    ),
    "order-dispatch": (
        ContextField(name="patientId", kind="id"),
        ContextField(name="dispatchedOrders", kind="refs"),
        ContextField(name="performer", kind="ref"),
        ContextField(name="fulfillmentTasks", kind="bundle-list", required=False),
    ),
    "encounter-start": (
        ContextField(name="userId", kind="user", types=_CLINICIAN),
        ContextField(name="patientId", kind="id"),
        ContextField(name="encounterId", kind="id"),
    ),
    "encounter-discharge": (
        ContextField(name="userId", kind="user", types=_CLINICIAN),
        ContextField(name="patientId", kind="id"),
        ContextField(name="encounterId", kind="id"),
    ),
    "appointment-book": (
        ContextField(name="userId", kind="user", types=_ANY_USER),
        ContextField(name="patientId", kind="id"),
        ContextField(name="encounterId", kind="id", required=False),
        ContextField(name="appointments", kind="bundle"),
    ),
    "medication-refill": (
        ContextField(name="userId", kind="user", types=_CLINICIAN, required=False),
        ContextField(name="patientId", kind="id"),
        ContextField(name="encounterId", kind="id", required=False),
        ContextField(name="medications", kind="bundle"),
    ),
}

#: The CDS Hooks 2.0 user tokens, and the resource type ``context.userId`` must name for each.
USER_TOKENS: dict[str, str] = {
    "userPractitionerId": "Practitioner",
    "userPractitionerRoleId": "PractitionerRole",
    "userPatientId": "Patient",
    "userRelatedPersonId": "RelatedPerson",
}

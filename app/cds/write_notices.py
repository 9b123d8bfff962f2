"""What became of a write, in one plain sentence for a card (an ``effect_reports`` item in,
a sentence out): recorded, conflicted, refused, not confirmed, failed; for a create, whether
anyone was told through the EHR, and whom.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _reference(effect: Mapping[str, Any]) -> str | None:
    """``Type/id`` of the effect's target, or None when the write had no target resource."""
    target = str(effect.get("target") or "")
    kind = effect.get("resourceType")
    if kind:
        marker = f"/{kind}/"
        return target[target.rindex(marker) + 1 :] if marker in target else None
    parts = target.rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) >= 2 else target or None


def effect_notice(effect: Mapping[str, Any]) -> str:
    """One plain sentence for a card about what happened to a write (``effect_reports`` item)."""
    if effect.get("operation") == "create":
        return _create_notice(effect)
    ref = _reference(effect)
    what = f"{effect.get('element')} of {ref}"
    state = effect.get("state")
    if state == "accepted":
        return f"Recorded in the EHR: {what} was updated (version {effect.get('newVersion')})."
    if state == "conflicted":
        return (
            f"Not recorded in the EHR: {ref} changed since the decision was computed "
            f"(it was read at version {effect.get('expectedVersion')}); {what} was left as it is. "
            "Review the current record before acting on this decision."
        )
    if state == "refused":
        kind = effect.get("resourceType") or (ref or "").split("/")[0] or "the record"
        element = f"{kind}.{effect.get('element')}"
        where = f" ({ref})" if ref else ""
        return (
            f"The decision was not written to the EHR. {element}{where} was not written: "
            f"{effect.get('detail')}."
        )
    if state == "unknown":
        return (
            f"Not confirmed: the EHR did not answer the update of {what}; it will be checked again."
        )
    if state == "failed":
        return f"Not recorded in the EHR: the update of {what} failed ({effect.get('detail')})."
    return f"The update of {what} is {state}."


def _create_notice(effect: Mapping[str, Any]) -> str:
    """What became of a resource the run created (a message, a task) — above all, whether
    anyone was told through the EHR."""
    kind = effect.get("resourceType") or "resource"
    state = effect.get("state")
    if state == "accepted":
        recipients = effect.get("recipients") or []
        to = f", addressed to {', '.join(recipients)}" if recipients else ", addressed to no one"
        return f"Sent through the EHR: {effect.get('created') or kind} was created{to}."
    if state == "refused":
        return (
            f"Nobody was notified through the EHR: no {kind} was created ({effect.get('detail')})."
        )
    if state in ("unknown", "attempted"):
        return (
            f"Not confirmed: the EHR did not answer the creation of the {kind}; whether anyone "
            "was notified through it will be checked again."
        )
    return (
        f"Nobody was notified through the EHR: creating the {kind} failed ({effect.get('detail')})."
    )


def unsuccessful(effect: Mapping[str, Any]) -> bool:
    """Whether a card must tell its reader about a write: it was not confirmed as made, or it
    was a message (a create): whether someone was told, and whom, is the clinician's to know.
    An update the EHR accepted needs no sentence (the decision page lists it)."""
    return effect.get("state") != "accepted" or effect.get("operation") == "create"

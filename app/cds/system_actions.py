"""The response's ``systemActions``: what a CDS service asks the EHR to do without the
clinician, from its ``horis:systemAction`` declarations matched against the finished run — an
action on each resource the decision's proof cites (``update``, ``delete``), or the request a
declaration's ``horis:activity`` defines, built for the call's patient (``create``)."""

from __future__ import annotations

from typing import Any

from app.cds.cards import RunView, cited_action, cited_resources, created_for, matches
from app.ontology.model import CdsServiceDef, SystemActionDecl, WorkflowDef
from app.world.world import World


def build_system_actions(
    *,
    service: CdsServiceDef,
    workflow: WorkflowDef,
    world: World,
    run: RunView,
    notes: list[str],
) -> list[dict[str, Any]]:
    """The response's ``systemActions``: for every matching ``horis:systemAction``, in document
    order, one action per resource the decision's proof cites (duplicates dropped), or the
    request its ``horis:activity`` defines; ``notes`` gets a sentence for each request not sent
    (its conditions unknown, or the request not buildable for this call)."""
    out: list[dict[str, Any]] = []
    for decl in sorted(service.system_actions, key=lambda d: d.order):
        if decl.activity is not None:
            created = _created(decl, decl.activity, world, run, notes)
            if created is not None:
                out.append(created)
        elif decl.cites is not None and matches(decl, world, run):
            for ref in cited_resources(world, workflow, run.focus_id, decl.cites):
                action = cited_action(decl.action_type, decl.description, ref, run.resources)
                if action is not None and action not in out:
                    out.append(action)
    return out


def _created(
    decl: SystemActionDecl, activity: str, world: World, run: RunView, notes: list[str]
) -> dict[str, Any] | None:
    """The create ``decl`` sends, or None with a note when it is held back for want of what
    its conditions read, or cannot be built for this call."""
    if not matches(decl, world, run):
        # said only when an unknown condition kept it back: one decided false (its card not
        # shown, its action not applying) would never have sent it
        pending = [c for c in decl.when if not world.holds(run.focus_id, (c,))]
        if pending and all(world.value(run.focus_id, c.path[0]) is None for c in pending):
            notes.append(
                f"Not sent, not checked: {decl.description} (the record lacks what it reads)."
            )
        return None
    made, why = created_for(activity, run)
    if made is None:
        notes.append(f"Not sent: {decl.description} (its request could not be built: {why}).")
        return None
    return {"type": "create", "description": decl.description, "resource": made}


__all__ = ["build_system_actions"]

"""A PlanDefinition written over FHIR becomes a CDS service only through change control, like
any rule change: ``POST /changes/plandefinition`` proposes the deployment its latest write
compiles to (the same compilation a plan in the definition files is served from,
``app.plandefinition.services``); the change is then replayed, approved by someone other than
its author and activated (``app.changes.control``). The first activation creates deployment
``plandefinition-{id}`` (``app.changes.new_deployment``); a later write of the plan is proposed
as an ordinary change of it, which must declare a new ``version`` — the compiled file's
``owl:versionInfo``.

The change's author is the plan's writer: with trusted issuers (where a write names its
author, the JWT's ``sub``) a plan is proposed only by whoever wrote its latest version (403
otherwise), so that approval — refused to a change's author — always comes from someone else.

Refused, naming the element: a plan the service does not hold (404); one in the definition
files (they are the release, served as they are: change the file); one without a
``named-event`` trigger or whose trigger names no CDS Hooks hook; one this host could not serve
(its logic, its conditions, what a card cannot carry). The change's own policy then refuses what
any change is refused for (a service id another deployment serves, a version already active).
"""

from __future__ import annotations

from typing import Any

from app.changes.envelope import ChangedFile, ChangeEnvelope
from app.changes.new_deployment import NEW
from app.deployments import Deployments
from app.ontology.hooks import HOOKS
from app.plandefinition.library import HeldDefinitions
from app.plandefinition.refusals import ApplyRefused
from app.plandefinition.services import compiled_service, served_iri, trigger_hook
from app.store.definitions import stored_author


def plan_envelope(
    plan_id: str,
    *,
    definitions: HeldDefinitions,
    deployments: Deployments,
    author: str,
    rationale: str,
) -> ChangeEnvelope:
    """The change proposing the written plan ``plan_id`` as a CDS service (or its next
    version, when it serves already)."""
    if definitions.files.by_id("PlanDefinition", plan_id) is not None:
        raise ApplyRefused(
            409,
            "conflict",
            f"PlanDefinition/{plan_id} is in the definition files, which are served as they are: "
            "change the file",
            "planDefinition",
        )
    plan = definitions.by_id("PlanDefinition", plan_id)
    if plan is None:
        raise ApplyRefused(
            404, "not-found", f"no PlanDefinition/{plan_id} was written", "planDefinition"
        )
    hook = trigger_hook(plan)
    if hook is None or hook not in HOOKS:
        why = "no action has a named-event trigger" if hook is None else f"{hook!r} is no hook"
        raise ApplyRefused(
            422,
            "not-supported",
            f"PlanDefinition/{plan_id} cannot be a CDS service: {why}",
            "PlanDefinition.action.trigger",
        )
    writer = stored_author(definitions.engine, "PlanDefinition", plan_id)
    if writer is not None and writer != author:
        # the writer proposes: approval is then refused to them, as to any change's author
        raise ApplyRefused(
            403,
            "forbidden",
            f"PlanDefinition/{plan_id} was written by {writer}: its writer proposes it, so that "
            "someone else approves it",
            "planDefinition",
        )
    text = compiled_service(plan, hook, definitions)
    iri = served_iri(plan)
    active = deployments.find(iri)
    base: Any = active.digest if active is not None and active.digest else NEW
    return ChangeEnvelope(
        deployment=iri,
        baseDigest=base,
        files=[ChangedFile(path=f"plandefinition-{plan_id}.ttl", content=text)],
        author=author,
        rationale=rationale
        or f"Serve PlanDefinition/{plan_id} {plan.get('version') or ''} as a CDS service",
    )


__all__ = ["plan_envelope"]

"""A change that creates a deployment: its base is no version (:data:`NEW`), its files are all
it has.

A PlanDefinition written over FHIR becomes a CDS service this way
(``app.plandefinition.activation``): the Turtle it compiles to is proposed as a new deployment,
passes this policy, replays (no active version to replay its runs on, said so), is approved
by someone other than its author and activated like any rule change; its later versions are
ordinary changes of that deployment. Checks, in order (the first that fails refuses it):

1. ``deployment`` — no deployment of that IRI or id exists yet (a change of one that does
   names its active digest as its base);
2. ``paths`` — one Turtle file, a bare file name;
3. ``parses``, ``verifies`` — as for any change;
4. ``identity`` — the candidate declares the proposed IRI and a version;
5. ``services`` — no service id it declares is served by another deployment.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from app.changes.envelope import ChangeEnvelope
from app.changes.policy import Verdict, syntax_problem, verifies
from app.deployments import Deployments
from app.deployments.material import build
from app.deployments.newborn import NEW, new_material, placeholder
from app.tools.packaged import PackagedTools


def check_new(
    envelope: ChangeEnvelope, deployment_id: str, deployments: Deployments, packaged: PackagedTools
) -> Verdict:
    """The verdict on a change creating deployment ``deployment_id`` (IRI
    ``envelope.deployment``)."""
    verdict = Verdict()
    taken = deployments.find(envelope.deployment) or deployments.find(deployment_id)
    if taken is not None:
        return verdict.refuse(
            "deployment",
            f"deployment {taken.id} exists: propose a change of it against its active digest",
        )
    verdict.ok("deployment", f"{deployment_id} (new)")
    paths = [f.path for f in envelope.files]
    pure = PurePosixPath(paths[0]) if len(paths) == 1 else None
    if pure is None or len(pure.parts) != 1 or pure.suffix != ".ttl":
        return verdict.refuse("paths", "a new deployment is one Turtle file, a bare file name")
    verdict.ok("paths", paths[0])
    text = envelope.files[0].content
    error = syntax_problem(paths[0], text)
    if error is not None:
        return verdict.refuse("parses", f"{paths[0]}: {error}")
    verdict.ok("parses", "1 file")
    candidate = build(
        new_material({paths[0]: text}),
        packaged,
        like=placeholder(deployment_id, envelope.deployment),
    )
    if not verifies(verdict, candidate):
        return verdict
    if (
        candidate.iri != envelope.deployment
        or candidate.version in ("",)
        or (candidate.version.startswith("sha256:"))
    ):
        return verdict.refuse(
            "identity",
            f"the candidate is {candidate.iri} {candidate.version or '(no version)'}: it must "
            f"declare {envelope.deployment} and its owl:versionInfo",
        )
    verdict.ok("identity", f"{candidate.iri} {candidate.version}")
    served = {s: d.id for d in deployments if d.serving for s in d.services}
    clash = [s for s in candidate.services if s in served]
    if clash:
        return verdict.refuse(
            "services", f"the service id {clash[0]} is served by deployment {served[clash[0]]}"
        )
    verdict.ok("services", ", ".join(candidate.services) or "none")
    verdict.candidate = candidate
    return verdict


def empty_replay(candidate_digest: str | None) -> dict[str, Any]:
    """What replaying a new deployment reports: no active version to replay its runs on (a
    first version has none; one re-created after a withdrawal has its old runs, which are
    not decided again)."""
    return {
        "replayed": 0,
        "changed": [],
        "same": 0,
        "errors": [],
        "candidateDigest": candidate_digest,
        "note": "a new deployment: there is no active version to decide its runs again on",
    }


__all__ = ["NEW", "check_new", "empty_replay"]

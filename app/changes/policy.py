"""The deterministic policy every proposed change passes before anything runs it.

Checks, in order; the first that fails refuses the change and says why (the remaining ones are
not run):

1. ``deployment`` — the target deployment exists;
2. ``paths`` — every path is one of the deployment's own Turtle files or a value set beside
   them: no absolute path, no ``..``, nothing another deployment imports, nothing new;
3. ``base`` — the envelope's base digest is the digest of the version active now;
4. ``parses`` — every Turtle file parses, every value set is JSON;
5. ``verifies`` — the candidate (the active version's files with these replaced) loads and
   verifies like a deployment on disk, with the tools this installation offers;
6. ``identity`` — the candidate keeps the deployment's IRI and declares a new version in its
   ``owl:versionInfo`` (a change that does not say it is a new version is not one).

The same inputs always give the same verdict: the policy reads only the envelope, the active
version's files and the installed tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from rdflib import Graph

from app.changes.envelope import ChangeEnvelope
from app.deployments import Deployment, Deployments, problem_json
from app.deployments.material import Material, build
from app.tools.packaged import PackagedTools


@dataclass(kw_only=True)
class Verdict:
    """What the policy found: each check run, and the candidate when all passed."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)
    base: Deployment | None = None
    candidate: Deployment | None = None

    @property
    def passed(self) -> bool:
        return self.reason is None

    def ok(self, check: str, detail: str) -> None:
        self.checks.append({"check": check, "ok": True, "detail": detail})

    def refuse(self, check: str, reason: str) -> Verdict:
        self.checks.append({"check": check, "ok": False, "detail": reason})
        self.reason = reason
        return self

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"passed": self.passed, "checks": self.checks}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.problems:
            out["problems"] = self.problems
        return out


def _outside(path: str) -> bool:
    pure = PurePosixPath(path)
    return pure.is_absolute() or ".." in pure.parts or "\\" in path or path != str(pure)


def check(
    envelope: ChangeEnvelope,
    deployments: Deployments,
    material: Material | None,
    packaged: PackagedTools,
) -> Verdict:
    """The verdict on ``envelope`` against the active ``deployments``; ``material`` is the
    active version's files of the target deployment (None when there is no such deployment)."""
    verdict = Verdict()
    base = deployments.find(envelope.deployment)
    if base is None or material is None:
        known = ", ".join(d.id for d in deployments) or "none"
        return verdict.refuse(
            "deployment", f"no deployment {envelope.deployment!r} (deployments: {known})"
        )
    verdict.base = base
    verdict.ok("deployment", f"{base.id} {base.version}")
    paths = [f.path for f in envelope.files]
    for path in paths:
        if _outside(path) or not material.editable(path):
            own = ", ".join(material.own)
            return verdict.refuse(
                "paths",
                f"{path} is outside deployment {base.id}: a change may write its own files "
                f"({own}) and the value sets and concept maps beside them (valuesets/*.json, "
                "valuesets/history/*.json, valuesets/supplements/*.json, conceptmaps/*.json), "
                "nothing else",
            )
    if len(set(paths)) != len(paths):
        return verdict.refuse("paths", "a path is given twice")
    verdict.ok("paths", ", ".join(paths))
    if envelope.baseDigest != base.digest:
        return verdict.refuse(
            "base",
            f"stale base digest {envelope.baseDigest[:12]}: the active version of {base.id} is "
            f"{base.version} with digest {(base.digest or '')[:12]}; propose against it",
        )
    verdict.ok("base", f"{base.version} ({(base.digest or '')[:12]})")
    for changed in envelope.files:
        error = syntax_problem(changed.path, changed.content)
        if error is not None:
            return verdict.refuse("parses", f"{changed.path}: {error}")
    verdict.ok("parses", f"{len(paths)} file(s)")
    candidate = build(
        material.with_files({f.path: f.content for f in envelope.files}), packaged, like=base
    )
    if not verifies(verdict, candidate):
        return verdict
    if candidate.iri != base.iri:
        return verdict.refuse(
            "identity", f"the candidate is {candidate.iri}, not deployment {base.iri}"
        )
    if candidate.version in (base.version, "") or candidate.version.startswith("sha256:"):
        return verdict.refuse(
            "identity",
            f"the candidate must declare a new owl:versionInfo (the active version is "
            f"{base.version})",
        )
    verdict.ok("identity", f"{base.version} → {candidate.version}")
    verdict.candidate = candidate
    return verdict


def verifies(verdict: Verdict, candidate: Deployment) -> bool:
    """The ``verifies`` check of ``candidate``, recorded on ``verdict`` (refused with its
    problems when it does not serve)."""
    if not candidate.serving:
        verdict.problems = [problem_json(p) for p in candidate.problems]
        first = str(candidate.problems[0]) if candidate.problems else "it does not load"
        verdict.refuse(
            "verifies",
            f"the candidate does not verify ({len(candidate.problems)} problem(s)): {first}",
        )
        return False
    verdict.ok("verifies", f"digest {(candidate.digest or '')[:12]}")
    return True


def syntax_problem(path: str, text: str) -> str | None:
    if path.endswith(".json"):
        try:
            json.loads(text)
        except ValueError as exc:
            return f"not JSON: {exc}"
        return None
    try:
        Graph(bind_namespaces="none").parse(data=text, format="turtle")
    except Exception as exc:  # rdflib raises many kinds of parse error
        return f"not valid Turtle: {exc}"
    return None


__all__ = ["Verdict", "check", "syntax_problem", "verifies"]

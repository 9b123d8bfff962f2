"""``PUT /fhir/{type}/{id}``: a definition written over FHIR, checked as it would be applied,
stored as the next version of its id (``app.store.definitions``), never over another.

A Library is stored as an artifact, read back and versioned like the others, and never
evaluated: it holds logic in CQL, which this host does not run, so a plan naming it in
``library`` is still refused when written or applied.

Refused, with an OperationOutcome naming the element, and nothing stored: a type other than
ActivityDefinition, PlanDefinition, Questionnaire or Library; a body whose ``resourceType`` or
``id`` disagrees with the path; a resource that is not valid R4; an id or url the service's
files already define (they are its release; a write may not shadow one) or the id of a served
CDS service; an ActivityDefinition this host could not apply (its logic, its kind, an element
it would drop); a PlanDefinition whose logic it could not apply or whose conditions do not
compile into rules that verify; a url or version longer than it stores (400). A write that
keeps losing the race for its next version to others writing the same id is a 409 to retry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine

from app.fhir_validate import problems
from app.plandefinition.activity import check_activity
from app.plandefinition.authored import check_plan
from app.plandefinition.conditions import verify_conditions
from app.plandefinition.library import Definitions
from app.plandefinition.refusals import ApplyRefused
from app.store.definitions import VersionTaken, store_definition
from app.tools.packaged import PackagedTools

#: The client JWT scope that lets a caller write definitions, when issuers are configured.
WRITE_SCOPE = "horismos/definitions.write"
#: The definition types a client may write.
WRITABLE = ("ActivityDefinition", "PlanDefinition", "Questionnaire", "Library")
_ID = re.compile(r"[A-Za-z0-9\-.]{1,64}")


def author_of(claims: Mapping[str, Any] | None) -> str | None:
    """Who writes, from the verified client JWT's claims (None in open mode: anyone may write,
    as anyone may call a hook); a JWT without :data:`WRITE_SCOPE` is refused (403)."""
    if claims is None:
        return None
    scope = claims.get("scope")
    if WRITE_SCOPE not in (scope.split() if isinstance(scope, str) else []):
        raise ApplyRefused(403, "forbidden", f"writing a definition needs the {WRITE_SCOPE} scope")
    sub = claims.get("sub")
    return sub if isinstance(sub, str) else None


def write_definition(
    resource_type: str,
    ident: str,
    body: Any,
    *,
    files: Definitions,
    engine: Engine,
    packaged: PackagedTools,
    author: str | None,
    served: frozenset[str] = frozenset(),
) -> tuple[dict[str, Any], bool]:
    """The definition as stored and whether it is its id's first version."""
    if resource_type not in WRITABLE:
        why = f"only {', '.join(WRITABLE)} are written here"
        raise ApplyRefused(422, "not-supported", f"{resource_type} is not stored: {why}", "type")
    if not _ID.fullmatch(ident):
        raise ApplyRefused(400, "value", f"{ident!r} is not a FHIR id", "id")
    if not isinstance(body, dict) or body.get("resourceType") != resource_type:
        raise ApplyRefused(
            400, "invalid", f"the body must be a {resource_type} resource", "resourceType"
        )
    if body.get("id", ident) != ident:
        raise ApplyRefused(
            400, "invalid", f"the body's id {body.get('id')!r} is not the path's {ident!r}", "id"
        )
    resource: dict[str, Any] = {**body, "id": ident}
    wrong = problems(resource)
    if wrong:
        where, rule = wrong[0]
        raise ApplyRefused(
            400, "structure", f"{resource_type}{where}: {rule}", f"{resource_type}{where}"
        )
    if files.by_id(resource_type, ident) is not None:
        raise ApplyRefused(
            409,
            "conflict",
            f"{resource_type}/{ident} is defined by the service's definition files",
            "id",
        )
    if resource_type == "PlanDefinition" and ident in served:
        raise ApplyRefused(
            409,
            "conflict",
            f"PlanDefinition/{ident} is the id of a served CDS service, which a written plan "
            "may not stand in for",
            "id",
        )
    url, version = resource.get("url"), resource.get("version")
    for name, value, limit in (("url", url, 1000), ("version", version, 100)):
        if isinstance(value, str) and len(value) > limit:
            raise ApplyRefused(400, "too-long", f"{name} is longer than {limit} characters", name)
    if isinstance(url, str) and files.with_url(url):
        raise ApplyRefused(
            409,
            "conflict",
            f"{url} is a url of the service's definition files, which a write does not shadow",
            f"{resource_type}.url",
        )
    _check(resource, packaged)
    try:
        stored = store_definition(engine, resource, author=(author or "")[:200] or None)
    except VersionTaken:
        raise ApplyRefused(
            409, "conflict", f"{resource_type}/{ident} is being written by others: try again", "id"
        ) from None
    return stored, stored["meta"]["versionId"] == "1"


def _check(resource: Mapping[str, Any], packaged: PackagedTools) -> None:
    kind = resource["resourceType"]
    if kind == "ActivityDefinition":
        check_activity(resource)
    elif kind == "PlanDefinition":
        check_plan(resource)
        verify_conditions(resource, packaged, "PlanDefinition")


__all__ = ["WRITABLE", "WRITE_SCOPE", "author_of", "write_definition"]

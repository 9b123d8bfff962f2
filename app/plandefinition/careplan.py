"""``$apply``'s answer as base FHIR R4 shapes it, for clients written to it: a CarePlan.

The CPG-on-FHIR guide has ``$apply`` answer a Bundle, the RequestGroup first (what this service
answers by default, and always at ``$r5.apply``); base R4's OperationDefinition has it answer a
CarePlan. A call that sends ``returnCarePlan`` true gets the same content in that shape: a draft
proposal CarePlan for the subject (its encounter, author and ``instantiatesCanonical`` the
RequestGroup's), holding the RequestGroup and every resource of the Bundle as ``contained``
resources, its one ``activity`` the RequestGroup, its ``goal``s the Goals; each reference
between them made local (``#id``), so the CarePlan stands alone. Nothing is dropped: what the
Bundle carries, the CarePlan contains.
"""

from __future__ import annotations

import copy
from typing import Any

from app.fhir_validate import problems
from app.plandefinition.refusals import ApplyRefused

_CARRIED = ("subject", "encounter", "author", "instantiatesCanonical")


def _local(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with every reference to a resource of the Bundle made local."""
    if isinstance(value, dict):
        out = {k: _local(v, ids) for k, v in value.items()}
        ref = out.get("reference")
        if isinstance(ref, str) and ref in ids:
            out["reference"] = ids[ref]
        return out
    if isinstance(value, list):
        return [_local(v, ids) for v in value]
    return value


def care_plan(bundle: dict[str, Any]) -> dict[str, Any]:
    """The CarePlan holding the ``$apply`` Bundle ``bundle`` (its RequestGroup first)."""
    resources = [copy.deepcopy(e["resource"]) for e in bundle.get("entry") or ()]
    group = resources[0]
    ids = {f"{r['resourceType']}/{r['id']}": f"#{r['id']}" for r in resources}
    contained = [
        _local({k: v for k, v in r.items() if k != "meta"} | _meta(r), ids) for r in resources
    ]
    plan: dict[str, Any] = {
        "resourceType": "CarePlan",
        "id": group["id"],
        "contained": contained,
        "status": "draft",
        "intent": "proposal",
        **{k: _local(group[k], ids) for k in _CARRIED if k in group},
        "activity": [{"reference": {"reference": f"#{group['id']}"}}],
    }
    goals = [f"#{r['id']}" for r in resources if r["resourceType"] == "Goal"]
    if goals:
        plan["goal"] = [{"reference": g} for g in goals]
    wrong = problems(plan)
    if wrong:
        at, rule = wrong[0]
        raise ApplyRefused(
            422, "invalid", f"the CarePlan built is not valid R4 at CarePlan{at}: {rule}"
        )
    return plan


def _meta(resource: dict[str, Any]) -> dict[str, Any]:
    """The ``meta`` a contained resource may keep: its profiles (no version or time: a
    contained resource has none of its own)."""
    profiles = (resource.get("meta") or {}).get("profile")
    return {"meta": {"profile": profiles}} if profiles else {}


def wants_care_plan(given: dict[str, Any]) -> bool:
    """Whether the call's ``returnCarePlan`` parameter asks for the CarePlan (a boolean: 400
    otherwise, naming it)."""
    value = given.get("returnCarePlan")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApplyRefused(400, "value", "returnCarePlan must be a valueBoolean", "returnCarePlan")
    return value


__all__ = ["care_plan", "wants_care_plan"]

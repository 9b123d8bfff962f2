"""FHIR payload checks with the ``fhir.resources`` R4B models.

A resource the service is about to read is validated first, so malformed data is a clear client
error naming the element (``prefetch.vitals.entry[0].resource.status``), never a crash deep in
hydration.
"""

from __future__ import annotations

from typing import Any

from fhir.resources.R4B import get_fhir_model_class
from pydantic import ValidationError

from app.cds.errors import Issue


def _join(where: str, loc: tuple[int | str, ...]) -> str:
    out = where
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


#: Issues reported per resource (a Bundle and its entries together), at most.
MAX_ISSUES = 5


def resource_issues(resource: Any, where: str) -> list[Issue]:
    """Problems with one FHIR R4 resource (a Bundle is checked with its entries).

    A Bundle's entry resources are validated each with its own model, the Bundle itself
    without them: the same checks, but the Bundle model's resolution of each entry's type (an
    import per entry) is skipped, which was a third of the validation of a search result."""
    if isinstance(resource, dict) and resource.get("resourceType") == "Bundle":
        return _bundle_issues(resource, where)[:MAX_ISSUES]
    return _issues(resource, where)


def _bundle_issues(bundle: dict[str, Any], where: str) -> list[Issue]:
    entries = bundle.get("entry")
    if not isinstance(entries, list):
        return _issues(bundle, where)
    shell_entries: list[Any] = []
    inner: list[tuple[int, dict[str, Any]]] = []
    for i, entry in enumerate(entries):
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if isinstance(resource, dict) and isinstance(resource.get("resourceType"), str):
            inner.append((i, resource))
            entry = {k: v for k, v in entry.items() if k != "resource"}
        shell_entries.append(entry)
    issues = _issues({**bundle, "entry": shell_entries}, where)
    for i, resource in inner:
        if len(issues) >= MAX_ISSUES:
            break
        issues.extend(resource_issues(resource, f"{where}.entry[{i}].resource"))
    return issues


def _issues(resource: Any, where: str) -> list[Issue]:
    if not isinstance(resource, dict) or not isinstance(resource.get("resourceType"), str):
        return [
            Issue(code="structure", diagnostics=f"{where} is not a FHIR resource", expression=where)
        ]
    rtype = resource["resourceType"]
    try:
        model = get_fhir_model_class(rtype)
    except (KeyError, ValueError):
        return [_unknown_type(where, rtype)]
    try:
        model.model_validate(resource)
    except KeyError:  # an entry or contained resource of a type the models do not know
        return unknown_types(resource, where) or [
            Issue(code="structure", diagnostics=f"{where}: not valid FHIR R4", expression=where)
        ]
    except RecursionError:
        return [
            Issue(code="structure", diagnostics=f"{where}: nested too deeply", expression=where)
        ]
    except ValidationError as exc:
        issues = []
        for err in exc.errors()[:MAX_ISSUES]:
            at = _join(where, tuple(err["loc"]))
            issues.append(
                Issue(
                    code="structure",
                    diagnostics=f"{at}: {err['msg']} (invalid FHIR R4 {rtype})",
                    expression=at,
                )
            )
        return issues
    except (ValueError, TypeError) as exc:
        return [Issue(code="structure", diagnostics=f"{where}: {exc}", expression=where)]
    return []


def _unknown_type(where: str, rtype: object) -> Issue:
    shown = rtype if not isinstance(rtype, str) or len(rtype) <= 64 else rtype[:64] + "…"
    return Issue(
        code="not-supported",
        diagnostics=f"{where}: unknown FHIR R4 resource type {shown!r}",
        expression=f"{where}.resourceType",
    )


def _known_type(rtype: str) -> bool:
    try:
        get_fhir_model_class(rtype)
    except (KeyError, ValueError):
        return False
    return True


def unknown_types(resource: Any, where: str) -> list[Issue]:
    """One issue per embedded resource (Bundle entry, contained, parameter) whose
    ``resourceType`` names no FHIR R4 resource: the models fail on them with a bare KeyError."""
    issues: list[Issue] = []
    stack: list[tuple[Any, str]] = [(resource, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            rtype = item.get("resourceType")
            if isinstance(rtype, str) and not _known_type(rtype):
                issues.append(_unknown_type(path, rtype))
            stack.extend((v, f"{path}.{k}") for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
    return issues


def bundle_resources(value: Any) -> list[dict[str, Any]]:
    """The resources of a Bundle, or the single resource itself."""
    if not isinstance(value, dict):
        return []
    if value.get("resourceType") == "Bundle":
        return [
            e["resource"]
            for e in value.get("entry") or []
            if isinstance(e, dict) and isinstance(e.get("resource"), dict)
        ]
    return [value]

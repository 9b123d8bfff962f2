"""FHIR payload checks: the compiled R4 shapes (:mod:`app.fhir_validate`) and the
``fhir.resources`` R4B models.

A resource the service is about to read is validated first, so malformed data never reaches
hydration: in the hook context (a draft order) it is a clear client error naming the element
(``context.draftOrders.entry[0].resource.status``); in prefetch it is a record the service could
not read (:func:`readable`), named with the element and the rule on every input it feeds.

A resource is refused when the compiled shapes refuse it: they hold R4's rules that the
models, reading JSON as pydantic input, let through (``"12"`` for a number, a ``status`` outside
its required value set), and they refuse everything the models refuse — held by a differential
test over mutants of every resource in the repository (``tests/cds/test_fhir_validate.py``). The
models run only on what the shapes refuse, for their wording, which is the one shown where they
refuse too; what only the shapes refuse is said in the shapes' own words.
"""

from __future__ import annotations

import re
from typing import Any

from fhir.resources.R4B import get_fhir_model_class
from pydantic import ValidationError

from app.cds.errors import Issue
from app.data_notes import Unreadable
from app.fhir_validate import problems
from app.ontology.model import humanise


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


def _split(bundle: dict[str, Any], entries: list[Any]) -> tuple[dict[str, Any], list[Any]]:
    """The Bundle without its entries' resources (what its own model checks), and the entries'
    resources in order (None where an entry holds none a resource model could check)."""
    shell_entries: list[Any] = []
    inner: list[Any] = []
    for entry in entries:
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if isinstance(resource, dict) and isinstance(resource.get("resourceType"), str):
            inner.append(resource)
            entry = {k: v for k, v in entry.items() if k != "resource"}
        else:
            inner.append(None)
        shell_entries.append(entry)
    return {**bundle, "entry": shell_entries}, inner


def _bundle_issues(bundle: dict[str, Any], where: str) -> list[Issue]:
    entries = bundle.get("entry")
    if not isinstance(entries, list):
        return _issues(bundle, where)
    shell, inner = _split(bundle, entries)
    issues = _issues(bundle, where, shell=shell)
    for i, resource in enumerate(inner):
        if resource is None:
            continue
        if len(issues) >= MAX_ISSUES:
            break
        issues.extend(resource_issues(resource, f"{where}.entry[{i}].resource"))
    return issues


def _issues(resource: Any, where: str, *, shell: dict[str, Any] | None = None) -> list[Issue]:
    """Problems with ``resource``; with ``shell`` (a Bundle without its entries' resources) the
    Bundle's own elements only."""
    if not isinstance(resource, dict) or not isinstance(resource.get("resourceType"), str):
        return [
            Issue(code="structure", diagnostics=f"{where} is not a FHIR resource", expression=where)
        ]
    rtype = resource["resourceType"]
    try:
        model = get_fhir_model_class(rtype)
    except (KeyError, ValueError):
        return [_unknown_type(where, rtype)]
    found = problems(resource, outer=shell is not None)
    if not found:  # what the shapes accept, the models accept (the differential test)
        return []
    # refused: the models' wording where they refuse too, else the shapes' own
    floor = _model_issues(model, shell if shell is not None else resource, where, rtype)
    if floor:
        return floor
    return [
        Issue(
            code="structure",
            diagnostics=f"{where}{at}: {why} (invalid FHIR R4 {rtype})",
            expression=f"{where}{at}",
        )
        for at, why in found
    ]


def _model_issues(model: Any, resource: dict[str, Any], where: str, rtype: str) -> list[Issue]:
    """What the ``fhir.resources`` model of ``rtype`` refuses in ``resource``, in its words."""
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


def readable(value: Any, where: str) -> tuple[Any, list[Unreadable]]:
    """``value`` (a prefetch key's resource or Bundle) without the resources that are not valid
    FHIR R4, and those resources, each with the element and the rule it breaks. A resource that
    fails is a record the service could not read, not a reason to refuse the whole call; a
    Bundle whose own elements fail (or a key that is no resource) is unreadable whole (None)."""
    if isinstance(value, dict) and value.get("resourceType") == "Bundle":
        entries = value.get("entry")
        if isinstance(entries, list):
            shell, inner = _split(value, entries)
            if not _issues(value, where, shell=shell):
                kept: list[Any] = []
                bad: list[Unreadable] = []
                for i, (entry, resource) in enumerate(zip(entries, inner, strict=True)):
                    at = f"{where}.entry[{i}].resource"
                    found = _issues(resource, at) if resource is not None else []
                    if found:
                        bad.append(_unreadable(resource, found, at))
                    else:
                        kept.append(entry)
                return ({**value, "entry": kept} if bad else value), bad
    problems = _issues(value, where)
    if not problems:
        return value, []
    return None, [_unreadable(value, problems, where)]


def _unreadable(resource: Any, issues: list[Issue], where: str) -> Unreadable:
    rtype = resource.get("resourceType") if isinstance(resource, dict) else None
    rid = resource.get("id") if isinstance(resource, dict) else None
    first = issues[0].expression or where
    reference = f"{rtype}/{rid}" if isinstance(rtype, str) and isinstance(rid, str) else first
    why = "; ".join(_said(i, where) for i in issues[:3])
    known = rtype if isinstance(rtype, str) and _known_type(rtype) else ""
    return Unreadable(reference=reference, resource_type=known, why=why)


def _said(issue: Issue, where: str) -> str:
    """An issue about a resource at ``where`` as "element: rule" (the element relative to it)."""
    message = issue.diagnostics.split(": ", 1)[-1].removesuffix(")").split(" (invalid FHIR")[0]
    at = (issue.expression or "").removeprefix(where).lstrip(".")
    words = " ".join(humanise(p).lower() for p in re.split(r"[.\[\]0-9]+", at) if p)
    return f"{words}: {message}" if words else message


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

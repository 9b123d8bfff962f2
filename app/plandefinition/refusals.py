"""What a ``$apply`` call or a definition write cannot be answered with, said as FHIR says it:
the refusal (its HTTP status, the issue code and the element it names) and the
OperationOutcome it becomes; and a ``$apply`` call's ``Parameters`` read by name.

A leaf module: the card renderer applies ActivityDefinitions too, and imports from here
without the ``$apply`` routes' own dependencies."""

from __future__ import annotations

from typing import Any


class ApplyRefused(ValueError):
    """A request ``$apply`` cannot answer: the HTTP status, the issue code and the element."""

    def __init__(self, status: int, code: str, message: str, expression: str | None = None):
        super().__init__(message)
        self.status, self.code, self.expression = status, code, expression


def outcome(error: ApplyRefused) -> dict[str, Any]:
    issue: dict[str, Any] = {"severity": "error", "code": error.code, "diagnostics": str(error)}
    if error.expression:
        issue["expression"] = [error.expression]
    return {"resourceType": "OperationOutcome", "issue": [issue]}


def parameters(body: Any) -> dict[str, Any]:
    """The ``Parameters`` of a ``$apply`` call by name (each name once, as ``$apply`` has
    them), each parameter's value or resource."""
    if not isinstance(body, dict) or body.get("resourceType") != "Parameters":
        raise ApplyRefused(400, "structure", "the body must be a FHIR Parameters resource")
    out: dict[str, Any] = {}
    given = body.get("parameter") or []
    if not isinstance(given, list):
        raise ApplyRefused(400, "structure", "parameter must be a list", "parameter")
    for i, p in enumerate(given):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise ApplyRefused(400, "structure", "a parameter needs a name", f"parameter[{i}]")
        value = p.get("resource")
        if value is None:
            value = next((v for k, v in p.items() if k.startswith("value")), None)
        out[p["name"]] = value
    return out


__all__ = ["ApplyRefused", "outcome", "parameters"]

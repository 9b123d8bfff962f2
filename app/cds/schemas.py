"""OpenAPI descriptions of the CDS Hooks bodies (documentation and contract tests only)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.cds.requests import FeedbackBody, HookRequestBody
from app.cds_vocabulary import ActionType, Indicator, LinkType, SelectionBehavior
from app.ontology.card_text import SUMMARY_MAX_LENGTH


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ServiceEntry(_Open):
    hook: str
    title: str | None = None
    description: str
    id: str
    prefetch: dict[str, str] | None = None
    usageRequirements: str | None = None


class Discovery(_Open):
    services: list[ServiceEntry]


class Coding(_Open):
    system: str | None = None
    code: str
    display: str | None = None


class Source(_Open):
    label: str
    url: str | None = None
    topic: Coding | None = None


class Action(_Open):
    type: ActionType
    description: str
    resource: dict[str, Any] | None = None
    resourceId: str | list[str] | None = None


class Suggestion(_Open):
    label: str
    uuid: str | None = None
    actions: list[Action] | None = None


class Link(_Open):
    label: str
    url: str
    type: LinkType


class Card(_Open):
    uuid: str | None = None
    summary: str = Field(max_length=SUMMARY_MAX_LENGTH)
    detail: str | None = None
    indicator: Indicator
    source: Source
    suggestions: list[Suggestion] | None = None
    selectionBehavior: SelectionBehavior | None = None
    links: list[Link] | None = None
    #: ``dev.horismos.card``: the draft orders the card is about, its short line
    extension: dict[str, Any] | None = None


class CdsResponse(_Open):
    cards: list[Card]
    systemActions: list[Action] | None = None
    #: ``dev.horismos.run`` (a RunExtension) from a service, ``dev.horismos.runs`` (one per
    #: service it combines) from a combined service
    extension: dict[str, Any] | None = None


class OperationOutcomeIssue(_Open):
    severity: str
    code: str
    diagnostics: str | None = None
    expression: list[str] | None = None


class OperationOutcome(_Open):
    resourceType: Literal["OperationOutcome"]
    issue: list[OperationOutcomeIssue]


class FeedbackResult(BaseModel):
    stored: int
    duplicates: int


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON Schema with its ``$defs`` substituted in place (for ``openapi_extra``)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(dict(defs[ref.split("/")[-1]]))
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out: dict[str, Any] = walk(schema)
    return out


def request_body(model: type[BaseModel]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inline(model.model_json_schema())}},
        }
    }


HOOK_REQUEST_BODY = request_body(HookRequestBody)
FEEDBACK_REQUEST_BODY = request_body(FeedbackBody)


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    meaning = {
        400: "The request breaks CDS Hooks 2.0 or carries invalid FHIR (the issue names it)",
        401: "Client JWT required and missing or not valid",
        404: "No such CDS service",
        409: "hookInstance reused with a different body, or still being answered",
        412: "Prefetch data could not be obtained (the issue names the key and why)",
        413: "The request body is larger than the service accepts",
        415: "The body is not sent as application/json",
        500: "The run failed after it was claimed; it is recorded as failed",
        503: "The decision could not be recorded, the database is unavailable, or the call "
        "passed its deadline: no decision; retry the same hookInstance after Retry-After",
    }
    return {c: {"model": OperationOutcome, "description": meaning[c]} for c in codes}

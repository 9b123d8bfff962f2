"""The typed envelope of a proposed change, and what a stored change looks like to its readers.

A proposal is data, never an instruction: a target deployment, the digest of the version it was
written against, the new text of some of that deployment's files, who wrote it and why. The same
envelope comes from ``horismos change propose``, ``POST /changes`` and a model drafting one from
clinicians' feedback (``horismos change draft``); all of them go through the same policy.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: The largest file text a proposal may carry, in characters.
MAX_FILE_CHARS = 5_000_000


class ChangedFile(BaseModel):
    """One file of the deployment with its new text; ``path`` is relative to the deployment's
    folder (``triage.ttl``, ``valuesets/opioids.json``)."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=500)
    content: str = Field(max_length=MAX_FILE_CHARS)


class ChangeEnvelope(BaseModel):
    """A proposed change to one deployment."""

    model_config = ConfigDict(extra="forbid")

    deployment: str = Field(min_length=1, max_length=1000, description="Deployment id or IRI")
    baseDigest: str = Field(
        min_length=1, max_length=100, description="Digest of the active version it changes"
    )
    files: list[ChangedFile] = Field(min_length=1, max_length=200)
    author: str = Field(min_length=1, max_length=200)
    rationale: str = Field(default="", max_length=20_000)


#: The JSON Schema a model fills when it drafts a change (``horismos change draft``).
DRAFT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "files": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A file of the deployment"},
                    "content": {"type": "string", "description": "The file's whole new text"},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        },
        "rationale": {"type": "string", "description": "Why, citing the override reasons"},
    },
    "required": ["files", "rationale"],
    "additionalProperties": False,
}


class ChangeEventView(BaseModel):
    state: str
    actor: str
    at: datetime
    detail: dict[str, Any] | None = None


class ChangeView(BaseModel):
    """A stored change as the API, the CLI and the change page show it."""

    id: str
    status: str
    deployment: str
    deploymentId: str
    baseDigest: str
    baseVersion: str | None
    candidateDigest: str | None
    candidateVersion: str | None
    author: str
    rationale: str
    origin: str
    files: list[str]
    reason: str | None = Field(default=None, description="Why the last step was refused")
    policy: dict[str, Any] | None = None
    replay: dict[str, Any] | None = None
    changed: list[dict[str, Any]] | None = Field(
        default=None, description="After a replay: every decision that changes"
    )
    replaces: str | None = None
    shadow: dict[str, Any] | None = None
    events: list[ChangeEventView] = Field(default_factory=list)
    createdAt: datetime
    updatedAt: datetime


__all__ = [
    "DRAFT_SCHEMA",
    "ChangeEnvelope",
    "ChangeEventView",
    "ChangeView",
    "ChangedFile",
]

"""What a ``horis:Create`` commit sends: the resource its template renders, or the request its
ActivityDefinition defines (built as ``$apply`` builds it, ``instantiatesCanonical`` set, the
tool's arguments read as ``%name``), with an identifier that makes the create idempotent.

The identifier is derived from the run and the effect (``urn:uuid:`` + a UUID5 of both), so every
attempt of one run's write — a retry after a lost answer, a retried tool call — asks the server
for the same thing: ``If-None-Exist: identifier=<system>|<value>`` makes it create the resource
once and answer later attempts with the one it holds, and reconciliation settles a lost answer by
searching for that identifier. A retried hook call with the same ``hookInstance`` is the same run
and never reaches the adapter again (its stored answer is returned).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fhir.resources.R4B import get_fhir_model_class
from pydantic import ValidationError

from adapters.fhir.writes import IDENTIFIER_SYSTEM
from app.ontology.model import AdapterCommit, Individual, Ontology
from app.ontology.templates import render
from app.plandefinition.declared import call_refs, created_request

_NAMESPACE = uuid.UUID("6f1b2a52-7d3e-5c1a-9a0e-3c5d8b1f4e27")


def identifier_for(run_id: str, effect_id: str) -> dict[str, str]:
    """The identifier every attempt of this run's create carries."""
    value = uuid.uuid5(_NAMESPACE, f"{run_id}/{effect_id}")
    return {"system": IDENTIFIER_SYSTEM, "value": f"urn:uuid:{value}"}


def search_token(identifier: Mapping[str, str]) -> str:
    """``system|value``: the token search for the identifier."""
    return f"{identifier['system']}|{identifier['value']}"


def _path(value: Any, parts: list[str]) -> list[Any]:
    """The values at a dotted path, lists flattened, a Bundle read as its resources."""
    found: list[Any] = []
    if isinstance(value, list):
        for item in value:
            found.extend(_path(item, parts))
        return found
    if isinstance(value, Mapping) and value.get("resourceType") == "Bundle":
        entries = [e.get("resource") for e in value.get("entry") or [] if isinstance(e, Mapping)]
        return _path([r for r in entries if isinstance(r, Mapping)], parts)
    if not parts:
        return [value] if value is not None else []
    if isinstance(value, Mapping):
        return _path(value.get(parts[0]), parts[1:])
    return []


def render_resource(
    ontology: Ontology,
    commit: AdapterCommit,
    args: Mapping[str, Any],
    *,
    run_id: str,
    run_url: str | None,
    now: datetime | None,
    context: Mapping[str, Any],
    prefetch: Mapping[str, Any],
    resources: Mapping[str, Mapping[str, Any]],
    identifier: Mapping[str, str],
) -> dict[str, Any]:
    """The resource to POST: the template rendered (or the ActivityDefinition applied:
    :class:`NotBuilt` when it cannot be for this call), its type set, the identifier
    appended."""

    def lookup(name: str) -> Any:
        kind, _, rest = name.partition(".")
        if kind == "arg":
            return args.get(rest)
        if kind == "label":
            value = args.get(rest)
            individual = _individual(ontology, value) if isinstance(value, str) else None
            return (individual.label or individual.name) if individual is not None else value
        if kind == "context":
            value = context.get(rest)
            return value if isinstance(value, str | int | float) else None
        if name == "run.id":
            return run_id
        if name == "run.url":
            return run_url
        if name == "now":
            return now.isoformat() if now is not None else None
        if kind == "references":
            return [{"reference": ref} for ref in resources if ref.split("/")[0] == rest]
        if kind == "prefetch":
            key, *parts = rest.split(".")
            return _path(prefetch.get(key), parts)
        return None

    if commit.activity is not None:
        made, why = created_request(
            commit.activity,
            refs=call_refs(context),
            resources=resources,
            now=now,
            params=args,
        )
        if made is None:
            raise NotBuilt(f"the {commit.resource_type} its ActivityDefinition defines: {why}")
        body = made
    else:
        body = render(commit.template or "{}", lookup)
    body["resourceType"] = commit.resource_type
    body.pop("id", None)
    body.pop("meta", None)
    existing = body.get("identifier")
    body["identifier"] = [*(existing if isinstance(existing, list) else []), dict(identifier)]
    return body


class NotBuilt(ValueError):
    """A create whose ActivityDefinition cannot be built for this call: nothing is sent."""


def _individual(ontology: Ontology, value: str) -> Individual | None:
    found = ontology.individuals.get(value)
    if found is not None:
        return found
    named = [i for i in ontology.individuals.values() if i.name == value]
    return named[0] if len(named) == 1 else None


def invalid(resource: Mapping[str, Any]) -> str | None:
    """Why the rendered resource is not valid FHIR (R4B models), or None: nothing invalid is
    sent, whatever the template or the arguments made of it."""
    try:
        model = get_fhir_model_class(str(resource.get("resourceType")))
    except KeyError:
        return f"{resource.get('resourceType')!r} is not a FHIR resource type"
    try:
        model.model_validate(dict(resource))
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        return (
            f"the {resource.get('resourceType')} to create is not valid FHIR: {at}: {first['msg']}"
        )
    except (ValueError, TypeError) as exc:
        return f"the {resource.get('resourceType')} to create is not valid FHIR: {exc}"
    return None

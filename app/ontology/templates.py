"""Resource templates of ``horis:Create`` commits: JSON with ``{{…}}`` placeholders.

A template is a JSON object (the resource to create); any string in it may hold placeholders::

    "subject": {"reference": "Patient/{{context.patientId}}"},
    "recipient": "{{references.CareTeam ?? prefetch.encounter.participant.individual}}",
    "payload": [{"contentString": "Needs review: {{arg.reason}}"}]

- A string that is exactly one placeholder becomes the placeholder's value as JSON (text,
  number, list or object). Names that find several values (``references.…``, ``prefetch.…``)
  give a list: inside a JSON list its items are spliced in (write ``"recipient":
  ["{{references.CareTeam}}"]`` for a repeating element); as an object member a one-item list
  is that item. Embedded in longer text, a value is written as text.
- ``a ?? b`` takes the first of its names that has a value.
- A placeholder without a value (an argument the graph did not hold, a context field the hook
  did not send, a resource the hook did not read) removes the string that holds it, and then
  every object or list left empty: FHIR has no empty elements, and nothing is made up.

Names (what the adapter can know at the time of the write, nothing else):

========================  ================================================================
``arg.NAME``              the tool's argument ``NAME`` as the runtime passes it
``label.NAME``            the ``rdfs:label`` of the individual argument ``NAME`` names
``context.KEY``           the hook's ``context.KEY`` (``patientId``, ``encounterId``, …)
``run.id``, ``run.url``   the run's id; the link to its decision record
``now``                   the run's time
``references.TYPE``       ``[{"reference": "TYPE/id"}, …]`` for each resource of ``TYPE``
                          the hook read
``prefetch.KEY.a.b``      the values at ``a.b`` of the hook's prefetch ``KEY`` (lists are
                          flattened; a Bundle's entries are its resources)
========================  ================================================================

Pure: parsing, checking and rendering only; the adapter supplies the values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

_TOKEN = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
_NAME = re.compile(
    r"^(?:(?:arg|label)\.[A-Za-z_][A-Za-z0-9_-]*"
    r"|context\.[A-Za-z_][A-Za-z0-9_]*"
    r"|run\.(?:id|url)"
    r"|now"
    r"|references\.[A-Z][A-Za-z]+"
    r"|prefetch\.[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)$"
)

#: Looks a placeholder name up; None (or an empty list) means "no value".
Lookup = Callable[[str], Any]


def parse(template: str) -> dict[str, Any]:
    """The template as a JSON object (``ValueError`` when it is not one)."""
    body = json.loads(template)
    if not isinstance(body, dict):
        raise ValueError("a template must be a JSON object (the resource to create)")
    return body


def names(template: str) -> list[str]:
    """Every placeholder name the template uses, in order, alternatives split."""
    out: list[str] = []
    for text in _strings(parse(template)):
        for token in _TOKEN.findall(text):
            out.extend(part.strip() for part in token.split("??"))
    return out


def template_args(template: str) -> list[str]:
    """The tool arguments the template reads (``arg.NAME`` and ``label.NAME``), in order."""
    try:
        used = names(template)
    except ValueError:
        return []
    found = [n.split(".", 1)[1] for n in used if n.startswith(("arg.", "label."))]
    return list(dict.fromkeys(found))


def template_problem(template: str, resource_type: str) -> str | None:
    """Why ``template`` cannot be the body of a ``resource_type`` create, or None."""
    try:
        body = parse(template)
    except ValueError as exc:
        return f"horis:template is not a JSON object: {exc}"
    declared = body.get("resourceType")
    if declared is not None and declared != resource_type:
        return f'horis:template is a {declared}, but horis:resourceType is "{resource_type}"'
    unknown = [n for n in names(template) if not _NAME.match(n)]
    if unknown:
        return (
            f"horis:template uses unknown placeholder(s) {unknown}; known: arg.NAME, label.NAME, "
            "context.KEY, run.id, run.url, now, references.TYPE, prefetch.KEY.path"
        )
    return None


def render(template: str, lookup: Lookup) -> dict[str, Any]:
    """The resource: every placeholder filled through ``lookup``, valueless parts removed."""
    rendered = _render(parse(template), lookup)
    return rendered if isinstance(rendered, dict) else {}


_MISSING = object()


def _value(token: str, lookup: Lookup) -> Any:
    for name in (part.strip() for part in token.split("??")):
        value = lookup(name)
        if value is not None and value != [] and value != "":
            return value
    return _MISSING


def _render(node: Any, lookup: Lookup) -> Any:
    if isinstance(node, dict):
        out = {k: v for k, v in ((k, _render(v, lookup)) for k, v in node.items())}
        kept = {k: v for k, v in out.items() if v is not _MISSING}
        return kept if kept else _MISSING
    if isinstance(node, list):
        items: list[Any] = []
        for item in node:
            whole = _TOKEN.fullmatch(item) if isinstance(item, str) else None
            value = _value(whole.group(1), lookup) if whole else _render(item, lookup)
            if value is _MISSING:
                continue
            if whole and isinstance(value, list):
                items.extend(value)
            else:
                items.append(value)
        return items if items else _MISSING
    if isinstance(node, str):
        whole = _TOKEN.fullmatch(node)
        if whole is not None:
            value = _value(whole.group(1), lookup)
            return value[0] if isinstance(value, list) and len(value) == 1 else value
        missing = False

        def fill(match: re.Match[str]) -> str:
            nonlocal missing
            value = _value(match.group(1), lookup)
            if value is _MISSING:
                missing = True
                return ""
            if isinstance(value, list) and len(value) == 1:
                value = value[0]
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

        text = _TOKEN.sub(fill, node)
        return _MISSING if missing else text
    return node


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node

"""What a clinician reads: a proof as labelled statements, values with their units, dates in the
service's time zone — as CommonMark for a card's ``detail`` and as items the run page renders.

Everything comes from a stored proof JSON (``Proof.to_json()``): the labels, value texts, UCUM
units and rule labels the proof builder put there. A proof stored before it carried them is read
with humanised local names instead. No engine notation reaches the reader: no IRIs, no
``isA``, no CamelCase rule names, no UCUM codes (docs/cards.md, "Glossary").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from functools import cache
from importlib import resources
from typing import Any, Literal, Protocol

from app.fhir_time import parse_datetime
from app.ontology.card_text import markdown_escape
from app.ontology.model import humanise, local_name
from app.ucum import display as unit_display

__all__ = [
    "Item",
    "code_text",
    "deciding_facts",
    "format_time",
    "proof_items",
    "proof_markdown",
    "proof_rules",
    "source_text",
]

ItemKind = Literal["decided", "fact", "also", "absent", "ranked", "unassigned"]

#: How each provenance reads on a base fact that has no FHIR source to name.
_PROVENANCE = {
    "api": "from the request",
    "perception": "read from free text by a language model",
    "tool": "from a tool",
    "human": "entered by a person",
    "rule": "derived",
}


@dataclass
class Item:
    """One statement of a proof, with the statements beneath it."""

    text: str
    kind: ItemKind
    #: the criterion a derived statement rests on, or where a base statement came from
    detail: str = ""
    children: list[Item] = field(default_factory=list)
    #: the stored proof node (a fact), for the page's base-facts table
    node: Mapping[str, Any] | None = None


# --- times --------------------------------------------------------------------------------


def _parse(value: str) -> datetime | date | None:
    text = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return date.fromisoformat(text)
    return parse_datetime(text)


def format_time(value: Any, zone: tzinfo = UTC) -> str:
    """A FHIR date, dateTime or instant for a reader: ``30 Nov 2026 10:05 CET`` in ``zone``
    (the zone named), a date alone as ``30 Nov 2026``; text that is neither, verbatim. An
    instant whose day in ``zone`` lies outside the calendar (``0001-01-01T00:00+01:00`` is in
    year 0 in UTC, a common "unknown" sentinel) is shown as written, its own offset named."""
    if isinstance(value, datetime):
        parsed: datetime | date | None = value
    elif isinstance(value, str):
        parsed = _parse(value)
    else:
        return "" if value is None else str(value)
    if parsed is None:
        return str(value)
    if not isinstance(parsed, datetime):
        return _day_text(parsed)
    if parsed.tzinfo is None:  # a local time with no offset: shown as given
        return f"{_day_text(parsed)} {parsed:%H:%M}"
    try:
        local = parsed.astimezone(zone)
    except OverflowError:
        local, zone = parsed, parsed.tzinfo
    return f"{_day_text(local)} {local:%H:%M} {local.tzname() or zone}"


def _day_text(day: date) -> str:
    """``30 Nov 2026``; the year in four digits (``1 Jan 0001``, not ``1 Jan 1``)."""
    return f"{day.day} {day:%b} {day.year:04d}"


# --- statements -----------------------------------------------------------------------------


def _value_text(node: Mapping[str, Any], zone: tzinfo) -> str:
    text = node.get("valueText")
    if text is None:  # stored before proofs carried clinical text
        value = node.get("value")
        text = humanise(str(value)) if node.get("valueIri") else _plain(value)
    text = code_text(str(text))
    if _DATE.match(text):
        text = format_time(text, zone)
    unit = node.get("unit")
    shown = unit_display(unit) if isinstance(unit, str) and unit else ""
    return f"{text} {shown}" if shown else str(text)


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else str(value)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(T[0-9:.]+(Z|[+-]\d{2}:\d{2})?)?$")
_CODING = re.compile(r"^([a-z][a-z0-9+.\-]*:\S*)\|(\S+)$")


@cache
def _code_systems() -> dict[str, str]:
    text = resources.files("app.ontology").joinpath("code_systems.json").read_text("utf-8")
    return dict(json.loads(text)["systems"])


def system_name(system: str) -> str | None:
    """A code system as readers name it (``RxNorm``, ``SNOMED CT``), if it has such a name."""
    return _code_systems().get(system)


def code_text(value: str) -> str:
    """A coding kept as ``system|code`` as a reader names it: ``RxNorm 1049621`` for a
    terminology with a name, the bare code otherwise (``community``); other text unchanged."""
    found = _CODING.match(value)
    if found is None:
        return value
    system, code = found.groups()
    name = _code_systems().get(system)
    return f"{name} {code}" if name else code


def statement(node: Mapping[str, Any], zone: tzinfo = UTC) -> str:
    """``Heart rate: 160 /min``; ``Chest pain (onset): …`` for a fact about another subject."""
    name = node.get("name") or humanise(str(node.get("propertyIri") or node.get("property")))
    about = node.get("about")
    who = f" ({about})" if about else ""
    return f"{_capital(str(name))}{who}: {_value_text(node, zone)}"


def _capital(text: str) -> str:
    """``heart rate`` → ``Heart rate``; a label that starts as an abbreviation (``eGFR``) is
    left as written."""
    if len(text) > 1 and text[1].isupper():
        return text
    return text[:1].upper() + text[1:]


def source_text(node: Mapping[str, Any], zone: tzinfo = UTC) -> str:
    """Where a base statement came from: ``Observation, 30 Nov 2026 10:05 UTC``."""
    provenance = str(node.get("provenance") or "")
    source = node.get("source")
    parts: list[str] = []
    if isinstance(source, Mapping):
        if provenance != "api":
            parts.append(_PROVENANCE.get(provenance, provenance))
        parts.append(humanise(str(source.get("resourceType"))))
        if source.get("date"):
            parts.append(format_time(source["date"], zone))
        elif source.get("lastUpdated"):
            parts.append(f"updated {format_time(source['lastUpdated'], zone)}")
    else:
        parts.append(_PROVENANCE.get(provenance, provenance))
    confidence = node.get("confidence")
    if isinstance(confidence, int | float):
        parts.append(f"confidence {confidence:g}")
    return ", ".join(p for p in parts if p)


def _rule_label(derivation: Mapping[str, Any]) -> str:
    label = derivation.get("ruleLabel") or humanise(str(derivation.get("ruleName") or ""))
    return _capital(str(label))


def _body(derivation: Mapping[str, Any], zone: tzinfo) -> list[Item]:
    items = [_fact(p, zone) for p in derivation.get("premises") or [] if isinstance(p, Mapping)]
    for a in derivation.get("absent") or []:
        what = " → ".join(humanise(p) for p in a.get("path") or [])
        items.append(Item(str(a.get("text") or f"{what}: none on record"), "absent"))
    return items


def _fact(node: Mapping[str, Any], zone: tzinfo, root: bool = False) -> Item:
    derivations = [d for d in node.get("derivations") or [] if isinstance(d, Mapping)]
    if not derivations:
        return Item(statement(node, zone), "fact", source_text(node, zone), node=node)
    first = derivations[0]
    item = Item(
        statement(node, zone),
        "decided" if root else "fact",
        f"criterion met: {_rule_label(first)}",
        _body(first, zone),
        node=node,
    )
    for d in derivations[1:]:
        also = Item(f"Also met: {_rule_label(d)}", "also")
        if d.get("expanded"):
            also.children.extend(_body(d, zone))
        item.children.append(also)
    for o in node.get("overruled") or []:
        value = o.get("valueText") or humanise(str(o.get("value")))
        rules = o.get("ruleLabels") or [humanise(str(r)) for r in o.get("rules") or []]
        named = "; ".join(_capital(str(r)) for r in rules)
        which = "criteria" if len(rules) > 1 else "criterion"
        item.children.append(
            Item(f"Also met, ranked lower: {value}", "ranked", f"{which}: {named}")
        )
    return item


def proof_items(proof: Mapping[str, Any], zone: tzinfo = UTC) -> list[Item]:
    """The stored proof as statements: the decided value first, what it rests on beneath."""
    values = [v for v in proof.get("values") or [] if isinstance(v, Mapping)]
    if not values:
        name = humanise(str(proof.get("propertyIri") or proof.get("property") or ""))
        return [Item(f"{name}: not decided", "unassigned")]
    return [_fact(v, zone, root=True) for v in values]


class ProofLine(Protocol):
    """A line of a rendered proof: the stored proof node it shows (if any) and the lines beneath
    it. :class:`Item` is one; so is the run page's engine-notation line."""

    @property
    def node(self) -> Mapping[str, Any] | None: ...

    @property
    def children(self) -> Sequence[ProofLine]: ...


def base_facts(items: Iterable[ProofLine]) -> list[Mapping[str, Any]]:
    """The data a proof rests on (its leaves that were read, not derived), in tree order, each
    once (``Proof.base_facts``, from the stored JSON)."""
    seen: set[tuple[str, str, str]] = set()
    out: list[Mapping[str, Any]] = []

    def walk(level: Iterable[ProofLine]) -> None:
        for item in level:
            node = item.node
            read = node is not None and node.get("provenance") != "rule"
            if node is not None and read and not node.get("derivations"):
                key = (str(node.get("subject")), str(node.get("propertyIri")), str(node["value"]))
                if key not in seen:
                    seen.add(key)
                    out.append(node)
            walk(item.children)

    walk(items)
    return out


# --- CommonMark -----------------------------------------------------------------------------


def _md_lines(items: Sequence[Item], depth: int, out: list[str]) -> None:
    pad = "  " * depth
    for item in items:
        text = markdown_escape(item.text)
        if item.kind == "decided":
            text = f"**{text}**"
        elif item.kind in ("absent", "ranked", "also"):
            text = f"*{text}*"
        if item.detail:
            text += f" — {markdown_escape(item.detail)}"
        out.append(f"{pad}- {text}")
        _md_lines(item.children, depth + 1, out)


def proof_markdown(proof: Mapping[str, Any], zone: tzinfo = UTC) -> str:
    """The proof as a nested CommonMark list: each statement with the criterion or the source
    (and its date) it rests on, what it rests on indented beneath it."""
    out: list[str] = []
    _md_lines(proof_items(proof, zone), 0, out)
    return "\n".join(out)


def _lower(text: str) -> str:
    """``Heart rate: 130 /min`` → ``heart rate 130 /min`` (a label that starts as an
    abbreviation, ``eGFR``, is left as written)."""
    name, sep, value = text.partition(": ")
    if len(name) > 1 and not name[1].isupper():
        name = name[:1].lower() + name[1:]
    return f"{name} {value}" if sep else name


def deciding_facts(proof: Mapping[str, Any], zone: tzinfo = UTC, limit: int = 3) -> str:
    """What decided the proof's value, in a sentence a clinician reads at a glance: the
    criterion met, then up to ``limit`` of the data it rests on directly, each with its unit and
    its date (``Systolic blood pressure below 90 mmHg: systolic blood pressure 85 mmHg, 2 Dec
    2026 04:53 UTC``). A bare code is not a fact a clinician names: coded values are left to the
    decision record. Empty when nothing was decided."""
    values = [v for v in proof.get("values") or [] if isinstance(v, Mapping)]
    if not values:
        return ""
    derivations = [d for d in values[0].get("derivations") or [] if isinstance(d, Mapping)]
    if not derivations:
        return statement(values[0], zone)
    first = derivations[0]
    facts: list[str] = []
    for premise in first.get("premises") or []:
        if not isinstance(premise, Mapping):
            continue
        shown = _value_text(premise, zone)
        if _CODING.match(str(premise.get("valueText") or "")) or shown != code_text(shown):
            continue
        if re.fullmatch(r"[A-Za-z ]+ \d+", shown) and system_name_of(shown):
            continue  # ``RxNorm 197696``: a code, not what a clinician names
        text = _lower(statement(premise, zone))
        source = premise.get("source")
        if not premise.get("derivations") and isinstance(source, Mapping) and source.get("date"):
            text += f", {format_time(source['date'], zone)}"
        if text not in facts:
            facts.append(text)
    criterion = _rule_label(first)
    shown_facts = facts[:limit]
    return f"{criterion}: {'; '.join(shown_facts)}" if shown_facts else criterion


def system_name_of(text: str) -> bool:
    """Whether ``text`` is ``<named code system> <code>`` (``SNOMED CT 5602001``)."""
    names = set(_code_systems().values())
    return any(text.startswith(f"{n} ") for n in names)


def proof_rules(proof: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Every rule (IRI) the proof names as a criterion met, at any depth, each once in the order
    first met (a node's derivations before their premises'); the rules that were overruled are
    not among them."""
    found: dict[str, None] = {}
    stack: list[Any] = list(reversed((proof or {}).get("values") or []))
    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        for derivation in node.get("derivations") or []:
            if not isinstance(derivation, Mapping):
                continue
            if derivation.get("rule"):
                found.setdefault(str(derivation["rule"]), None)
            stack.extend(reversed(derivation.get("premises") or []))
    return tuple(found)


def property_name(iri: str, names: Mapping[str, str] | None = None) -> str:
    """A property's label from ``names`` (IRI → label), else its humanised local name."""
    found = (names or {}).get(iri)
    return str(found) if found else humanise(local_name(iri))

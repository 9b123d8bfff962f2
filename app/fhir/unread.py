"""Records that are there but cannot be read: why, in a clinician's words.

A record a mapping selects is either read into facts or *unread*, never taken for a record that
is not there. Two questions decide it here (hydration asks them, ``app.fhir.literals`` and
``app.fhir.objects``):

- **Its code** (:func:`code_verdict`). A record is read when one of its codings is one the
  deployment lists for the property (a class of the range tree, or any code it names for a
  string property). A record with no coding at all (text only) is unread. A record whose
  codings are all unlisted is *none of ours* only when one of them is of a code system the
  property declares ``horis:closedOver`` (its lists are complete there); otherwise it is unread
  — a product code where the deployment lists ingredients, an allergy coded in another system —
  unless one of them is in a value set the property declares ``horis:knownOutside`` (codes the
  deployment knows are none of its own: an opioid, to a check that has no rule about opioids).
- **The elements its filter reads** (:func:`filter_gap`). A ``horis:where`` that is not true
  only because an element it reads is missing (no ``clinicalStatus``, no ``category``) does not
  say the record is not one of ours: it is unread, unless the mapping declares that missing
  element ``horis:missingExcludes``. The filter is split into its top-level ``and`` parts; a
  part that is false on elements the record has is a real "no".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

from fhirpathpy.parser import parse as fhirpath_parse

from app.clinical_text import system_name as named_system
from app.fhir.reading import as_codings, evaluate
from app.ontology.model import FhirMapping, Ontology, PropertyDef, humanise

Verdict = Literal["read", "not-ours", "unread"]


def system_name(system: str) -> str:
    """A code system as a reader knows it: ``RxNorm``, ``SNOMED CT``; else its URI."""
    return named_system(system) or system or "no system"


def element_words(path: str) -> str:
    """An element path in words: ``clinicalStatus`` → ``clinical status``."""
    parts = [p for p in re.split(r"[.\[\]0-9]+", path) if p]
    return " ".join(humanise(p).lower() for p in parts) or path


def record_name(concepts: Iterable[Any]) -> str | None:
    """How the record names what it is: a concept's text, else a coding's display."""
    for concept in concepts:
        text = concept.get("text") if isinstance(concept, Mapping) else None
        if isinstance(text, str) and text.strip():
            return text.strip()
    for concept in concepts:
        for c in concept.get("coding") or [] if isinstance(concept, Mapping) else []:
            if isinstance(c, Mapping) and isinstance(c.get("display"), str) and c["display"]:
                return str(c["display"])
    return None


def code_verdict(
    o: Ontology,
    prop: PropertyDef,
    concepts: Sequence[Any],
    *,
    listed: frozenset[str] | None = None,
    canonical: Callable[[str], str] | None = None,
) -> tuple[Verdict, str]:
    """Whether a record coded with ``concepts`` (its code, a reaction's substance…) can be read
    for ``prop``, and if not why: read when one concept is coded with a listed code; else
    unread when one concept cannot be read (text only, or codes of a system ``prop`` is not
    closed over); else none of ours.

    ``listed`` are the codes that classify it (an object property's range tree); None means any
    code the deployment names (a string property tested against value sets)."""
    known = (lambda c: c in listed) if listed is not None else o.knows_code
    verdicts = [_concept_verdict(o, prop, concept, known, canonical) for concept in concepts]
    if any(v == "read" for v, _ in verdicts):
        return "read", ""
    unread = [why for v, why in verdicts if v == "unread"]
    if unread:
        return "unread", unread[0]
    if any(v == "not-ours" for v, _ in verdicts):
        return "not-ours", ""
    return "unread", "it has no code"


def outside_scope(
    o: Ontology,
    prop: PropertyDef,
    concepts: Sequence[Any],
    canonical: Callable[[str], str] | None = None,
) -> bool:
    """Whether a record coded with ``concepts`` is one ``prop`` declares outside its scope
    (``horis:knownOutside``): a draft order for such a drug is no instance at all, where a
    record merely none of ours may still be one the service acts on."""
    return bool(prop.known_outside) and any(
        o.known_outside(prop, c)
        for concept in concepts
        for c in (as_codings(concept, canonical) if concept else ())
        if isinstance(c, str)
    )


def _concept_verdict(
    o: Ontology,
    prop: PropertyDef,
    concept: Any,
    known: Callable[[str], bool],
    canonical: Callable[[str], str] | None,
) -> tuple[Verdict | None, str]:
    found = [c for c in as_codings(concept, canonical) if isinstance(c, str)] if concept else []
    if not found:
        return ("unread", "it has no code, only its text") if record_name([concept]) else (None, "")
    if any(known(c) for c in found):
        return "read", ""
    if prop.known_outside and any(o.known_outside(prop, c) for c in found):
        return "not-ours", ""
    systems = list(dict.fromkeys(c.split("|", 1)[0] for c in found))
    if any(s in prop.closed_over for s in systems):
        title = record_name([concept])
        listed = o.listed_brand_of(prop, title, found) if title else None
        if listed is not None:  # a brand of a listed product: maybe ours, never "none of ours"
            system, _, code = found[0].partition("|")
            return "unread", (
                f"{system_name(system)} code {code} is not one this service lists, though "
                f"{title} names a listed drug's ingredients ({listed})"
            )
        return "not-ours", ""
    named = [c for c in found if o.names_system(c.split("|", 1)[0])]
    if named:
        system, _, code = named[0].partition("|")
        return "unread", f"{system_name(system)} code {code} is not one this service lists"
    shown = " or ".join(system_name(s) for s in systems)
    return "unread", f"it is coded only in {shown}, which this service does not read"


# --- filters and missing elements ------------------------------------------------------------


_LOOSER = re.compile(r"\b(or|xor|implies)\b")


def _top_level(expression: str) -> str:
    """``expression`` with what stands inside parentheses, brackets and quotes blanked out."""
    out: list[str] = []
    depth, quote = 0, ""
    for ch in expression:
        if quote:
            quote = "" if ch == quote else quote
            out.append(" ")
        elif ch in "'`":
            quote = ch
            out.append(" ")
        elif ch in "([)]":
            depth += 1 if ch in "([" else -1
            out.append(" ")
        else:
            out.append(ch if depth == 0 else " ")
    return "".join(out)


def _split_and(expression: str) -> list[str]:
    """The top-level ``and`` parts of a FHIRPath expression (outside parentheses and quotes);
    the whole expression when a looser operator (``or``, ``xor``, ``implies``) stands at the top
    level too, since ``and`` binds tighter than they do."""
    if _LOOSER.search(_top_level(expression)):
        return [expression.strip()]
    parts: list[str] = []
    depth, start, i, quote = 0, 0, 0, ""
    while i < len(expression):
        ch = expression[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'`":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif (
            depth == 0
            and re.match(r"\band\b", expression[i:])
            and (i == 0 or not (expression[i - 1].isalnum() or expression[i - 1] == "_"))
        ):
            parts.append(expression[start:i])
            start = i + 3
            i += 3
            continue
        i += 1
    parts.append(expression[start:])
    return [p.strip() for p in parts if p.strip()]


def _roots(node: Mapping[str, Any], out: list[str], *, top: bool = True) -> None:
    """The element names a parsed expression reads from its input (not inside a function's
    parameters, which read the items they are given)."""
    kind = node.get("type")
    if kind == "ParamList":
        return
    if kind == "MemberInvocation" and top:
        for child in node.get("children") or []:
            if child.get("type") == "Identifier" and child.get("text"):
                out.append(str(child["text"]))
        return
    children = node.get("children") or []
    if kind == "InvocationExpression" and children:
        _roots(children[0], out, top=top)  # the rest navigate from the first
        for child in children[1:]:
            _roots(child, out, top=False)
        return
    for child in children:
        _roots(child, out, top=top)


@lru_cache(maxsize=256)
def _parts(expression: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each top-level ``and`` part of a filter with the elements it reads."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for part in _split_and(expression):
        roots: list[str] = []
        try:
            _roots(fhirpath_parse(part), roots)  # type: ignore[no-untyped-call]
        except Exception:  # an unparsable part reads nothing we can name
            roots = []
        out.append((part, tuple(dict.fromkeys(roots))))
    return tuple(out)


def _missing(resource: Mapping[str, Any], element: str) -> bool:
    """Whether the element says nothing a filter can read: absent or empty, or a coded element
    (a CodeableConcept, or a list of them) with text but no coding ("Active" written out)."""
    value = resource.get(element)
    if value is None:  # a choice element (value, onset) is present under its typed name
        value = next((v for k, v in resource.items() if _typed(k, element)), None)
    if _empty(value):
        return True
    items = value if isinstance(value, list) else [value]
    concepts = [v for v in items if isinstance(v, Mapping) and ("coding" in v or "text" in v)]
    return len(concepts) == len(items) and not any(_has_code(v) for v in concepts)


def _typed(key: str, element: str) -> bool:
    """``valueQuantity`` is the typed name of choice element ``value``."""
    return key.startswith(element) and key[len(element) : len(element) + 1].isupper()


def _has_code(concept: Mapping[str, Any]) -> bool:
    """Whether a CodeableConcept carries a coding with a code a filter could compare."""
    return any(isinstance(c, Mapping) and c.get("code") for c in concept.get("coding") or [])


def filter_gap(m: FhirMapping, resource: Mapping[str, Any]) -> str | None:
    """Why ``resource`` is unread rather than left out by ``m``'s ``horis:where`` (already found
    not true): the missing elements every false part reads; None when some part is false on
    elements the record has, or the only missing ones are declared ``horis:missingExcludes``."""
    if m.where is None:
        return None
    gaps: list[str] = []
    for part, roots in _parts(m.where):
        if evaluate(resource, part) == [True]:
            continue
        missing = [e for e in roots if _missing(resource, e) and e not in m.missing_excludes]
        if not missing:
            return None  # false on what the record says: a real "no"
        gaps.extend(e for e in missing if e not in gaps)
    if not gaps:
        return None
    said = " and ".join(
        f"coded {element_words(e)}" if not _empty(resource.get(e)) else element_words(e)
        for e in gaps
    )
    return f"it has no {said}, which decides whether it is read"


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {} or value == ""

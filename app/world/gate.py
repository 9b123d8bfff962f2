"""The gate: every base change is checked against the ontology before it lands.

Checks, in order: the property exists; the subject exists and its class is the property's domain
or below; ``RulesOnly`` properties come only from rules; the unit (when the change names one)
is the property's; the value has the range's type (an object value is an instance or individual
whose class is in range, an enumeration value one of its listed individuals); min/max; pattern
(the whole value must match); oneOf; and cardinality (a single-valued property cannot take a
second, different value).
"""

from __future__ import annotations

from decimal import Decimal

from app.ontology.model import Value, local_name
from app.world.facts import Assert, Violation
from app.world.index import OntologyIndex
from app.world.store import Store
from app.world.values import DATATYPES, NotOfType, compiled_regex, normalize


def _v(code: str, s: str | None, p: str | None, value: object, message: str) -> Violation:
    return Violation(code, s, p, value, message)  # type: ignore[arg-type]


def check_assert(
    ix: OntologyIndex, st: Store, change: Assert, provenance: str, confidence: float | None
) -> tuple[str, Value] | Violation:
    """``(property IRI, normalized value)`` when ``change`` may land, else the violation."""
    s, raw = change.subject, change.value
    p = ix.resolve("property", change.property)
    if p is None:
        return _v("unknown-property", s, change.property, raw, f"no property {change.property!r}")
    prop = ix.properties[p]
    inst = st.instances.get(s)
    if inst is None:
        return _v("unknown-subject", s, p, raw, f"no instance {s!r} (add it first)")
    if prop.domain not in ix.ancestors.get(inst.class_iri, frozenset((inst.class_iri,))):
        return _v(
            "domain",
            s,
            p,
            raw,
            f"{prop.name} applies to {local_name(prop.domain)}; "
            f"{s} is a {local_name(inst.class_iri)}",
        )
    if prop.rules_only and provenance != "rule":
        return _v("rules-only", s, p, raw, f"{prop.name} is assigned by rules only")
    if confidence is not None and not 0.0 <= confidence <= 1.0:
        return _v("confidence", s, p, raw, f"confidence {confidence} is not within 0..1")
    if change.unit is not None and change.unit != prop.unit:
        expected = f"in {prop.unit}" if prop.unit else "unitless"
        return _v(
            "unit",
            s,
            p,
            raw,
            f"{prop.name} is {expected}; got {change.unit} (convert before asserting)",
        )
    if prop.range in DATATYPES:
        try:
            v = normalize(prop.range, raw)
        except NotOfType as exc:
            return _v("range", s, p, raw, f"{prop.name} takes {local_name(prop.range)}: {exc}")
        if isinstance(v, int | Decimal) and not isinstance(v, bool):
            if prop.min is not None and v < prop.min:
                return _v("min", s, p, raw, f"{prop.name} {v} is below the minimum {prop.min}")
            if prop.max is not None and v > prop.max:
                return _v("max", s, p, raw, f"{prop.name} {v} is above the maximum {prop.max}")
        if (
            prop.pattern is not None
            and isinstance(v, str)
            and compiled_regex(prop.pattern).fullmatch(v) is None
        ):
            return _v("pattern", s, p, raw, f"{prop.name} {v!r} does not match {prop.pattern}")
        if prop.one_of and v not in prop.one_of:
            return _v("oneOf", s, p, raw, f"{prop.name} {v!r} is not one of the listed values")
    else:
        if not isinstance(raw, str) or isinstance(raw, bool):
            return _v(
                "range", s, p, raw, f"{prop.name} takes a {local_name(prop.range)}, not {raw!r}"
            )
        v = raw
        target = st.instances.get(raw)
        if target is not None:
            cls = target.class_iri
        else:
            iri = ix.resolve("individual", raw)
            if iri is None:
                if prop.one_of:
                    return _v("oneOf", s, p, raw, f"{prop.name} {raw!r} is not a listed value")
                return _v("range", s, p, raw, f"{prop.name}: no instance or individual {raw!r}")
            v = iri
            cls = ix.individuals[iri].class_iri
        if prop.one_of and v not in prop.one_of:
            names = ", ".join(local_name(x) for x in prop.one_of)
            return _v(
                "oneOf", s, p, raw, f"{prop.name} {local_name(str(v))!r} is not one of {names}"
            )
        if prop.range not in ix.ancestors.get(cls, frozenset((cls,))):
            return _v(
                "range",
                s,
                p,
                raw,
                f"{prop.name} takes a {local_name(prop.range)}; {raw} is a {local_name(cls)}",
            )
    if prop.single_valued:
        current = st.sp.get((s, p))
        if current and any(x != v for x in current):
            have = ", ".join(str(local_name(x) if isinstance(x, str) else x) for x in current)
            return _v(
                "cardinality",
                s,
                p,
                raw,
                f"{prop.name} is single-valued and {s} already has {have} "
                "(retract it in the same transaction to replace it)",
            )
    return p, v

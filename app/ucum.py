"""UCUM units (``ucumvert`` → pint): validity, conversion, and what a near miss meant.

Pure: the only data read is the UCUM tables the ``ucumvert`` package ships. Hydration
converts Quantities with it (``app.fhir.literals``) and verification checks every unit an
ontology names with it, so what verifies is exactly what hydration can convert.

UCUM codes are case-sensitive (``mm[Hg]``, not ``mmHg``; ``mg``, not ``MG``, which is a
megagauss). ``suggest`` proposes the UCUM code a wrong spelling most likely meant, from the
spelling alone: a special atom without its brackets (``mmHg`` → ``mm[Hg]``), a wrong case
(``mEq/L`` → ``meq/L``), or a common non-UCUM symbol pint knows (``degC`` → ``Cel``,
``hr`` → ``h``) rebuilt from UCUM's own atoms and prefixes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import cache, lru_cache
from typing import Any

_ANNOTATION = re.compile(r"\{[^{}]*\}")
_RUN = re.compile(r"[A-Za-z]+")


class UnitError(ValueError):
    """Raised when a unit is not valid UCUM or cannot be converted to the wanted unit."""


@lru_cache(maxsize=1)
def _registry() -> Any:
    from ucumvert import PintUcumRegistry

    return PintUcumRegistry()


@lru_cache(maxsize=512)
def _parsed(code: str) -> tuple[Any, float]:
    """The code's units, and the number it carries besides them (a code the grammar reads as a
    bare number, with no units, is no unit)."""
    from lark.exceptions import LarkError
    from ucumvert import InvalidUcumError

    try:
        quantity = _registry().from_ucum(code)
        return quantity.units, float(quantity.magnitude)
    except (InvalidUcumError, LarkError, ValueError, KeyError, AttributeError) as exc:
        raise UnitError(f"{code!r} is not a UCUM unit this service knows") from exc


def _unit(code: str) -> Any:
    return _parsed(code)[0]


def _magnitude(code: str) -> float:
    """The number a UCUM code carries besides its units (``mL/min/2`` → 0.5), 1 for most."""
    return _parsed(code)[1]


def warm() -> None:
    """Load the UCUM registry now rather than on first use."""
    _unit("Cel")


def is_ucum(code: str) -> bool:
    """Whether ``code`` is a valid (case-sensitive) UCUM unit."""
    try:
        _unit(code)
    except UnitError:
        return False
    return True


def annotations_of(code: str) -> list[str]:
    """The ``{annotations}`` of a UCUM code, in order (``mL/min/{1.73_m2}`` → ``{1.73_m2}``)."""
    return _ANNOTATION.findall(code)


def _annotation_problem(source: str, target: str) -> str | None:
    wanted = annotations_of(target)
    if wanted and sorted(annotations_of(source)) != sorted(wanted):
        return (
            f"{source!r} cannot be converted to {target!r}: "
            f"the annotation {' '.join(wanted)} must be in the source unit"
        )
    return None


def convert(value: Decimal, source: str, target: str) -> Decimal:
    """``value`` in UCUM unit ``source`` expressed in UCUM unit ``target``.

    UCUM annotations are dimensionless, so ``mL/min`` would convert 1:1 into
    ``mL/min/{1.73_m2}``. When ``target`` carries annotations, ``source`` must carry the same ones
    (a clearance not indexed to body surface is not an indexed rate); an annotation only the
    source has (``{beats}/min`` → ``/min``) is descriptive and converts.
    """
    if source == target:
        return value
    problem = _annotation_problem(source, target)
    if problem is not None:
        raise UnitError(problem)
    for code in (source, target):
        if _magnitude(code) != 1:
            # "mL/min/1.73" is a person's "per 1.73 m²" to a reader and a factor to UCUM:
            # scaling the value either way would be a guess
            raise UnitError(f"{code!r} carries a number besides its units: it is not converted")
    from pint.errors import DimensionalityError

    reg = _registry()
    units = _unit(source), _unit(target)
    try:
        factor = _factor(source, target)
        if factor is not None:
            magnitude = float(value) * factor  # pint's own arithmetic for such units
        else:
            magnitude = float(reg.convert(float(value), *units))
    except DimensionalityError as exc:
        raise UnitError(f"{source!r} cannot be converted to {target!r}") from exc
    if not math.isfinite(magnitude):
        # past a double's range (1.7e308 mL/s is 1.0e310 mL/min): the same map, a·x + b, in
        # decimal arithmetic, whose exponents do not run out
        at_zero = float(reg.convert(0.0, *units))
        at_one = float(reg.convert(1.0, *units))
        return (Decimal(repr(at_one - at_zero)) * value + Decimal(repr(at_zero))).normalize()
    return Decimal(repr(round(magnitude, 6)))


@lru_cache(maxsize=512)
def _factor(source: str, target: str) -> float | None:
    """pint's conversion factor from ``source`` to ``target`` when neither holds an offset or a
    logarithmic unit: pint then converts a value by multiplying it by that factor, so the
    product is exactly what pint answers, without its per-value machinery (tens of
    microseconds). None for any other pair, which pint converts value by value."""
    reg = _registry()
    units = _unit(source), _unit(target)
    try:
        plain = all(reg._validate_and_extract(getattr(u, "_units", u)) is None for u in units)
    except (AttributeError, ValueError):
        return None  # not a pint that says so: value by value
    return float(reg.convert(1.0, *units)) if plain else None


def convertible(source: str, target: str) -> bool:
    """Whether ``convert`` can turn a value in ``source`` into ``target`` (both UCUM)."""
    try:
        convert(Decimal(1), source, target)
    except UnitError:
        return False
    return True


# --- what a near miss meant ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Suggestion:
    """A valid UCUM code for a wrong spelling, and what it measures (``millimeter Hg``)."""

    code: str
    meaning: str


def suggest(code: str, *, target: str | None = None) -> Suggestion | None:
    """The UCUM code ``code`` most likely meant, or None when nothing close is valid.

    With ``target``, a candidate that converts to it is preferred (a property's unit is what
    the value must end up in).
    """
    read = _pint_reading(code)
    candidates = [c for c in dict.fromkeys(_candidates(code, read)) if c != code and is_ucum(c)]
    if read is not None:
        same = [c for c in candidates if str(_unit(c)) == str(read)]
        candidates = same or candidates
    if target is not None and is_ucum(target):
        fitting = [c for c in candidates if convertible(c, target)]
        candidates = fitting or candidates
    if not candidates:
        return None
    best = candidates[0]
    return Suggestion(code=best, meaning=_meaning(best))


def _meaning(code: str) -> str:
    return str(_unit(code)).replace("_", " ").replace(" ** ", "^")


def _candidates(code: str, read: Any) -> list[str]:
    out: list[str] = []
    if read is not None:
        rebuilt = _from_pint(read)
        if rebuilt is not None:
            out.append(rebuilt)
    if len(code) <= 24 and "[" not in code:
        # a special atom without its brackets: mmHg → mm[Hg], cmH2O → cm[H2O]
        for m in re.finditer(r"[A-Za-z][A-Za-z0-9_]*", code):
            for i in range(m.start(), m.end()):
                for j in range(i + 1, m.end() + 1):
                    out.append(f"{code[:i]}[{code[i:j]}]{code[j:]}")
    runs = list(_RUN.finditer(code))
    for m in runs:
        word = m.group(0)
        for variant in (word.lower(), word.capitalize(), word.upper()):
            out.append(code[: m.start()] + variant + code[m.end() :])
    out.append(code.lower())
    for m in runs:
        # a word that is no unit, as an annotation: beats/min → {beats}/min
        if m.group(0) != code:
            out.append(f"{code[: m.start()]}{{{m.group(0)}}}{code[m.end() :]}")
    return out


def _pint_reading(code: str) -> Any:
    """What pint (which knows common non-UCUM symbols: degC, hr, mmHg) reads ``code`` as."""
    try:
        unit = _registry().Unit(code)
    except Exception:  # pint raises several unrelated kinds for text it cannot read
        return None
    return unit if not unit.dimensionless or unit._units else None


@cache
def _atoms() -> tuple[dict[str, str], dict[str, str]]:
    """pint unit name → UCUM atom, pint prefix name → UCUM prefix (from UCUM's own tables)."""
    from ucumvert import xml_util

    found: dict[str, list[str]] = {}
    for atom in [*xml_util.get_base_units(), *xml_util.get_units()]:
        try:
            parts = dict(_unit(atom)._units)
        except UnitError:
            continue
        if len(parts) == 1 and next(iter(parts.values())) == 1:
            found.setdefault(next(iter(parts)), []).append(atom)
    # several atoms can read as one pint unit (min and the arc minute '); keep the plain one
    atoms = {
        name: min(codes, key=lambda c: (not c.isalnum(), len(c), c))
        for name, codes in found.items()
    }
    prefixes = {
        str(p.findtext("{*}name")): p.attrib["Code"]
        for p in xml_util.root.findall(".//{*}prefix[@Code]")
    }
    return atoms, prefixes


def _from_pint(unit: Any) -> str | None:
    """A UCUM expression for a pint unit, built from UCUM atoms and prefixes."""
    atoms, prefixes = _atoms()
    up: list[str] = []
    down: list[str] = []
    for name, power in dict(unit._units).items():
        parsed = _registry().parse_unit_name(name)
        if not parsed:
            return None
        prefix, base, _suffix = parsed[0]
        atom = atoms.get(base)
        if atom is None or (prefix and prefix not in prefixes):
            return None
        exponent = abs(int(power))
        text = (prefixes[prefix] if prefix else "") + atom + (str(exponent) if exponent > 1 else "")
        (up if power > 0 else down).append(text)
    if not up and not down:
        return None
    return ".".join(up) + "".join("/" + d for d in down)


# --- how a unit is printed for a clinician --------------------------------------------------

_TERM = re.compile(r"(\{[^{}]*\})|([^./{}]+)")
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


@cache
def _display_table() -> dict[str, dict[str, str]]:
    import json
    from pathlib import Path

    raw = json.loads((Path(__file__).parent / "ucum_display.json").read_text(encoding="utf-8"))
    return {k: v for k, v in raw.items() if isinstance(v, dict)}


@cache
def _print_symbols() -> tuple[dict[str, str], dict[str, str]]:
    """UCUM's printSymbol of every unit atom and prefix that has one."""
    from ucumvert import xml_util

    def symbols(tag: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for node in xml_util.root.findall(f".//{{*}}{tag}[@Code]"):
            printed = node.find("{*}printSymbol")
            if printed is not None:
                text = "".join(printed.itertext()).replace("\xa0", " ").strip()
                if text:
                    out[node.attrib["Code"]] = text
        return out

    return symbols("unit") | symbols("base-unit"), symbols("prefix")


def _atom_display(term: str) -> str:
    table = _display_table()["atoms"]
    match = re.fullmatch(r"(.*?)(-?[0-9]+)?", term)
    atom, exponent = (match.group(1), match.group(2)) if match else (term, None)
    if term in table:
        return table[term]
    units, prefixes = _print_symbols()
    text = atom
    if atom in table:
        text = table[atom]
    elif atom in units:
        text = units[atom]
    else:
        for prefix, symbol in prefixes.items():
            if atom.startswith(prefix) and atom[len(prefix) :] in units:
                text = symbol + units[atom[len(prefix) :]]
                break
        else:
            text = atom.replace("[", "").replace("]", "")
    return text + (exponent.translate(_SUPERSCRIPT) if exponent else "")


@lru_cache(maxsize=256)
def display(code: str) -> str:
    """A UCUM code as a clinician writes it: ``mm[Hg]`` → ``mmHg``, ``Cel`` → ``°C``,
    ``mL/min/{1.73_m2}`` → ``mL/min/1.73 m²``, ``{beats}/min`` → ``/min``, ``a`` → ``years``.

    Whole codes and atoms listed in ``ucum_display.json`` are printed as listed; any other atom
    with UCUM's print symbol; an annotation only when the table gives it a meaning."""
    table = _display_table()
    if code in table["units"]:
        return table["units"][code]
    out: list[str] = []
    pos = 0
    for m in _TERM.finditer(code):
        out.append(code[pos : m.start()].replace(".", "·"))
        pos = m.end()
        annotation, term = m.group(1), m.group(2)
        if annotation is not None:
            out.append(table["annotations"].get(annotation, ""))
        else:
            out.append(_atom_display(term))
    out.append(code[pos:].replace(".", "·"))
    return "".join(out)

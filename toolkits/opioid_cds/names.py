"""A drug's short name for a card summary, from its RxNorm normalized name.

RxNorm names a clinical drug (SCD) "ingredient strength dose form", several ingredients joined
by " / ", a branded one (SBD) the same with "[Brand]", and a duration of release first for some
("12 HR"). A summary says it as a prescriber writes it: "12 HR Oxycodone Hydrochloride 20 MG
Extended Release Oral Tablet" is "oxycodone ER 20 mg tablet", "acetaminophen 325 MG /
hydrocodone bitartrate 10 MG Oral Tablet [Norco]" is "acetaminophen/hydrocodone 325/10 mg
tablet" (the brand and the full name stay in the card's detail). The dose forms, salt words
and units are data (``data/rxnorm-short-names.json``); a name not in RxNorm's form (free text,
a dose form the data does not list) is kept as it is, cut at a word past ``LONGEST``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

_NAME = re.compile(r"^(?P<body>.+?)(?: \[(?P<brand>[^\]]+)\])?$")
#: "12 HR" (RxNorm's) or "12HR" (EHR displays), anywhere in the name
_HOURS = re.compile(r"(?:^|\s)(?P<hours>\d+) ?HR(?=\s|$)", re.IGNORECASE)
#: a summary names the drug in at most this many characters; a longer name that no rule
#: shortens is cut at a word, the detail keeping it whole
LONGEST = 50
_PART = re.compile(
    r"^(?P<ingredient>.+?) (?P<strength>\d+(?:\.\d+)?) (?P<unit>[A-Za-z]+(?:/[A-Za-z]+)?)$"
)


@dataclass(frozen=True)
class _Rules:
    forms: dict[str, dict[str, str]]
    salts: frozenset[str]
    units: dict[str, str]


@lru_cache(maxsize=1)
def _rules() -> _Rules:
    text = resources.files("toolkits.opioid_cds").joinpath("data/rxnorm-short-names.json")
    data: dict[str, Any] = json.loads(text.read_text(encoding="utf-8"))
    return _Rules(forms=data["doseForms"], salts=frozenset(data["salts"]), units=data["units"])


def _ingredient(words: str, salts: frozenset[str]) -> str:
    kept = [w for w in words.lower().split() if w not in salts]
    return " ".join(kept) or words.lower()


def short_name(name: str) -> str:
    """``name`` said as a prescriber writes it; a name not in RxNorm's form (free text, a dose
    form the data does not list) as it is, cut at a word past :data:`LONGEST` characters."""
    shortened = _by_rule(name.strip())
    return _cut(shortened if shortened is not None else name.strip())


def _cut(name: str) -> str:
    if len(name) <= LONGEST:
        return name
    head = name[: LONGEST - 1].rsplit(" ", 1)[0]
    return head.rstrip(" ,;:/-") + "…"


def _by_rule(name: str) -> str | None:
    rules = _rules()
    hours_found = _HOURS.search(name)
    hours = hours_found["hours"] if hours_found else None
    plain = _HOURS.sub(" ", name).strip() if hours_found else name
    found = _NAME.match(" ".join(plain.split()))
    if found is None:
        return None
    body = found["body"]
    lowered = body.lower()
    form_name = max(
        (f for f in rules.forms if lowered.endswith(" " + f.lower())), key=len, default=None
    )
    if form_name is None:
        return None
    parts = [_PART.match(p.strip()) for p in body[: -len(form_name)].strip().split(" / ")]
    if not parts or any(p is None or p["unit"].upper() not in rules.units for p in parts):
        return None
    matched = [p for p in parts if p is not None]
    form = rules.forms[form_name]
    ingredients = "/".join(_ingredient(p["ingredient"], rules.salts) for p in matched)
    units = {rules.units[p["unit"].upper()] for p in matched}
    if len(units) == 1:
        strength = "/".join(p["strength"] for p in matched) + " " + units.pop()
    else:
        strength = "/".join(f"{p['strength']} {rules.units[p['unit'].upper()]}" for p in matched)
    release = form.get("release")
    if form["form"] == "patch" and hours:
        words = [ingredients, strength, f"{hours}-hour patch"]
    else:
        release = release or ("ER" if hours else None)
        words = [ingredients, *([release] if release else []), strength, form["form"]]
    return " ".join(words)  # the brand is the prescriber's own choice: the detail has it

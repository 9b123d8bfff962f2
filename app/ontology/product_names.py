"""Product names as RxNorm normalises them, read for what they say about ingredients.

RxNorm writes a clinical drug as its ingredients, each with its strength, joined by " / ", then
the dose form ("acetaminophen 300 MG / hydrocodone bitartrate 5 MG Oral Tablet"), with a
duration prefix for some ("12 HR oxycodone hydrochloride 10 MG Extended Release Oral Tablet");
a branded drug adds its brand in brackets ("Diazepam 5 MG Oral Tablet [Valium]"); EHRs also write
an ingredient with its brand alone ("Diazepam [Valium]"). ``ingredients`` reads the set of
ingredient names such a name gives, so that a branded product a deployment's lists do not hold
can be told apart from a drug they have nothing about: it is read as unread (never as none of
ours), and the record says which listed drug it names.
"""

from __future__ import annotations

import re

_BRAND = re.compile(r"\s*\[[^\]]*\]\s*")
_DURATION = re.compile(r"^\d+(\.\d+)?\s+hr\s+")
_STRENGTH = re.compile(r"\s\d")


def branded(name: str) -> bool:
    """Whether ``name`` carries a brand in brackets (``Diazepam [Valium]``)."""
    return bool(_BRAND.search(name))


def ingredients(name: str) -> frozenset[str] | None:
    """The ingredient names ``name`` gives (lower case), or None when it gives none plainly."""
    text = _DURATION.sub("", _BRAND.sub(" ", name).strip().lower())
    out = []
    for part in text.split(" / "):
        cut = _STRENGTH.search(" " + part)
        ingredient = (part[: cut.start() - 1] if cut else part).strip()
        if not ingredient or not re.fullmatch(r"[a-z][a-z ,.'-]*", ingredient):
            return None
        out.append(ingredient)
    return frozenset(out) if out else None


__all__ = ["branded", "ingredients"]

"""The vocabulary's namespaces, and the names read from an IRI: its local name and the words
a reader sees for a node without ``rdfs:label``."""

from __future__ import annotations

import re

HORIS = "https://horismos.dev/ns#"
XSD = "http://www.w3.org/2001/XMLSchema#"


def local_name(iri: str) -> str:
    """The part of an IRI after its last ``#`` or ``/``."""
    for sep in ("#", "/"):
        if sep in iri:
            iri = iri.rsplit(sep, 1)[1]
    return iri


_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")


def humanise(name: str) -> str:
    """A local name as words, for a name without ``rdfs:label``: ``ChestPain`` → ``Chest pain``,
    ``ACEInhibitor`` → ``ACE inhibitor``, ``ehr.assign_queue`` → ``Ehr assign queue``."""
    words = _WORD.findall(local_name(name))
    if not words:
        return name
    out = [w if len(w) > 1 and w.isupper() else w.lower() for w in words]
    out[0] = out[0][:1].upper() + out[0][1:]
    return " ".join(out)

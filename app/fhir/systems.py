"""Code systems as the deployment writes them, whatever the EHR sent.

An EHR may name a code system by an OID (``urn:oid:2.16.840.1.113883.6.88`` for RxNorm), by an
older URI (``http://hl7.org/fhir/v2/0078``) or with a ``|version`` suffix. Hydration reads every
coding through :func:`canonical_systems`, built from HL7's own NamingSystem and CodeSystem data
(``app.terminology``), so a code matches a deployment's list however its system was spelled.
Without an installed terminology a system is read as written — an alias then matches no list,
and its record is unread, never "none of ours".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache

from app.terminology import Terminology, TerminologyNotInstalled, load_terminology

log = logging.getLogger("horismos.terminology")


@lru_cache(maxsize=1)
def installed_terminology() -> Terminology | None:
    """The installed terminology snapshot, loaded once per process; None without one."""
    try:
        return load_terminology()
    except TerminologyNotInstalled as exc:
        log.warning("%s; code systems are read as written (aliases are not resolved)", exc)
        return None


def canonical_systems(terminology: Terminology | None = None) -> Callable[[str], str]:
    """The function that names a code system canonically: ``terminology``'s, else the installed
    one's, else the system as written (without a ``|version`` suffix)."""
    chosen = terminology if terminology is not None else installed_terminology()
    if chosen is None:
        return _unversioned
    return chosen.canonical_system


def _unversioned(system: str) -> str:
    return system.split("|", 1)[0]

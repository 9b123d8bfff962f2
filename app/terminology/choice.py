"""Which terminology answers a deployment: the server the settings name, else the embedded one.

``HORISMOS_TERMINOLOGY_URL`` set → one ``HttpTerminology`` (cached) for every deployment;
unset → an ``EmbeddedTerminology`` per deployment version (its own ValueSet and ConceptMap
files beside the installed package), cached. Each is wrapped in ``CachedTerminology``, so an
answer is kept per value set / code system / map version.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from app.terminology._terminology import Terminology
from app.terminology.embedded import EmbeddedTerminology
from app.terminology.port import CachedTerminology, TerminologyPort

if TYPE_CHECKING:
    from app.ontology.model import Ontology


class TerminologyChoice:
    """The port each deployment's hook runs ask."""

    def __init__(self, package: Terminology | None, server: TerminologyPort | None = None) -> None:
        self.package = package
        self._server = CachedTerminology(port=server) if server is not None else None
        self._embedded: dict[str, CachedTerminology] = {}
        self._lock = threading.Lock()

    def for_ontology(self, ontology: Ontology) -> CachedTerminology:
        """The port for a run of ``ontology`` (the server, or this version's embedded one)."""
        if self._server is not None:
            return self._server
        with self._lock:
            found = self._embedded.pop(ontology.digest, None)
            if found is not None:  # the most recent last: the oldest is the one let go
                self._embedded[ontology.digest] = found
            else:
                found = CachedTerminology(port=EmbeddedTerminology.of(ontology, self.package))
                if len(self._embedded) > 16:  # versions come and go; keep the recent ones
                    self._embedded.pop(next(iter(self._embedded)))
                self._embedded[ontology.digest] = found
            return found

    def close(self) -> None:
        """Close the server's connections (the embedded terminologies hold none)."""
        if self._server is not None:
            self._server.close()


#: the value-set and map versions of each deployment version (by digest), built once
_VERSIONS: dict[str, tuple[list[str], list[str]]] = {}
_VERSIONS_LOCK = threading.Lock()


def _versions(ontology: Ontology) -> tuple[list[str], list[str]]:
    with _VERSIONS_LOCK:
        found = _VERSIONS.get(ontology.digest)
    if found is not None:
        return found
    value_sets = sorted(
        [
            *(
                f"{url}|{vs.version}" if vs.version else url
                for url, vs in ontology.value_sets.items()
            ),
            *(
                f"{url}|{vs.version}"
                for url, olds in ontology.value_set_history.items()
                for vs in olds
            ),
        ]
    )
    maps = sorted(f"{url}|{cm.version}" for url, cm in ontology.concept_maps.items())
    with _VERSIONS_LOCK:
        if len(_VERSIONS) > 64:
            _VERSIONS.clear()
        _VERSIONS[ontology.digest] = (value_sets, maps)
    return value_sets, maps


def used_by_run(port: TerminologyPort | None, ontology: Ontology) -> dict[str, object]:
    """What a run records of its terminology: which one answered (the embedded one and its
    package versions, or the server's URL) and the versions of the value sets and concept
    maps its deployment classifies codes by, earlier expansions included."""
    used: dict[str, object] = (
        port.used().to_json() if port is not None else {"kind": "embedded", "packages": []}
    )
    value_sets, maps = _versions(ontology)
    used["valueSets"] = list(value_sets)
    used["conceptMaps"] = list(maps)
    return used

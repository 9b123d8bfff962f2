"""The terminology port: the one interface through which the core asks terminology questions.

Its operations are FHIR's terminology operations, answered in plain values:

- ``expand(url, version)`` — ``ValueSet/$expand``: the members of one version of a value set;
- ``validate_code(url, version, system, code)`` — ``ValueSet/$validate-code``;
- ``lookup(system, code)`` — ``CodeSystem/$lookup``: the code's display, if the system has it;
- ``subsumes(system, code_a, code_b)`` — ``CodeSystem/$subsumes``;
- ``translate(url, version, system, code)`` — ``ConceptMap/$translate``.

Two implementations exist: ``app.terminology.embedded.EmbeddedTerminology`` (the installed HL7
Terminology package plus a deployment's own ValueSet and ConceptMap files; no network) and
``adapters.terminology.http.HttpTerminology`` (a FHIR terminology server). ``CachedTerminology``
keeps answers keyed by the value set, code system or map *version* asked, never across versions.

An implementation that cannot answer raises :class:`TerminologyUnavailable`: a timeout, an
error, a value set it does not know. Its ``reason`` is said to a clinician, so a record whose
code could not be checked is *unread*, never taken for "not ours".
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeVar, runtime_checkable

__all__ = [
    "COUNTING_EQUIVALENCES",
    "TIMED_OUT",
    "CachedTerminology",
    "Expansion",
    "Subsumption",
    "TerminologyPort",
    "TerminologyUnavailable",
    "TerminologyUsed",
    "Translation",
]

#: a terminology that did not answer within the time it was given, as a clinician reads it
TIMED_OUT: Final = "the terminology service did not answer in time"

Subsumption = Literal["equivalent", "subsumes", "subsumed-by", "not-subsumed"]

#: The ConceptMap equivalences (FHIR R4 ``ConceptMapEquivalence``; R5's relationships named
#: after them) under which a source code counts as a member of its target's class: the target
#: means the same (``equal``, ``equivalent``) or more (``wider``, ``subsumes``: the source is-a
#: target, as a product is a form of its ingredient). ``narrower``, ``specializes``, ``inexact``,
#: ``relatedto``, ``unmatched`` and ``disjoint`` do not count.
COUNTING_EQUIVALENCES: Final = frozenset(
    {"equal", "equivalent", "wider", "subsumes", "source-is-narrower-than-target"}
)


class TerminologyUnavailable(Exception):
    """The terminology could not answer; ``reason`` says so in a clinician's words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class Expansion:
    """One version of a value set: its members as ``system|code``."""

    url: str
    version: str | None
    codes: frozenset[str]


@dataclass(frozen=True, kw_only=True)
class Translation:
    """One match of ``$translate``: the target ``system|code`` and its equivalence."""

    target: str
    equivalence: str

    @property
    def counts(self) -> bool:
        """Whether a code so mapped is a member of its target's class."""
        return self.equivalence in COUNTING_EQUIVALENCES


@dataclass(frozen=True, kw_only=True)
class TerminologyUsed:
    """Which terminology answered a run, as the run record keeps it."""

    kind: Literal["embedded", "server"]
    #: ``name#version`` of each installed package (embedded)
    packages: tuple[str, ...] = ()
    #: the server's base URL (server)
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.packages:
            out["packages"] = list(self.packages)
        if self.url is not None:
            out["url"] = self.url
        return out


@runtime_checkable
class TerminologyPort(Protocol):
    """What the core asks a terminology. ``timeout`` (seconds) bounds one call; an
    implementation that cannot answer within it raises :class:`TerminologyUnavailable`."""

    @property
    def remote(self) -> bool:
        """Whether a call may wait on the network (the service then reads off the event loop)."""
        ...

    def used(self) -> TerminologyUsed: ...

    def close(self) -> None:
        """Let go of what it holds open (a server's connections) when the service stops."""
        ...

    def expand(self, url: str, version: str | None, *, timeout: float | None = None) -> Expansion:
        """``ValueSet/$expand`` of value set ``url`` at ``version``."""
        ...

    def validate_code(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> bool:
        """``ValueSet/$validate-code``: whether ``system|code`` is in ``url`` at ``version``."""
        ...

    def lookup(self, system: str, code: str, *, timeout: float | None = None) -> str | None:
        """``CodeSystem/$lookup``: the display of ``code``; None when the system lacks it."""
        ...

    def subsumes(
        self, system: str, code_a: str, code_b: str, *, timeout: float | None = None
    ) -> Subsumption | None:
        """``CodeSystem/$subsumes`` of ``code_a`` and ``code_b``; None when not known."""
        ...

    def translate(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> tuple[Translation, ...]:
        """``ConceptMap/$translate`` of ``system|code`` through map ``url`` at ``version``."""
        ...


T = TypeVar("T")

#: answers kept per port (each a small value); the oldest go first
CACHE_SIZE: Final = 50_000


@dataclass(kw_only=True)
class CachedTerminology:
    """A port whose answers are kept, keyed by operation, canonical *and version*: an answer
    for one version of a value set is never given for another. Refusals (TerminologyUnavailable)
    are not kept: the next call asks again."""

    port: TerminologyPort
    size: int = CACHE_SIZE
    _answers: OrderedDict[Hashable, Any] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def remote(self) -> bool:
        return self.port.remote

    def used(self) -> TerminologyUsed:
        return self.port.used()

    def close(self) -> None:
        self.port.close()

    def _cached(self, key: Hashable, ask: Callable[[], T]) -> T:
        with self._lock:
            if key in self._answers:
                self._answers.move_to_end(key)
                return self._answers[key]  # type: ignore[no-any-return]
        answer = ask()
        with self._lock:
            self._answers[key] = answer
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)
        return answer

    def expand(self, url: str, version: str | None, *, timeout: float | None = None) -> Expansion:
        return self._cached(
            ("expand", url, version), lambda: self.port.expand(url, version, timeout=timeout)
        )

    def validate_code(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> bool:
        return self._cached(
            ("validate", url, version, system, code),
            lambda: self.port.validate_code(url, version, system, code, timeout=timeout),
        )

    def lookup(self, system: str, code: str, *, timeout: float | None = None) -> str | None:
        return self._cached(
            ("lookup", system, code), lambda: self.port.lookup(system, code, timeout=timeout)
        )

    def subsumes(
        self, system: str, code_a: str, code_b: str, *, timeout: float | None = None
    ) -> Subsumption | None:
        return self._cached(
            ("subsumes", system, code_a, code_b),
            lambda: self.port.subsumes(system, code_a, code_b, timeout=timeout),
        )

    def translate(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> tuple[Translation, ...]:
        return self._cached(
            ("translate", url, version, system, code),
            lambda: self.port.translate(url, version, system, code, timeout=timeout),
        )

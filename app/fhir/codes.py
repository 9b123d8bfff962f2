"""Which class of a tree a coding is, read the way a terminology reads it.

Hydration asks :class:`CodeClassifier` for the classes of a range tree a coding belongs to,
cheapest first, and stops at the first step that answers:

1. **the deployment's lists** — a class's ``horis:code``, or the current expansion of its value
   set (``Ontology.class_for_code``): what every run of today's deployments reads;
2. **an earlier expansion** of a class's value set (``valuesets/history``): the code counts,
   and the run gets a data-quality note naming the code and both versions;
3. **the deployment's concept maps** (``conceptmaps``): a code mapped, with an equivalence that
   counts (``app.terminology.port.COUNTING_EQUIVALENCES``), to a code of the tree counts as
   that code's class, with a note naming the map;
4. **the terminology port** — ``$validate-code`` of the coding against the pinned version of
   each value set of the tree whose code systems include the coding's (a SNOMED descendant the
   file does not enumerate, on a server that knows it). Asked only for codes the steps above
   did not settle; answers are cached by value-set version (``CachedTerminology``).

For a ``system|code`` string value that a ``horis:inValueSet`` condition (or mapping filter)
tests, an earlier expansion counts too (the World's membership includes it, ``app.world.index``)
and :meth:`CodeClassifier.note_tested` adds the same note.

A port that cannot answer (a timeout, an error, a value set it does not know) leaves the
coding *unsettled*: hydration then makes the record unread with the reason, never "not ours".
Calls are made only before ``until`` (the hook's deadline, ``time.monotonic()``); after one
failure the run asks no more, so a stalled server costs one timeout, not one per record.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.data_notes import DataNote
from app.fhir.unread import system_name
from app.ontology.model import EarlierMember, Ontology
from app.terminology.port import (
    COUNTING_EQUIVALENCES,
    TIMED_OUT,
    TerminologyPort,
    TerminologyUnavailable,
)


@dataclass(kw_only=True)
class CodeClassifier:
    """The per-run reader of codes into classes (see the module docstring)."""

    o: Ontology
    port: TerminologyPort | None = None
    #: no terminology call after this moment (``time.monotonic()``); None: no deadline
    until: float | None = None
    notes: list[DataNote] = field(default_factory=list)
    #: why the terminology could not answer in this run (then it is not asked again)
    failed: str | None = None
    _noted: set[tuple[str, str]] = field(default_factory=set)
    _systems: dict[str, frozenset[str]] = field(default_factory=dict)

    def classes(
        self, codings: Iterable[str], tree: set[str], ref: str
    ) -> tuple[list[str], str | None]:
        """The classes of ``tree`` the codings belong to, and — when none does and the
        terminology could not be asked about one of them — why, in a clinician's words."""
        codings = list(codings)
        direct = [c for coding in codings if (c := self.o.class_for_code(coding)) in tree]
        if direct:
            return [c for c in direct if c is not None], None
        for coding in codings:
            found = self._earlier(coding, tree, ref) or self._mapped(coding, tree, ref)
            if found:
                return found, None
        unsettled: str | None = None
        for coding in codings:
            found, why = self._asked(coding, tree)
            if found:
                return found, None
            unsettled = unsettled or why
        return [], unsettled

    # --- the steps ------------------------------------------------------------------------

    def _earlier(self, coding: str, tree: set[str], ref: str) -> list[str]:
        members = [m for m in self.o.earlier_members(coding) if m.class_iri in tree]
        for m in members:
            self._earlier_note(coding, m, ref)
        return [m.class_iri for m in members]

    def note_earlier(self, coding: str, url: str, ref: str) -> None:
        """Note that ``coding`` counted as a member of ``url`` through an earlier expansion."""
        for m in self.o.earlier_expansions(coding):
            if m.url == url:
                self._earlier_note(coding, m, ref)
                return

    def note_tested(self, prop: str, coding: str, ref: str) -> None:
        """A ``system|code`` value read for ``prop``: noted when a ``horis:inValueSet``
        condition on ``prop`` will count it only through an earlier expansion."""
        earlier = self.o.earlier_expansions(coding)
        if not earlier:
            return
        tested = {str(c.value) for c in self.o.conditions_on(prop) if c.op == "inValueSet"}
        for m in earlier:
            if m.url in tested:
                self._earlier_note(coding, m, ref)

    def _earlier_note(self, coding: str, m: EarlierMember, ref: str) -> None:
        """A note that ``coding`` counted as a member of ``m.url`` through an earlier
        expansion, or through a supplement (then saying how the code derives)."""
        url, version, earlier = m.url, m.version, m.earlier_version
        system, _, code = coding.partition("|")
        current = f"version {version}" if version is not None else "the current expansion"
        if m.derived is not None:
            rule, lists = "value-set-supplement", f"its supplement {earlier} lists it ({m.derived})"
        else:
            rule, lists = "earlier-expansion", f"its earlier version {earlier} lists it"
        self._note(
            DataNote(
                rule=rule,
                field=f"{ref} code",
                received=coding,
                read_as=f"{url}|{earlier}",
                message=(
                    f"{ref}: {system_name(system)} code {code} is not in {current} of the "
                    f"value set {self.o.value_sets[url].name}; {lists}, so the record is read "
                    "as a member"
                ),
            )
        )

    def _mapped(self, coding: str, tree: set[str], ref: str) -> list[str]:
        out: list[str] = []
        for t in self.o.translations(coding):
            if t.equivalence not in COUNTING_EQUIVALENCES:
                continue
            cls = self.o.class_for_code(t.target)
            if cls is None or cls not in tree:
                continue
            out.append(cls)
            system, _, code = coding.partition("|")
            target_system, _, target_code = t.target.partition("|")
            self._note(
                DataNote(
                    rule="concept-map",
                    field=f"{ref} code",
                    received=coding,
                    read_as=t.target,
                    message=(
                        f"{ref}: {system_name(system)} code {code} is read as "
                        f"{system_name(target_system)} code {target_code} ({t.equivalence}) "
                        f"through the concept map {t.map_url}|{t.map_version}"
                    ),
                )
            )
        return out

    def _asked(self, coding: str, tree: set[str]) -> tuple[list[str], str | None]:
        if self.port is None:
            return [], None
        system, _, code = coding.partition("|")
        out: list[str] = []
        for iri in tree:
            c = self.o.classes.get(iri)
            for url in c.value_sets if c is not None else ():
                vs = self.o.value_sets.get(url)
                if vs is None or system not in self._systems_of(url):
                    continue
                if self.failed is not None:
                    return [], self.failed
                wait = None if self.until is None else self.until - time.monotonic()
                try:
                    if wait is not None and wait <= 0:
                        raise TerminologyUnavailable(TIMED_OUT)
                    member = self.port.validate_code(url, vs.version, system, code, timeout=wait)
                except TerminologyUnavailable as exc:
                    self.failed = (
                        f"its {system_name(system)} code {code} could not be checked: {exc.reason}"
                    )
                    return [], self.failed
                if member:
                    out.append(iri)
        return out, None

    def _systems_of(self, url: str) -> frozenset[str]:
        found = self._systems.get(url)
        if found is None:
            found = frozenset(c.partition("|")[0] for c in self.o.value_sets[url].codes)
            self._systems[url] = found
        return found

    def _note(self, note: DataNote) -> None:
        key = (note.field, note.message)
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(note)

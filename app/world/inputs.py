"""Input status: for every property a workflow reads, whether hydration got all of it.

A decision may rest only on inputs that are *complete*. The others say why they are not:

- ``absent``: no data at all (a ``null`` prefetch key, nothing the mapping could read). For a
  property declared ``horis:absentMeans horis:None`` (a record list) an *answered* search with no
  match is ``complete`` (closed world: there is none); ``absent`` is kept for the input that was
  never answered;
- ``refused``: data was there but not admitted (gate, unit, subject, record status, validation);
- ``stale``: every reading was older than the mapping's ``horis:maxAge`` at the hook's time;
- ``truncated``: a search or size limit was reached, or the server reported an error inside its
  answer, so more data may exist;
- ``unread``: a record is there but could not be read — its code is in no system or list the
  deployment reads (or it has text only), an element a filter needs is missing, it is not valid
  FHIR — so what it says is unknown;
- ``conflicting``: readings of a single-valued input taken at the same instant disagree.

A refused, stale, conflicting, unread or truncated input is never closed-world. Hydration builds an
:class:`InputStatus`; the run keeps it (stored with the run, shown on the run page and in
``GET /runs/{id}``) and the ReasoningStep asks it which properties may still change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

InputState = Literal["complete", "absent", "refused", "stale", "conflicting", "unread", "truncated"]
INPUT_STATES: tuple[InputState, ...] = get_args(InputState)

#: When a property's inputs disagree, the one that says most about what may be missing wins:
#: more data exists (truncated), a record could not be read (unread), data was turned away
#: (refused), readings disagree (conflicting), data too old (stale), none.
#: a reason's source that names one record: ``Type/id``
_RECORD = re.compile(r"^[A-Z][A-Za-z]+/[A-Za-z0-9\-.]{1,64}$")

_WEIGHT: dict[InputState, int] = {
    "complete": 0,
    "absent": 1,
    "stale": 2,
    "conflicting": 3,
    "refused": 4,
    "unread": 5,
    "truncated": 6,
}


@dataclass(frozen=True, kw_only=True)
class InputReason:
    """Why one input of a property is not complete, in words a clinician can read."""

    state: InputState
    #: what was read: a prefetch key, a search, or a resource reference ("Observation/obs-1")
    source: str | None = None
    #: e.g. "unit 'mmHg' is not a recognized unit", "taken 2025-06-01, older than 6 h"
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "source": self.source, "detail": self.detail}


@dataclass(frozen=True, kw_only=True)
class PropertyInput:
    """The status of one property's inputs: its state and every reason behind it."""

    prop: str  # property IRI
    state: InputState = "complete"
    reasons: tuple[InputReason, ...] = ()

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def to_json(self) -> dict[str, Any]:
        return {
            "property": self.prop,
            "state": self.state,
            "reasons": [r.to_json() for r in self.reasons],
        }


@dataclass(kw_only=True)
class InputStatus:
    """Every read property's :class:`PropertyInput`; a property never noted is complete."""

    props: dict[str, PropertyInput] = field(default_factory=dict)

    def note(self, prop: str, reason: InputReason) -> None:
        """Record that one input of ``prop`` is not complete; the worst state wins."""
        was = self.props.get(prop, PropertyInput(prop=prop))
        state = reason.state if _WEIGHT[reason.state] > _WEIGHT[was.state] else was.state
        self.props[prop] = PropertyInput(prop=prop, state=state, reasons=(*was.reasons, reason))

    def read(self, prop: str) -> None:
        """Record that ``prop`` was read (complete unless a reason says otherwise)."""
        self.props.setdefault(prop, PropertyInput(prop=prop))

    def of(self, prop: str) -> PropertyInput:
        return self.props.get(prop, PropertyInput(prop=prop))

    def incomplete(self) -> frozenset[str]:
        """The properties whose inputs could still change a conclusion."""
        return frozenset(p for p, s in self.props.items() if not s.complete)

    def incomplete_records(self) -> dict[str, frozenset[str]]:
        """For each incomplete property every reason of which names one record
        (``MedicationRequest/o1``), those records: the property is incomplete on them only.
        A property with a reason about a whole search, a key or nothing in particular is not
        here (incomplete on every record)."""
        out: dict[str, frozenset[str]] = {}
        for prop, status in self.props.items():
            if status.complete:
                continue
            sources = [r.source for r in status.reasons]
            if sources and all(isinstance(x, str) and _RECORD.match(x) for x in sources):
                out[prop] = frozenset(str(x) for x in sources)
        return out

    def __iter__(self) -> Iterator[PropertyInput]:
        return iter(sorted(self.props.values(), key=lambda s: s.prop))

    def to_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self]

    @classmethod
    def from_json(cls, rows: Iterable[Mapping[str, Any]] | None) -> InputStatus:
        out = cls()
        for row in rows or ():
            reasons = tuple(
                InputReason(state=r["state"], source=r.get("source"), detail=r.get("detail", ""))
                for r in row.get("reasons", ())
            )
            out.props[row["property"]] = PropertyInput(
                prop=row["property"], state=row["state"], reasons=reasons
            )
        return out

"""What a run concludes, as typed documents: its :class:`Decision`, or why it is :class:`Undecided`.

The interpreter builds them, cards and the run extension read their fields, and the decision
page parses the stored JSON back through the same models, so a field has one name and one shape
everywhere (replay compares the stored JSON itself). The JSON is the stored form: camelCase
keys, and a could-change entry carries ``rule`` and ``value`` only when it has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class _Document(BaseModel):
    # stored runs are read back whatever they hold: a key this version does not know is kept
    model_config = ConfigDict(frozen=True, extra="allow")

    def to_json(self) -> dict[str, Any]:
        """The stored form: what was set, nothing added."""
        return self.model_dump(mode="python", exclude_unset=True)


def _entries_of(value: Any) -> list[Any]:
    """A stored list as far as it can be read: missing or null is empty, an entry that is not
    an object is left out (the rest is still shown)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


class Decision(_Document):
    """The value the run holds for its workflow's ``horis:decides`` property (local names)."""

    property: str
    value: Any


class CouldChange(_Document):
    """How an incomplete input could change the conclusion: through which rule, to what."""

    concerns: str = ""
    subject: str | None = None
    how: str = ""
    rule: str | None = None
    ruleLabel: str | None = None
    value: Any = None
    valueLabel: str | None = None


class IncompleteReason(_Document):
    """Why an input is not complete, in hydration's words."""

    state: str = ""
    source: str | None = None
    detail: str | None = ""


class UndecidedInput(_Document):
    """One incomplete input that could change the goal, its state and reasons."""

    input: str = ""
    inputIri: str | None = None
    label: str | None = None
    state: str = ""
    reasons: list[IncompleteReason] = []
    couldChange: list[CouldChange] = []

    _entries = field_validator("reasons", "couldChange", mode="before")(_entries_of)


class Undecided(_Document):
    """A ReasoningStep's goal not decided: the incomplete inputs that could change it, and the
    value the rules held on the rest of the data (not a decision)."""

    property: str | None = None
    propertyLabel: str | None = None
    held: Any = None
    heldLabel: str | None = None
    inputs: list[UndecidedInput] = []

    _entries = field_validator("inputs", mode="before")(_entries_of)

    @classmethod
    def read(cls, stored: Mapping[str, Any] | None) -> Undecided | None:
        """A stored ``undecided`` document, or None when there is none."""
        return None if not stored else cls.model_validate(stored)


__all__ = ["CouldChange", "Decision", "IncompleteReason", "Undecided", "UndecidedInput"]

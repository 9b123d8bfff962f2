"""What an undecided ReasoningStep records: each incomplete input that could change its goal,
with the input's state and reasons (in a clinician's words, from hydration) and the rules
through which it could change the conclusion (docs/world.md, "Decided and undecided").

The JSON goes into the step's trace entry and the run's outcome (``undecided``); cards and the
decision page read it to say which data was missing and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.ontology.model import Ontology, humanise, local_name
from app.runtime.names import show
from app.world.decided import Blocker
from app.world.inputs import InputStatus


def undecided_json(
    ontology: Ontology, blockers: Sequence[Blocker], inputs: InputStatus
) -> list[dict[str, Any]]:
    """One entry per incomplete input, in the order the blockers name them."""
    grouped: dict[str, list[Blocker]] = {}
    for b in blockers:
        grouped.setdefault(b.input, []).append(b)
    rules = {r.iri: r for r in ontology.rules}
    out: list[dict[str, Any]] = []
    for iri, found in grouped.items():
        prop = ontology.properties.get(iri)
        status = inputs.of(iri)
        changes: list[dict[str, Any]] = []
        for b in found:
            change: dict[str, Any] = {
                "concerns": local_name(b.concerns),
                "subject": b.subject,
                "how": b.how,
            }
            if b.rule is not None:
                rule = rules.get(b.rule)
                change["rule"] = local_name(b.rule)
                change["ruleLabel"] = (
                    rule.label if rule is not None and rule.label else humanise(local_name(b.rule))
                )
            if b.value is not None:
                change["value"] = show(ontology, b.value)
                change["valueLabel"] = value_label(ontology, b.value)
            if change not in changes:
                changes.append(change)
        out.append(
            {
                "input": local_name(iri),
                "inputIri": iri,
                "label": (prop.label if prop is not None and prop.label else local_name(iri)),
                "state": status.state,
                "reasons": [r.to_json() for r in status.reasons],
                "couldChange": changes,
            }
        )
    return out


def value_label(ontology: Ontology, value: Any) -> str:
    """How a clinician reads a value: an enumeration member's label (else its humanised name),
    anything else as shown."""
    member = ontology.individuals.get(value) if isinstance(value, str) else None
    if member is not None:
        return member.label or humanise(member.name)
    return str(show(ontology, value))

"""Structured input (docs/schema.md): ``{"instances": [{"id": "p1", "class": "Patient",
"heartRate": 130, "hasSymptom": ["s1"]}, …]}`` as one gated transaction.

Names are local names in the ontology's namespace or full IRIs. An entry with ``"class"``
creates the instance; one without adds facts to an existing instance. A list value asserts each
element (multi-valued properties). JSON floats are read as exact decimals. Unknown names are
violations of the returned transaction, like any other gate decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.world.facts import AddInstance, Assert, Change, Provenance, TxResult, Violation
from app.world.world import World

_RESERVED = frozenset({"id", "class"})


def load_structured(
    world: World, data: Mapping[str, Any], *, provenance: Provenance = "api"
) -> TxResult:
    """Assert the instances of ``data`` (other top-level keys such as ``text`` are ignored)."""
    instances = data.get("instances", [])
    changes: list[Change] = []
    problems: list[Violation] = []
    if not isinstance(instances, list):
        problems.append(
            Violation("range", None, None, None, '"instances" must be a list of objects')
        )
        instances = []
    for entry in instances:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            problems.append(
                Violation("unknown-subject", None, None, None, 'each instance needs a string "id"')
            )
            continue
        if "class" in entry:
            changes.append(AddInstance(entry["id"], str(entry["class"])))
    for entry in instances:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            continue
        for name, raw in entry.items():
            if name in _RESERVED:
                continue
            for value in raw if isinstance(raw, list) else [raw]:
                changes.append(Assert(entry["id"], name, value))
    if problems:
        return TxResult(False, world.version + 1, violations=tuple(problems))
    return world.transact(changes, provenance=provenance)

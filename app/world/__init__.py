"""The World: facts behind a gate, rules kept at their fixed point, proofs (docs/world.md).

Pure: no I/O, no clock, no randomness. See docs/world.md and docs/proofs.md.
"""

from app.world.facts import (
    PROVENANCES,
    Absence,
    AddInstance,
    Assert,
    Change,
    Fact,
    FactKey,
    Instance,
    Justification,
    Provenance,
    Retract,
    Snapshot,
    Source,
    StratificationError,
    TxResult,
    Violation,
    WorldError,
)
from app.world.proof import Derivation, NegativePremise, Overruled, Proof, ProofNode
from app.world.structured import load_structured
from app.world.world import World, ontology_index

__all__ = [
    "PROVENANCES",
    "Absence",
    "AddInstance",
    "Assert",
    "Change",
    "Derivation",
    "Fact",
    "FactKey",
    "Instance",
    "Justification",
    "NegativePremise",
    "Overruled",
    "Proof",
    "ProofNode",
    "Provenance",
    "Retract",
    "Snapshot",
    "Source",
    "StratificationError",
    "TxResult",
    "Violation",
    "World",
    "WorldError",
    "load_structured",
    "ontology_index",
]

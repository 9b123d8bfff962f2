"""Problems found in an ontology, and the error that carries them.

Hierarchy::

    Exception
     └── OntologyError   raised by ``load_ontology`` when the Turtle cannot compile (parse errors,
                         unknown ``horis:`` terms, wrong literal types, dangling references,
                         triples nothing understands). Carries every problem found, not the first.

``verify`` does not raise: it returns ``Problem`` values (an empty list means sound).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

ProblemCode = Literal[
    # load errors
    "syntax",
    "unknown-term",
    "literal-type",
    "dangling-reference",
    "not-understood",
    "missing",
    "duplicate",
    "binding",
    "value-set",
    "concept-map",
    # verification
    "failure-edge",
    "unresolved-edge",
    "no-terminal",
    "cycle",
    "subflow-depth",
    "stratification",
    "type-check",
    "decides",
    "requires",
    "service",
    "bindings",
    "unreachable",
    "unit",
    "fhir-path",
    "code-system",
    "hook",
    "prefetch",
    "unread",
    "absent-means",
    "terminology",
]


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One thing wrong with an ontology.

    ``node`` is the IRI of the offending node, or of the nearest named node above a blank node,
    in which case ``path`` is the predicate path from it (``horis:when[2]/horis:greaterThan``).
    ``message`` says what is wrong and what to add; ``suggestion`` is the value most likely meant
    (``valueQuantity`` for ``valueQuantiy``), when there is one. ``file`` is the file that
    declares the node (relative to the folder of the first file loaded: ``common.ttl`` for a node
    of an imported common file), when the node was read from a file.
    """

    code: ProblemCode
    node: str
    message: str
    path: str | None = None
    suggestion: str | None = None  # what was most likely meant (already said in ``message``)
    file: str | None = None

    def __str__(self) -> str:
        where = f"{self.node} {self.path}" if self.path else self.node
        origin = f" (in {self.file})" if self.file else ""
        return f"{where}: {self.message}{origin}"


def in_files(problems: list[Problem], origins: Mapping[str, str]) -> list[Problem]:
    """``problems`` with the file of each node they name (``origins``: node → file)."""
    return [
        p if p.file is not None or p.node not in origins else replace(p, file=origins[p.node])
        for p in problems
    ]


class OntologyError(Exception):
    """The ontology files could not be compiled; ``problems`` lists every reason found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(str(p) for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the ontology:\n{lines}")

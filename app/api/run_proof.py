"""The proof in engine notation, rebuilt from the stored proof JSON: each fact with its tag
(provenance, the FHIR resource version of a base fact), the derivations, negative premises and
overruled values beneath it. The run page shows these lines (the ``proof`` macro of
``app/api/templates/run_parts.html``); ``proof_text`` gives them as the indented text
``Proof.render()`` produced, which the change page shows too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ProofLine", "proof_lines", "proof_text"]


@dataclass
class ProofLine:
    """One line of the proof: a fact (``node`` set), an ``also`` derivation, a negative premise or
    an overruled value, with the lines indented beneath it."""

    text: str
    kind: str  # "derived" | "base" | "also" | "absent" | "overruled" | "unassigned"
    node: Mapping[str, Any] | None = None
    children: list[ProofLine] = field(default_factory=list)

    @property
    def label(self) -> Any:
        """A fact's label, as the page shows it beside its tag."""
        return self.node.get("label") if self.node is not None else None

    @property
    def tag(self) -> str:
        return _tag(self.node) if self.node is not None else ""


def _tag(node: Mapping[str, Any]) -> str:
    """The bracketed tag ``Proof.render()`` prints after a fact's label."""
    if node.get("provenance") == "rule":
        derivations = node.get("derivations") or []
        return f"[rule {derivations[0].get('ruleName')}]" if derivations else "[rule]"
    text = str(node.get("provenance"))
    source = node.get("source")
    if isinstance(source, Mapping):
        text += f" {source.get('resourceType')}/{source.get('id')}"
        if source.get("versionId") is not None:
            text += f" v{source.get('versionId')}"
    confidence = node.get("confidence")
    if isinstance(confidence, int | float):
        text += f", confidence {confidence:g}"
    return f"[{text}]"


def _body(derivation: Mapping[str, Any]) -> list[ProofLine]:
    lines = [_fact(p) for p in derivation.get("premises") or []]
    lines.extend(ProofLine(str(a.get("label")), "absent") for a in derivation.get("absent") or [])
    return lines


def _fact(node: Mapping[str, Any]) -> ProofLine:
    derivations = list(node.get("derivations") or [])
    line = ProofLine(
        f"{node.get('label')}  {_tag(node)}", "derived" if derivations else "base", node=node
    )
    if derivations:
        line.children.extend(_body(derivations[0]))
    for d in derivations[1:]:
        also = ProofLine(f"also [rule {d.get('ruleName')}]", "also")
        if d.get("expanded"):
            also.children.extend(_body(d))
        line.children.append(also)
    for o in node.get("overruled") or []:
        rules = ", ".join(f"rule {r}" for r in o.get("rules") or [])
        line.children.append(ProofLine(f"overrules {o.get('label')}  [{rules}]", "overruled"))
    return line


def proof_lines(proof: Mapping[str, Any]) -> list[ProofLine]:
    values = proof.get("values") or []
    if not values:
        return [ProofLine(f"{proof.get('property')} was not assigned", "unassigned")]
    return [_fact(v) for v in values]


def proof_text(proof: Mapping[str, Any]) -> str:
    """The stored proof JSON as the indented text ``Proof.render()`` produced for it."""
    out: list[str] = []

    def walk(lines: Sequence[ProofLine], depth: int) -> None:
        for line in lines:
            out.append("  " * depth + line.text)
            walk(line.children, depth + 1)

    walk(proof_lines(proof), 0)
    return "\n".join(out)

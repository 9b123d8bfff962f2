"""Reading parsed Turtle: document order, consumption tracking and node naming.

rdflib does not keep triple order, but its Turtle parser adds triples in document order, so a
graph that numbers triples as they are added gives every triple a stable position (file index,
position in file). Lists of objects (``horis:card [..], [..]``) and rules are ordered by it.

Every triple the compiler reads is marked as consumed; whatever is left at the end is a triple
nothing understood (a misspelt predicate, a term on the wrong kind of node) and becomes a problem.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from rdflib import BNode, Graph, Literal, URIRef
from rdflib.namespace import RDF, RDFS
from rdflib.term import Node

from app.ontology.errors import Problem, ProblemCode
from app.ontology.names import HORIS

Triple = tuple[Node, Node, Node]

_PREFIXES = (
    (HORIS, "horis:"),
    (str(RDF), "rdf:"),
    (str(RDFS), "rdfs:"),
    ("http://www.w3.org/2002/07/owl#", "owl:"),
    ("http://www.w3.org/2001/XMLSchema#", "xsd:"),
)


def short(node: Node) -> str:
    """A compact name for messages: ``horis:when``, ``xsd:decimal``, else the full IRI."""
    text = str(node)
    for ns, prefix in _PREFIXES:
        if text.startswith(ns):
            return prefix + text[len(ns) :]
    return text


class OrderedGraph(Graph):
    """A graph that remembers the order in which the parser added its triples."""

    def __init__(self) -> None:
        super().__init__(bind_namespaces="none")
        self.positions: dict[Triple, int] = {}

    def add(self, triple: Triple) -> OrderedGraph:
        self.positions.setdefault(triple, len(self.positions))
        super().add(triple)
        return self


class Reader:
    """The merged deployment graph with order, consumption and problem collection."""

    def __init__(self, graphs: list[OrderedGraph]) -> None:
        self.order: dict[Triple, tuple[int, int]] = {}
        self._spo: dict[Node, dict[Node, list[Node]]] = defaultdict(lambda: defaultdict(list))
        self.parent: dict[Node, tuple[Node, Node]] = {}
        for index, graph in enumerate(graphs):
            for triple, pos in graph.positions.items():
                self.order.setdefault(triple, (index, pos))
        for triple in sorted(self.order, key=self.order.__getitem__):
            s, p, o = triple
            self._spo[s][p].append(o)
            if isinstance(o, BNode) and o not in self.parent:
                self.parent[o] = (s, p)
        self.consumed: set[Triple] = set()
        self.problems: list[Problem] = []
        #: nodes already reported as broken: their unread triples are not reported again
        self.dismissed: set[Node] = set()
        #: ``horis:`` IRIs already reported as unknown terms: not reported again as references
        self.unknown: set[Node] = set()

    # --- triples -----------------------------------------------------------------------------

    def triples(self) -> list[Triple]:
        return sorted(self.order, key=self.order.__getitem__)

    def subjects(self) -> list[Node]:
        return list(self._spo)

    def predicates(self, s: Node) -> list[Node]:
        return list(self._spo.get(s, {}))

    def position(self, s: Node) -> tuple[int, int]:
        """Where a subject first appears (its first triple as subject)."""
        found = [self.order[(s, p, o)] for p, objs in self._spo.get(s, {}).items() for o in objs]
        return min(found) if found else (1 << 30, 0)

    def peek(self, s: Node, p: Node) -> list[Node]:
        """Objects in document order, without consuming them."""
        return list(self._spo.get(s, {}).get(p, ()))

    def objects(self, s: Node, p: Node) -> list[Node]:
        """Objects in document order; the triples count as understood."""
        objs = self.peek(s, p)
        for o in objs:
            self.consumed.add((s, p, o))
        return objs

    def one(self, s: Node, p: Node) -> Node | None:
        objs = self.objects(s, p)
        if len(objs) > 1:
            self.problem("duplicate", s, f"{short(p)} is given {len(objs)} times; keep one")
        return objs[0] if objs else None

    def is_list(self, node: Node) -> bool:
        return node == RDF.nil or (isinstance(node, BNode) and bool(self.peek(node, RDF.first)))

    def items(self, head: Node) -> list[Node]:
        """The members of an RDF list, consuming its cells."""
        out: list[Node] = []
        seen: set[Node] = set()
        node = head
        while node != RDF.nil and node not in seen:
            seen.add(node)
            first = self.objects(node, RDF.first)
            rest = self.objects(node, RDF.rest)
            if len(first) != 1 or len(rest) != 1:
                self.problem("literal-type", node, "a malformed RDF list")
                break
            out.append(first[0])
            node = rest[0]
        return out

    def members(self, s: Node, p: Node) -> list[Node]:
        """Objects of ``s p`` where each object may itself be an RDF list (flattened)."""
        out: list[Node] = []
        for o in self.objects(s, p):
            out.extend(self.items(o) if self.is_list(o) else [o])
        return out

    def consume_all(self, s: Node, predicates: Iterable[Node]) -> None:
        for p in predicates:
            self.objects(s, p)

    # --- naming ------------------------------------------------------------------------------

    def locate(self, node: Node) -> tuple[str, str | None]:
        """The nearest named node above ``node`` and the predicate path from it."""
        segments: list[str] = []
        seen: set[Node] = set()
        while isinstance(node, BNode) and node not in seen:
            seen.add(node)
            up = self.parent.get(node)
            if up is None:
                break
            s, p = up
            if p == RDF.first:
                index, cell = 1, s
                while True:
                    cell_up = self.parent.get(cell)
                    if cell_up is None or cell_up[1] != RDF.rest:
                        break
                    index, cell = index + 1, cell_up[0]
                owner = self.parent.get(cell)
                if owner is None:
                    segments.append(f"[{index}]")
                    node = cell
                    break
                segments.append(f"{short(owner[1])}[{index}]")
                node = owner[0]
            else:
                siblings = self.peek(s, p)
                index_text = f"[{siblings.index(node) + 1}]" if len(siblings) > 1 else ""
                segments.append(short(p) + index_text)
                node = s
        path = "/".join(reversed(segments)) or None
        if isinstance(node, BNode):
            return f"_:{node}", path
        return str(node), path

    def problem(
        self, code: ProblemCode, node: Node, message: str, *, via: Node | None = None
    ) -> None:
        """Record a problem about ``node`` (blank nodes are named through their parents)."""
        name, path = self.locate(node)
        if via is not None:
            path = f"{path}/{short(via)}" if path else short(via)
        self.problems.append(Problem(code=code, node=name, path=path, message=message))


def literal_kind(node: Node) -> str:
    """A description of a node for type errors."""
    if isinstance(node, Literal):
        dt = short(node.datatype) if node.datatype else "a string"
        return f'"{node}" ({dt})'
    if isinstance(node, BNode):
        return "a blank node"
    return short(node) if isinstance(node, URIRef) else str(node)

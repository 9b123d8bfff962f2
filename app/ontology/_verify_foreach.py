"""Verification of a ``horis:forEach`` (on an ActionStep or a card): the paths it walks from the
focus name object properties whose domains fit, they end at one class, and its
``horis:where`` conditions type-check on that class.
"""

from __future__ import annotations

from app.ontology._typecheck import TypeChecker
from app.ontology.names import local_name
from app.ontology.rules import Condition


class ForEachChecker(TypeChecker):
    """``each_class``: the class a ``horis:forEach`` is about, once checked."""

    def each_class(
        self,
        focus: str | None,
        paths: tuple[tuple[str, ...], ...],
        where: tuple[Condition, ...],
        node: str,
        at: str,
    ) -> str | None:
        """The class of the instances a ``horis:forEach`` step or card is about (the range its
        paths end at), after checking the paths and ``horis:where``; None when unknown."""
        ends: set[str] = set()
        for path in paths:
            current: str | None = focus
            for iri in path:
                prop = self.o.properties.get(iri)
                if prop is None:
                    return None
                if current is not None:
                    self.check_domain(prop, current, node, at)
                if not prop.is_object:
                    self.add(
                        "type-check",
                        node,
                        f"horis:forEach reaches {prop.name}, whose values are literals: it must "
                        "end at instances",
                        at,
                    )
                    return None
                current = prop.range
            if current is not None:
                ends.add(current)
        if len(ends) != 1:
            if ends:
                names = ", ".join(sorted(local_name(e) for e in ends))
                self.add(
                    "type-check",
                    node,
                    f"the horis:forEach paths end at different classes ({names}): one class "
                    "carries what is read on each instance",
                    at,
                )
            return None
        (end,) = ends
        for c in where:
            self.condition_on(c, end, node, at.replace("horis:forEach", "horis:where"))
        return end

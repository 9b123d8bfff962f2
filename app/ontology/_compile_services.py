"""Compiling the parts of CDS services that stand apart from the workflow: combined services,
documentation pages and topics, clock skew, and the alternatives a suggestion swaps in."""

from __future__ import annotations

import json

from fhir.resources.R4B.dosage import Dosage
from pydantic import ValidationError
from rdflib import RDFS, Literal, URIRef
from rdflib.term import Node

from app.ontology import _values as V
from app.ontology._compile_base import CompilerBase, H
from app.ontology._rdf import literal_kind
from app.ontology.card_text import absolute_http
from app.ontology.services import DEFAULT_CLOCK_SKEW, AlternativeDecl, CombinedServiceDef


class ServicePartsCompiler(CompilerBase):
    """Combined services, service metadata and suggestion alternatives."""

    def _combined(self, node: Node) -> CombinedServiceDef:
        """``S a horis:CombinedService``: the services whose cards it combines, by id."""
        r = self.r
        members: list[str] = []
        for item in r.members(node, H("combines")):
            if isinstance(item, Literal) and isinstance(item.value, str) and item.value:
                members.append(item.value)
            else:
                r.problem(
                    "literal-type",
                    node,
                    "horis:combines lists the horis:id strings of CDS services",
                    via=H("combines"),
                )
        if not members:
            r.problem("missing", node, 'a combined service needs horis:combines ( "id" … )')
        if len(set(members)) != len(members):
            r.problem("duplicate", node, "horis:combines names a service twice")
        lines = self.number(node, H("maxLines"))
        if lines is not None and (lines != int(lines) or not 0 <= lines <= 10):
            r.problem("literal-type", node, "horis:maxLines is a whole number from 0 to 10")
            lines = None
        return CombinedServiceDef(
            iri=str(node),
            id=self.string(node, H("id"), required=True) or "",
            hook=self.string(node, H("hook"), required=True) or "",
            title=self.string(node, H("title"), required=True) or "",
            description=self.string(node, H("description"), required=True) or "",
            members=tuple(dict.fromkeys(members)),
            max_lines=3 if lines is None else int(lines),
            documentation=self._documentation(node),
            custom_hook=bool(self.boolean(node, H("customHook"))),
        )

    def _documentation(self, node: Node) -> str | None:
        """``horis:documentation <https://…>``: the deployment's page a card's source links to;
        an absolute http(s) URL, else a load error."""
        raw = self.r.one(node, H("documentation"))
        if raw is None:
            return None
        url = str(raw)
        if not absolute_http(url):
            self.r.problem(
                "literal-type",
                node,
                f"horis:documentation {url!r} is not an absolute http(s) URL",
                via=H("documentation"),
            )
            return None
        return url

    def _topic(self, node: Node) -> tuple[str, str, str] | None:
        """``horis:topic [ horis:code "system|code" ; rdfs:label "display" ]``: the coded topic
        of the service's cards (CDS Hooks ``source.topic``), as (system, code, display)."""
        topic = self.r.one(node, H("topic"))
        if topic is None:
            return None
        code = self.string(topic, H("code"), required=True) or ""
        display = self.string(topic, RDFS.label, required=True) or ""
        system, _, value = code.rpartition("|")
        if not system or not value:
            self.r.problem(
                "literal-type", topic, 'horis:code on a topic is "system|code"', via=H("code")
            )
            return None
        return system, value, display

    def _clock_skew(self, node: Node) -> float:
        raw = self.r.one(node, H("clockSkew"))
        if raw is None:
            return DEFAULT_CLOCK_SKEW
        seconds = V.parse_iso_duration(raw)
        if seconds is not None and seconds >= 0:
            return seconds
        self.r.problem(
            "literal-type",
            node,
            f'expects an ISO 8601 duration like "PT5M", got {literal_kind(raw)}',
            via=H("clockSkew"),
        )
        return DEFAULT_CLOCK_SKEW

    def _replaced(self, node: Node) -> tuple[str, ...]:
        """An alternative's ``horis:replaces``: codes given as ``"system|code"``, and the
        members of every value set named by its canonical (``horis:replaces <url>``), so that
        a class read by products (a value set) is replaced by product as by ingredient."""
        out: list[str] = []
        for member in self.r.members(node, H("replaces")):
            if isinstance(member, URIRef):
                url = self.value_set(node, H("replaces"), member)
                if url is not None and url in self.value_sets:
                    out.extend(sorted(self.value_sets[url].codes))
                continue
            text = V.as_string(member)
            if text is None:
                self.r.problem(
                    "literal-type",
                    node,
                    f"expects strings or value sets, got {literal_kind(member)}",
                    via=H("replaces"),
                )
            elif not V.valid_coding(text):
                self.r.problem("literal-type", node, f'code "{text}" must be "system|code"')
            else:
                out.append(text)
        return tuple(dict.fromkeys(out))

    def _alternative(self, node: Node) -> AlternativeDecl:
        """``[ horis:replaces "system|code" … ; horis:medication "system|code" ;
        horis:display "…" ; horis:keepDosage false ]``."""
        replaces = self._replaced(node)
        if not replaces:
            self.r.problem(
                "missing",
                node,
                'an alternative needs horis:replaces "system|code" (the drugs it stands in for)',
            )
        advice = self.string(node, H("advice"))
        medication = self.string(node, H("medication"), required=advice is None)
        display = self.string(node, H("display"), required=medication is not None)
        if advice is not None and (medication is not None or display is not None):
            self.r.problem(
                "duplicate",
                node,
                "an alternative names an order (horis:medication, horis:display) or gives "
                "horis:advice, not both",
            )
        if medication is not None and not V.valid_coding(medication):
            self.r.problem("literal-type", node, f'code "{medication}" must be "system|code"')
        keep = self.boolean(node, H("keepDosage"))
        if keep is not None and medication is None:
            self.r.problem("missing", node, "horis:keepDosage needs horis:medication")
        dosage = self._dosage(node)
        if dosage is not None and (medication is None or keep):
            self.r.problem(
                "duplicate",
                node,
                "horis:dosage is the dosage of the order horis:medication names, in place of "
                "the draft's (not with horis:keepDosage true)",
            )
        return AlternativeDecl(
            replaces=replaces,
            medication=medication,
            display=display,
            keep_dosage=bool(keep),
            advice=advice,
            dosage=dosage,
        )

    def _dosage(self, node: Node) -> str | None:
        """``horis:dosage "{…}"``: a FHIR R4 Dosage as JSON, checked against the R4 model."""
        raw = self.string(node, H("dosage"))
        if raw is None:
            return None
        try:
            value = json.loads(raw)
            Dosage.model_validate(value)
        except (ValueError, ValidationError) as exc:
            self.r.problem(
                "literal-type",
                node,
                f"horis:dosage is not a FHIR R4 Dosage in JSON: {str(exc).splitlines()[0]}",
                via=H("dosage"),
            )
            return None
        if not isinstance(value, dict) or not value.get("doseAndRate") or not value.get("timing"):
            self.r.problem(
                "missing",
                node,
                "horis:dosage needs doseAndRate and timing: the order swapped in is complete",
                via=H("dosage"),
            )
            return None
        return json.dumps(value, sort_keys=True)

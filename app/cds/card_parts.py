"""The parts every card shares, whoever builds it: its ``source``, the override reasons it offers,
the ``dev.horismos.card`` extension (the draft orders it is about and the card as one short line,
which a combined service groups and lists it by: ``app.cds.combined``), and the card about a
draft order that could not be read."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from app.cds.leniency import UnreadOrder
from app.ontology import card_text
from app.ontology.model import CdsServiceDef, Ontology

SUMMARY_LIMIT = card_text.SUMMARY_MAX_LENGTH
#: how every link to a run's decision record is labelled (a combined card names the service)
RUN_LINK_PREFIX = "Decision record"
RUN_LINK_LABEL = f"{RUN_LINK_PREFIX}: proof and trace"
#: The card extension naming the draft orders a card is about and the card as one short line.
CARD_EXTENSION = "dev.horismos.card"


def about(orders: Sequence[str], line: str | None) -> dict[str, Any]:
    """The card's ``dev.horismos.card`` extension: the draft orders it is about and the card as
    one short line, which a combined service (``app.cds.combined``) groups and lists it by."""
    about: dict[str, Any] = {}
    if orders:
        about["orders"] = list(orders)
    if line:
        about["line"] = card_text.shorten(line, SUMMARY_LIMIT)
    return about


def source(service: CdsServiceDef) -> dict[str, Any]:
    """The card's ``source``: the service's title, its deployment's documentation page and the
    coded topic where the deployment declares them (the versions are in the response's
    ``dev.horismos.run`` extension and the run record)."""
    source: dict[str, Any] = {"label": service.title or service.id}
    if service.documentation is not None:
        source["url"] = service.documentation
    if service.topic is not None:
        system, code, display = service.topic
        source["topic"] = {"system": system, "code": code, "display": display}
    return source


def unread_order_cards(
    *,
    ontology: Ontology,
    service: CdsServiceDef,
    unread: Sequence[UnreadOrder],
    run_url: str,
) -> list[dict[str, Any]]:
    """One warning card per draft order that could not be read: it was not checked, and an
    answer without a card for it would read as "all clear"."""
    cards: list[dict[str, Any]] = []
    for order in unread:
        name = order.name if order.name != order.reference else "A draft order"
        summary = card_text.shorten(
            f"{name} not checked: the draft order could not be read", SUMMARY_LIMIT
        )
        detail = (
            f"{name} ({order.reference}) was not checked by {service.title}: the draft order "
            f"could not be read: {order.reason}. Complete the order and sign it again to have "
            "it checked."
        )
        cards.append(
            {
                "uuid": str(uuid.uuid4()),
                "summary": summary,
                "indicator": "warning",
                "detail": card_text.markdown_escape(detail),
                "source": source(service),
                "links": [{"label": RUN_LINK_LABEL, "url": run_url, "type": "absolute"}],
            }
        )
        reasons = override_reasons(ontology, service.override_reasons)
        if reasons:  # a warning card, like every other: the prescriber may say why not
            cards[-1]["overrideReasons"] = reasons
        cards[-1]["extension"] = {
            CARD_EXTENSION: about([order.reference], "Not checked: the draft could not be read")
        }
    return cards


def override_reasons(ontology: Ontology, reasons: Sequence[str]) -> list[dict[str, str]]:
    """The CDS Hooks ``overrideReasons`` (Codings) of the override-reason individuals given
    (the loader made sure each has one ``system|code`` and a label)."""
    out: list[dict[str, str]] = []
    for iri in reasons:
        reason = ontology.individuals[iri]
        system, _, code = reason.codes[0].rpartition("|")
        out.append({"system": system, "code": code, "display": reason.label or code})
    return out


__all__ = [
    "CARD_EXTENSION",
    "RUN_LINK_LABEL",
    "RUN_LINK_PREFIX",
    "SUMMARY_LIMIT",
    "about",
    "override_reasons",
    "source",
    "unread_order_cards",
]

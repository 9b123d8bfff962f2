"""Combined services (``horis:CombinedService``): one card per draft order, however many of a
deployment's services find something about it.

A prescriber signing one opioid order may meet findings of ten services (the CDC guideline's
recommendations and medication safety); shown one card each, the same drug is named ten times
and the card that matters is lost among the others. A combined service is called like any
other: it calls each service it combines with the same hook request (each run decided, proved
and recorded on its own, under the same hookInstance: a retry gets each stored answer back and
so the same combined answer), then applies its card policy:

- the cards are grouped by the draft orders they are about (the ``dev.horismos.card``
  extension each card carries; cards about two orders join both orders' groups into one);
  a card about no order joins the only group there is, else a group of its own;
- each group becomes one card, led by its most important finding (highest indicator, then the
  order of ``horis:combines``): the lead's summary, detail, source and decision-record link;
- the other findings follow as at most ``horis:maxLines`` short lines (each card's
  ``horis:line``, else its summary), the rest counted, each listed finding's decision record
  linked; the indicator is the highest of the parts, the override reasons and suggestions
  those of the lead and listed parts.

Feedback on a combined card (its ``uuid`` is the lead's) is stored against the service that
issued the lead card (``app.cds.feedback``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.cds.ahead import EXTENSION_KEY
from app.cds.card_parts import CARD_EXTENSION, RUN_LINK_PREFIX
from app.cds.errors import DeploymentRefused, Issue
from app.deployments import Deployments
from app.ontology import card_text
from app.ontology.services import CdsServiceDef, CombinedServiceDef

#: The response extension listing the run of each combined service.
RUNS_EXTENSION = "dev.horismos.runs"

_RANK = {"info": 0, "warning": 1, "critical": 2}


def combined_service(
    deployments: Deployments, service_id: str
) -> tuple[CombinedServiceDef, list[CdsServiceDef]] | None:
    """The combined service ``service_id`` and the services it combines; None when the id is
    not a combined service's; 503 when one of its services is not served (it never answers
    for part of what it names)."""
    found = next((c for c, _d in deployments.combined() if c.id == service_id), None)
    if found is None:
        return None
    members = deployments.combined_members(found)
    if isinstance(members, str):
        raise DeploymentRefused(
            issues=[
                Issue(code="not-supported", diagnostics=f"{service_id} is not served: {members}")
            ]
        )
    return found, members


@dataclass(frozen=True, kw_only=True)
class MemberPrefetch:
    """The combined service's prefetch: each key once, and each member's keys → those keys."""

    templates: dict[str, str]
    keys: tuple[dict[str, str], ...]


def combined_prefetch(members: Sequence[CdsServiceDef]) -> MemberPrefetch:
    """The members' prefetch templates as one set: a query asked by two members under one key
    is asked once; a key two members use for different queries gets a numbered twin."""
    templates: dict[str, str] = {}
    by_query: dict[str, str] = {}
    keys: list[dict[str, str]] = []
    for member in members:
        mine: dict[str, str] = {}
        for t in member.prefetch:
            key = by_query.get(t.query)
            if key is None:
                key, n = t.key, 2
                while key in templates:
                    key, n = f"{t.key}{n}", n + 1
                templates[key] = t.query
                by_query[t.query] = key
            mine[t.key] = key
        keys.append(mine)
    return MemberPrefetch(templates=templates, keys=tuple(keys))


def member_body(body: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, Any]:
    """The hook request as the member with prefetch ``keys`` is sent it: its own keys only."""
    out = dict(body)
    prefetch = body.get("prefetch")
    if isinstance(prefetch, dict):
        out["prefetch"] = {mine: prefetch[ours] for mine, ours in keys.items() if ours in prefetch}
    return out


@dataclass(frozen=True)
class _Part:
    member: int  # the service's place in horis:combines
    position: int  # the card's place in its service's answer
    service: CdsServiceDef
    card: dict[str, Any]
    #: its service's run did not decide (a finding leads before a "not checked" of its level)
    undecided: bool = False

    @property
    def about(self) -> Mapping[str, Any]:
        ext = self.card.get("extension")
        found = ext.get(CARD_EXTENSION) if isinstance(ext, dict) else None
        return found if isinstance(found, dict) else {}

    @property
    def orders(self) -> tuple[str, ...]:
        return tuple(o for o in self.about.get("orders", ()) if isinstance(o, str))

    @property
    def line(self) -> str:
        line = self.about.get("line")
        return line if isinstance(line, str) and line else str(self.card.get("summary", ""))

    def key(self) -> tuple[int, bool, int, int]:
        rank = -_RANK.get(str(self.card.get("indicator")), 0)
        return (rank, self.undecided, self.member, self.position)


def _groups(parts: list[_Part]) -> list[list[_Part]]:
    """The parts grouped by draft order (two orders one card names are one group), in the order
    their first part comes; parts about no order join the only group, else form their own."""
    groups: list[tuple[set[str], list[_Part]]] = []
    loose: list[_Part] = []
    for part in parts:
        if not part.orders:
            loose.append(part)
            continue
        joined = [g for g in groups if g[0] & set(part.orders)]
        orders, members = set(part.orders), [part]
        for g in joined:
            orders |= g[0]
            members = g[1] + members
            groups.remove(g)
        groups.append((orders, sorted(members, key=lambda p: (p.member, p.position))))
    out = [members for _orders, members in groups]
    if loose and len(out) == 1:
        out[0] = out[0] + loose
    elif loose:
        out.append(loose)
    return out


def _link(part: _Part) -> dict[str, Any] | None:
    for link in part.card.get("links", ()):
        if isinstance(link, dict) and link.get("type") == "absolute":
            label = f"{RUN_LINK_PREFIX}: {part.service.title or part.service.id}"
            return {**link, "label": label}
    return None


def _card(group: list[_Part], max_lines: int) -> dict[str, Any]:
    ranked = sorted(group, key=_Part.key)
    lead, rest = ranked[0], ranked[1:]
    lines: list[_Part] = []
    seen = {lead.line}
    for part in rest:
        if part.line not in seen:
            seen.add(part.line)
            lines.append(part)
    listed, more = lines[:max_lines], len(lines) - min(len(lines), max_lines)
    card = {k: v for k, v in lead.card.items() if k != "extension"}
    card["indicator"] = lead.card.get("indicator")
    detail = str(lead.card.get("detail") or "")
    if listed:
        bullets = [f"- {card_text.markdown_escape(p.line)}" for p in listed]
        if more:
            bullets.append(f"- and {more} more on the decision records")
        detail = f"{detail}\n\n**Also for this order:**\n" + "\n".join(bullets)
    if detail:
        card["detail"] = detail
    links = list(lead.card.get("links", ()))
    for part in listed:
        link = _link(part)
        if link is not None and all(link["url"] != known.get("url") for known in links):
            links.append(link)
    if links:
        card["links"] = links
    reasons: list[dict[str, Any]] = []
    for part in (lead, *listed):
        for reason in part.card.get("overrideReasons", ()):
            if all(
                (reason.get("system"), reason.get("code")) != (r.get("system"), r.get("code"))
                for r in reasons
            ):
                reasons.append(reason)
    if reasons:
        card["overrideReasons"] = reasons
    suggestions: list[dict[str, Any]] = []
    given = [p for p in (lead, *listed) if p.card.get("suggestions")]
    for part in given:
        for s in part.card["suggestions"]:
            if all(s.get("label") != known.get("label") for known in suggestions):
                suggestions.append(s)
    if suggestions:
        card["suggestions"] = suggestions
        card["selectionBehavior"] = (
            given[0].card.get("selectionBehavior", "at-most-one")
            if len(given) == 1
            else "at-most-one"
        )
    orders = list(dict.fromkeys(o for p in group for o in p.orders))
    about: dict[str, Any] = {
        "parts": [{"service": p.service.id, "uuid": p.card.get("uuid")} for p in ranked]
    }
    if orders:
        about = {"orders": orders, **about}
    card["extension"] = {CARD_EXTENSION: about}
    return card


def _undecided(answer: Mapping[str, Any]) -> bool:
    ext = answer.get("extension")
    run = ext.get(EXTENSION_KEY) if isinstance(ext, dict) else None
    return isinstance(run, dict) and "decision" not in run


def combine(
    combined: CombinedServiceDef, answers: Sequence[tuple[CdsServiceDef, Mapping[str, Any]]]
) -> dict[str, Any]:
    """The combined service's answer from each member's answer (in ``horis:combines`` order)."""
    parts = [
        _Part(member=i, position=j, service=service, card=card, undecided=_undecided(answer))
        for i, (service, answer) in enumerate(answers)
        for j, card in enumerate(answer.get("cards", ()))
        if isinstance(card, dict)
    ]
    cards = [_card(group, combined.max_lines) for group in _groups(parts)]
    cards.sort(key=lambda c: -_RANK.get(str(c.get("indicator")), 0))
    response: dict[str, Any] = {"cards": cards}
    actions: list[Any] = []
    for _service, answer in answers:
        for action in answer.get("systemActions", ()):
            if action not in actions:
                actions.append(action)
    if actions:
        response["systemActions"] = actions
    runs = []
    for service, answer in answers:
        ext = answer.get("extension")
        run = ext.get(EXTENSION_KEY) if isinstance(ext, dict) else None
        if isinstance(run, dict):
            runs.append({"service": service.id, **run})
    response["extension"] = {RUNS_EXTENSION: runs}
    return response


__all__ = [
    "RUNS_EXTENSION",
    "MemberPrefetch",
    "combine",
    "combined_prefetch",
    "combined_service",
    "member_body",
]

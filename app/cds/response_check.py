"""The CDS Hooks 2.0 response validator: required fields of cards, suggestions, actions, links.

``check_response`` returns a list of problems (``"cards[0].indicator: required"``); an empty
list means the response is conformant. The service asserts it over every response it builds,
and the conformance tests run it over the published response fixtures.
"""

from __future__ import annotations

from typing import Any

from fhir.resources.R4B import get_fhir_model_class
from pydantic import ValidationError

from app.cds_vocabulary import ACTION_TYPES, INDICATORS, LINK_TYPES, SELECTION_BEHAVIORS
from app.ontology.card_text import SUMMARY_MAX_LENGTH


def _str(obj: dict[str, Any], key: str, where: str, out: list[str], *, required: bool) -> None:
    if key not in obj:
        if required:
            out.append(f"{where}.{key}: required")
        return
    if not isinstance(obj[key], str) or (required and not obj[key]):
        out.append(f"{where}.{key}: must be a non-empty string")


def _list(obj: dict[str, Any], key: str, where: str, out: list[str]) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        out.append(f"{where}.{key}: must be an array")
        return []
    return value


def _coding(c: Any, where: str, out: list[str], *, display: bool) -> None:
    if not isinstance(c, dict):
        out.append(f"{where}: must be an object")
        return
    _str(c, "code", where, out, required=True)
    _str(c, "system", where, out, required=True)
    _str(c, "display", where, out, required=display)


def _resource(res: Any, where: str, out: list[str]) -> None:
    if not isinstance(res, dict) or not isinstance(res.get("resourceType"), str):
        out.append(f"{where}: must be a FHIR resource")
        return
    try:
        get_fhir_model_class(res["resourceType"]).model_validate(res)
    except KeyError:
        out.append(f"{where}.resourceType: unknown resource type {res['resourceType']!r}")
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        out.append(f"{where}.{loc}: {first['msg']}")


def check_action(a: Any, where: str, out: list[str]) -> None:
    if not isinstance(a, dict):
        out.append(f"{where}: must be an object")
        return
    if a.get("type") not in ACTION_TYPES:
        out.append(f"{where}.type: required, one of {', '.join(ACTION_TYPES)}")
    _str(a, "description", where, out, required=True)
    kind = a.get("type")
    if kind in ("create", "update"):
        if "resource" not in a:
            out.append(f"{where}.resource: required for {kind}")
        else:
            _resource(a["resource"], f"{where}.resource", out)
    if kind == "delete":
        rid = a.get("resourceId")
        ids = rid if isinstance(rid, list) else [rid]
        if rid is None or not all(isinstance(i, str) and "/" in i for i in ids):
            out.append(f"{where}.resourceId: a relative reference 'Type/id' is required for delete")


def check_link(link: Any, where: str, out: list[str]) -> None:
    if not isinstance(link, dict):
        out.append(f"{where}: must be an object")
        return
    _str(link, "label", where, out, required=True)
    _str(link, "url", where, out, required=True)
    if link.get("type") not in LINK_TYPES:
        out.append(f"{where}.type: required, one of {', '.join(LINK_TYPES)}")
    if "appContext" in link and link.get("type") != "smart":
        out.append(f"{where}.appContext: only allowed on smart links")
    if "autolaunchable" in link and not isinstance(link["autolaunchable"], bool):
        out.append(f"{where}.autolaunchable: must be a boolean")


def check_card(card: Any, where: str = "card") -> list[str]:
    """Problems with one card (empty when conformant)."""
    out: list[str] = []
    if not isinstance(card, dict):
        return [f"{where}: must be an object"]
    _str(card, "uuid", where, out, required=False)
    _str(card, "summary", where, out, required=True)
    if isinstance(card.get("summary"), str) and len(card["summary"]) > SUMMARY_MAX_LENGTH:
        out.append(f"{where}.summary: must be at most {SUMMARY_MAX_LENGTH} characters")
    _str(card, "detail", where, out, required=False)
    if card.get("indicator") not in INDICATORS:
        out.append(f"{where}.indicator: required, one of {', '.join(INDICATORS)}")
    source = card.get("source")
    if not isinstance(source, dict):
        out.append(f"{where}.source: required")
    else:
        _str(source, "label", f"{where}.source", out, required=True)
        _str(source, "url", f"{where}.source", out, required=False)
        _str(source, "icon", f"{where}.source", out, required=False)
        if "topic" in source:
            _coding(source["topic"], f"{where}.source.topic", out, display=False)
    suggestions = _list(card, "suggestions", where, out)
    for i, s in enumerate(suggestions):
        at = f"{where}.suggestions[{i}]"
        if not isinstance(s, dict):
            out.append(f"{at}: must be an object")
            continue
        _str(s, "label", at, out, required=True)
        _str(s, "uuid", at, out, required=False)
        if "isRecommended" in s and not isinstance(s["isRecommended"], bool):
            out.append(f"{at}.isRecommended: must be a boolean")
        actions = _list(s, "actions", at, out)
        if "actions" in s and not actions:
            out.append(f"{at}.actions: an empty array suggests nothing the user could accept")
        for j, a in enumerate(actions):
            check_action(a, f"{at}.actions[{j}]", out)
    if suggestions and card.get("selectionBehavior") not in SELECTION_BEHAVIORS:
        out.append(
            f"{where}.selectionBehavior: required with suggestions, one of "
            f"{', '.join(SELECTION_BEHAVIORS)}"
        )
    for i, reason in enumerate(_list(card, "overrideReasons", where, out)):
        _coding(reason, f"{where}.overrideReasons[{i}]", out, display=True)
    for i, link in enumerate(_list(card, "links", where, out)):
        check_link(link, f"{where}.links[{i}]", out)
    return out


def check_response(resp: Any) -> list[str]:
    """Problems with a whole hook response ``{"cards": [...], "systemActions": [...]}``."""
    if not isinstance(resp, dict):
        return ["response: must be an object with a 'cards' array"]
    out: list[str] = []
    if not isinstance(resp.get("cards"), list):
        out.append("cards: required array")
    else:
        for i, card in enumerate(resp["cards"]):
            out.extend(check_card(card, f"cards[{i}]"))
    for i, a in enumerate(_list(resp, "systemActions", "response", out)):
        check_action(a, f"systemActions[{i}]", out)
    if "extension" in resp and not isinstance(resp["extension"], dict):
        out.append("extension: must be an object")
    return out

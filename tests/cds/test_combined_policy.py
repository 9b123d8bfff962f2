"""The card policy of a combined service (``app.cds.combine``) on answers built by hand: what
leads, what is listed, what is counted, what a card about two orders or about none becomes,
and how the prefetch of its services is asked once. The end-to-end behaviour over HTTP is in
tests/cds/test_one_card_per_order.py."""

from __future__ import annotations

from typing import Any

import pytest

from app.cds.combined import combine, combined_prefetch, member_body
from app.ontology import OntologyError, load_ontology
from app.ontology.services import CdsServiceDef, CombinedServiceDef, PrefetchTemplate

EXT = "dev.horismos.card"


def service(sid: str, *prefetch: tuple[str, str]) -> CdsServiceDef:
    return CdsServiceDef(
        iri=f"https://example.org/{sid}",
        id=sid,
        hook="order-sign",
        title=f"Service {sid}",
        description="",
        workflow="",
        prefetch=tuple(PrefetchTemplate(key=k, query=q) for k, q in prefetch),
    )


def card(
    summary: str,
    indicator: str = "warning",
    *,
    orders: tuple[str, ...] = ("MedicationRequest/a",),
    line: str | None = None,
    reasons: tuple[str, ...] = ("r1",),
) -> dict[str, Any]:
    about: dict[str, Any] = {}
    if orders:
        about["orders"] = list(orders)
    if line:
        about["line"] = line
    out: dict[str, Any] = {
        "uuid": f"uuid-{summary}",
        "summary": summary,
        "indicator": indicator,
        "detail": f"Detail of {summary}.",
        "source": {"label": "x"},
        "links": [
            {"label": "Decision record", "url": f"https://run/{summary}", "type": "absolute"}
        ],
        "overrideReasons": [{"system": "s", "code": r, "display": r} for r in reasons],
    }
    if about:
        out["extension"] = {EXT: about}
    return out


def answer(*cards: dict[str, Any], decided: bool = True) -> dict[str, Any]:
    run: dict[str, Any] = {"runId": "r", "workflow": "w", "version": "1", "terminal": "T"}
    if decided:
        run["decision"] = {"value": "x"}
    return {"cards": list(cards), "extension": {"dev.horismos.run": run}}


COMBINED = CombinedServiceDef(
    iri="https://example.org/c",
    id="c",
    hook="order-sign",
    title="Combined",
    description="",
    members=("s1", "s2", "s3", "s4", "s5"),
)
S = [service(f"s{i}") for i in range(1, 6)]


def test_one_card_per_order_led_by_the_highest_indicator_then_the_declared_order() -> None:
    answers = [
        (S[0], answer(card("one", "info", line="line one"))),
        (S[1], answer(card("two", line="line two"))),
        (S[2], answer(card("three", "critical", line="line three", reasons=("r2",)))),
        (S[3], answer(card("four", line="line four"))),
        (S[4], answer(card("five", line="line five"))),
    ]
    [out] = combine(COMBINED, answers)["cards"]

    assert (out["summary"], out["indicator"], out["uuid"]) == ("three", "critical", "uuid-three")
    lead, listed = out["detail"].split("\n\n**Also for this order:**\n")
    assert lead == "Detail of three."
    # three lines: the warnings in declared order, then the info; the rest counted
    assert listed.split("\n") == [
        "- line two",
        "- line four",
        "- line five",
        "- and 1 more on the decision records",
    ]
    assert [link["url"] for link in out["links"]] == [
        "https://run/three",
        "https://run/two",
        "https://run/four",
        "https://run/five",
    ]
    assert [r["code"] for r in out["overrideReasons"]] == ["r2", "r1"]
    assert [p["service"] for p in out["extension"][EXT]["parts"]] == [
        "s3",
        "s2",
        "s4",
        "s5",
        "s1",
    ]


def test_a_decided_finding_leads_before_a_not_checked_one_of_the_same_level() -> None:
    answers = [
        (S[0], answer(card("not checked"), decided=False)),
        (S[1], answer(card("finding"))),
    ]
    [out] = combine(COMBINED, answers)["cards"]
    assert out["summary"] == "finding"


def test_two_orders_get_a_card_each_and_a_card_about_both_joins_them() -> None:
    a, b = "MedicationRequest/a", "MedicationRequest/b"
    apart = combine(
        COMBINED, [(S[0], answer(card("on a", orders=(a,)), card("on b", orders=(b,))))]
    )
    assert [c["summary"] for c in apart["cards"]] == ["on a", "on b"]

    joined = combine(
        COMBINED,
        [
            (S[0], answer(card("on a", orders=(a,)), card("on b", orders=(b,)))),
            (S[1], answer(card("on both", "critical", orders=(a, b)))),
        ],
    )
    [out] = joined["cards"]
    assert out["summary"] == "on both"
    assert sorted(out["extension"][EXT]["orders"]) == [a, b]


def test_a_card_about_no_order_joins_the_only_order_or_stands_alone() -> None:
    one = combine(COMBINED, [(S[0], answer(card("order"), card("patient", orders=())))])
    assert len(one["cards"]) == 1

    none = combine(COMBINED, [(S[0], answer(card("patient", orders=())))])
    [alone] = none["cards"]
    assert alone["summary"] == "patient" and "orders" not in alone["extension"][EXT]


def test_a_line_said_twice_is_listed_once_and_no_findings_means_no_card() -> None:
    answers = [
        (S[0], answer(card("a", line="lead"))),
        (S[1], answer(card("b", line="same"))),
        (S[2], answer(card("c", line="same"))),
        (S[3], answer(card("d", line="lead"))),  # what the lead already says
    ]
    [out] = combine(COMBINED, answers)["cards"]
    assert out["detail"].endswith("**Also for this order:**\n- same")
    assert combine(COMBINED, [(S[0], answer()), (S[1], answer())])["cards"] == []


def test_the_response_names_the_run_of_each_service() -> None:
    out = combine(COMBINED, [(S[0], answer()), (S[1], answer(card("b")))])
    assert [r["service"] for r in out["extension"]["dev.horismos.runs"]] == ["s1", "s2"]


def test_a_query_asked_by_two_services_is_prefetched_once_and_keys_never_clash() -> None:
    one = service("one", ("patient", "Patient/{{context.patientId}}"), ("labs", "Observation?a"))
    two = service(
        "two",
        ("patient", "Patient/{{context.patientId}}"),
        ("labs", "Observation?b"),
        ("pt", "Patient/{{context.patientId}}"),
    )
    found = combined_prefetch([one, two])

    assert found.templates == {
        "patient": "Patient/{{context.patientId}}",
        "labs": "Observation?a",
        "labs2": "Observation?b",
    }
    assert found.keys == (
        {"patient": "patient", "labs": "labs"},
        {"patient": "patient", "labs": "labs2", "pt": "patient"},
    )
    body = {"hook": "order-sign", "prefetch": {"patient": {"id": "p"}, "labs2": None}}
    assert member_body(body, found.keys[1]) == {
        "hook": "order-sign",
        "prefetch": {"patient": {"id": "p"}, "labs": None, "pt": {"id": "p"}},
    }


@pytest.mark.parametrize(
    ("fragment", "words"),
    [
        ('horis:combines ( "a" "a" )', "names a service twice"),
        ("horis:combines ( 3 )", "horis:id strings"),
        ('horis:combines ( "a" ) ; horis:maxLines 11', "whole number from 0 to 10"),
    ],
)
def test_a_combined_service_that_cannot_mean_one_thing_is_a_load_error(
    tmp_path: Any, fragment: str, words: str
) -> None:
    path = tmp_path / "combined.ttl"
    path.write_text(
        "@prefix horis: <https://horismos.dev/ns#> .\n"
        "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
        '<https://example.org/c> a owl:Ontology ; owl:versionInfo "1" .\n'
        '<https://example.org/c#S> a horis:CombinedService ; horis:id "c" ;\n'
        '  horis:hook "order-sign" ; horis:title "C" ; horis:description "C" ;\n'
        f"  {fragment} .\n",
        encoding="utf-8",
    )
    with pytest.raises(OntologyError, match=words):
        load_ontology([path])

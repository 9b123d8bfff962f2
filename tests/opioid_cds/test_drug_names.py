"""What a prescriber reads on an opioid card: the drug by the name they know, one card per
order the recommendation is about, over HTTP in both modes.

The name is the order's own (its CodeableConcept's ``text``, else its coding's ``display``, or
its Medication's), else the drug data's name for its RxNorm code, else the code said plainly
(``RxNorm 1298088``): never a bare system URL, never a name made up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.ontology import load_ontology
from app.settings import Settings
from app.tools import ToolInvoker
from tests.cds.card_markdown import decision_record_text
from tests.support.fhir_server import FhirServer
from tests.support.opioid_cases import (
    FENTANYL_75,
    FLURAZEPAM_15,
    HYDROCODONE_10,
    OXYCODONE_ER_10,
    OXYCODONE_IR_5,
    RXNORM,
    TEMAZEPAM_20,
    ago,
    case,
    order,
    patient,
    today,
)
from tests.support.opioid_examples import Example, call_service
from toolkits.opioid_cds.names import short_name

pytestmark = pytest.mark.fhirserver

P = "pnames"
ADULT = patient(P)
#: the drug data's names (toolkits/opioid_cds/data/opioid-drugs.json), as the data file has them
DATA_NAME_OXYCODONE_ER = "12 HR oxycodone hydrochloride 10 MG Extended Release Oral Tablet"
DATA_NAME_FENTANYL = "72 HR fentanyl 0.075 MG/HR Transdermal System"


@pytest.fixture(scope="module")
def client(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path = tmp_path_factory.mktemp("opioid-names") / "horismos.db"
    path.write_bytes(sqlite_template.read_bytes())
    with TestClient(create_app(Settings(database_url=f"sqlite:///{path}"))) as app_client:
        yield app_client


def named(resource: dict[str, Any], *, text: str | None = None, display: bool = True) -> dict:
    """The order with its drug given a ``text`` and/or its coding's display dropped."""
    concept = resource.get("medicationCodeableConcept")
    if concept is None:  # a contained Medication
        concept = resource["contained"][0]["code"]
    if text is not None:
        concept["text"] = text
    if not display:
        for coding in concept["coding"]:
            coding.pop("display", None)
    return resource


def cards(client: TestClient, fhir: FhirServer, example: Example, mode: str) -> list[dict]:
    response = call_service(
        client, fhir, example, service_id=example.service, mode=mode, today=today()
    )
    assert response.status_code == 200, response.text
    return list(response.json()["cards"])


MODES = pytest.mark.parametrize("mode", ["prefetch", "fetch"])


@MODES
def test_two_extended_release_orders_get_a_card_each_naming_its_drug(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    example = case(
        "two-er", "opioidcds-03", "order-sign", ADULT,
        drafts=[order("d-oxy", P, OXYCODONE_ER_10), order("d-fent", P, FENTANYL_75),
                order("d-ir", P, OXYCODONE_IR_5)],
    )  # fmt: skip
    found = cards(client, fhir_server, example, mode)

    assert [c["indicator"] for c in found] == ["warning", "warning"], found
    oxy, fent = found
    assert oxy["summary"].endswith(": oxycodone ER 10 mg tablet"), oxy["summary"]
    assert fent["summary"].endswith(": " + short_name(FENTANYL_75[1])), fent["summary"]
    # each card is about its own order: the other drug is not its subject
    assert f"**{_md(FENTANYL_75[1])}**" not in oxy["detail"]
    assert f"**{_md(OXYCODONE_ER_10[1])}**" in oxy["detail"]
    # the immediate-release order is no subject of a card
    assert not any(short_name(OXYCODONE_IR_5[1]) in c["summary"] for c in found)


@MODES
def test_the_orders_own_text_comes_before_the_codings_display(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    draft = named(order("d-text", P, OXYCODONE_ER_10), text="OxyContin 10 mg 12-hour tablet")
    example = case("text", "opioidcds-03", "order-sign", ADULT, drafts=[draft])
    [card] = cards(client, fhir_server, example, mode)

    assert card["summary"].endswith(": OxyContin 10 mg 12-hour tablet"), card["summary"]


@MODES
def test_a_contained_medication_is_named_by_its_own_code_text(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    draft = named(order("d-cont", P, FENTANYL_75, contained=True), text="Fentanyl 75 mcg/h patch")
    example = case("contained", "opioidcds-03", "order-sign", ADULT, drafts=[draft])
    [card] = cards(client, fhir_server, example, mode)

    assert card["summary"].endswith(": Fentanyl 75 mcg/h patch"), card["summary"]


@MODES
def test_a_code_only_opioid_is_named_from_the_drug_data(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    draft = named(order("d-code", P, OXYCODONE_ER_10), display=False)
    example = case("code-only", "opioidcds-03", "order-sign", ADULT, drafts=[draft])
    [card] = cards(client, fhir_server, example, mode)

    assert card["summary"].endswith(": " + short_name(DATA_NAME_OXYCODONE_ER)), card["summary"]
    assert "rxnorm" not in card["summary"].lower()


COMMON = Path(__file__).resolve().parents[2] / "ontologies" / "opioid-cds" / "common.ttl"


@pytest.mark.parametrize(
    ("codings", "name"),
    [
        ([f"{RXNORM}|1049502"], DATA_NAME_OXYCODONE_ER),
        # the first code the data lists, whatever comes before it
        ([f"{RXNORM}|1298088", f"{RXNORM}|197696"], DATA_NAME_FENTANYL),
        # a benzodiazepine is no opioid: not in the data, so its code said plainly
        ([f"{RXNORM}|{FLURAZEPAM_15[0]}"], f"RxNorm {FLURAZEPAM_15[0]}"),
        ([], None),
    ],
)
def test_the_drug_name_tool_names_from_the_data_else_says_the_code(
    codings: list[str], name: str | None
) -> None:
    ontology = load_ontology([COMMON])
    tool = ontology.tools["https://horismos.dev/opioid-cds/common#drugNameTool"]
    answer = ToolInvoker().invoke(tool, {"medication": codings}, timeout=5.0)
    assert answer == {"drugName": name}


def _md(text: str) -> str:
    """``text`` as the card's Markdown detail escapes it."""
    from app.ontology.card_text import markdown_escape

    return markdown_escape(text)


@MODES
def test_two_opioid_orders_get_a_card_each_with_its_own_mme_and_the_total(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    """Hydrocodone 10 mg, 3 tablets a day (30 MME), and oxycodone 5 mg three times a day
    (22.5 MME), both for 30 days: 52.5 MME/day in all."""
    example = case(
        "two-mme", "opioidcds-04-05", "order-sign", ADULT,
        drafts=[order("d-hyd", P, HYDROCODONE_10, dose=3), order("d-oxy", P, OXYCODONE_IR_5,
                                                                 frequency=3)],
    )  # fmt: skip
    found = cards(client, fhir_server, example, mode)

    assert [c["indicator"] for c in found] == ["warning", "warning"], found
    hyd, oxy = found
    # each summary names its own drug once, short, after the advice and the total
    assert hyd["summary"] == (
        "Calibrate or taper: 52.5 MME/day with acetaminophen/hydrocodone 660/10 mg tablet"
    ), hyd["summary"]
    assert oxy["summary"] == "Calibrate or taper: 52.5 MME/day with oxycodone 5 mg tablet", oxy[
        "summary"
    ]
    assert hyd["detail"].startswith(f"**{_md(HYDROCODONE_10[1])}**: 30 MME/day, of a total")
    assert oxy["detail"].startswith(f"**{_md(OXYCODONE_IR_5[1])}**: 22\\.5 MME/day, of a total")


@MODES
def test_only_the_order_the_recommendation_is_about_gets_a_card(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    """Recommendation 6: 14 days of oxycodone is too long for acute pain, 5 days is not."""
    long_one = named(order("d-14", P, OXYCODONE_IR_5, supply_days=14), text="Oxycodone 5 mg x 14 d")
    example = case(
        "one-of-two", "opioidcds-06", "order-sign", ADULT,
        drafts=[order("d-5", P, OXYCODONE_IR_5, supply_days=5), long_one],
    )  # fmt: skip
    [card] = cards(client, fhir_server, example, mode)

    assert "Oxycodone 5 mg x 14 d for over 7 days" in card["summary"], card["summary"]
    assert short_name(OXYCODONE_IR_5[1]) not in card["summary"]


@MODES
def test_a_code_only_benzodiazepine_is_named_by_its_code_said_plainly(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    """Recommendation 11: a benzodiazepine is in no opioid drug data, so a draft that carries
    only its code reads as "RxNorm …", never as a system URL or a made-up name."""
    draft = named(order("d-benzo", P, FLURAZEPAM_15), display=False)
    example = case(
        "benzo-code-only", "opioidcds-11-order-select", "order-select", ADULT,
        drafts=[draft], stored=[order("s-oxy", P, OXYCODONE_IR_5, authored=ago(15))],
    )  # fmt: skip
    [card] = cards(client, fhir_server, example, mode)

    assert card["summary"].startswith(f"Caution: RxNorm {FLURAZEPAM_15[0]} with a benzo"), card
    assert f"**RxNorm {FLURAZEPAM_15[0]}**" in card["detail"]
    assert "http" not in card["summary"]


@MODES
def test_each_order_sign_service_names_the_drug_of_its_card(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    """A subacute or chronic opioid for an opioid-naive adult with nothing else on record:
    every order-sign service whose recommendation applies names the drug in summary and
    detail."""
    draft = named(order("d-chronic", P, OXYCODONE_IR_5), text="Oxycodone IR 5 mg tablet")
    for service in ("opioidcds-02", "opioidcds-09", "opioidcds-10-order-sign"):
        example = case(f"chronic-{service}", service, "order-sign", ADULT, drafts=[draft])
        [card] = cards(client, fhir_server, example, mode)
        assert card["summary"].endswith(": Oxycodone IR 5 mg tablet"), (service, card)
        assert "**Oxycodone IR 5 mg tablet**" in card["detail"], (service, card["detail"])


@MODES
def test_the_proof_names_the_orders_on_both_sides_by_their_drugs(
    client: TestClient, fhir_server: FhirServer, mode: str
) -> None:
    """Recommendation 11: an opioid on record and a benzodiazepine on record; the card's proof
    names both orders by their drugs (horis:namedBy), not as "Medication order"."""
    example = case(
        "pv-both-named", "opioidcds-11-patient-view", "patient-view", ADULT,
        stored=[order("s-oxy", P, OXYCODONE_IR_5, authored=ago(15)),
                named(order("s-benzo", P, TEMAZEPAM_20, authored=ago(40)), display=False)],
    )  # fmt: skip
    [card] = cards(client, fhir_server, example, mode)

    # the card names both orders by their drugs; its proof is on the decision record
    assert f"**{_md(OXYCODONE_IR_5[1])}**" in card["detail"]
    assert f"RxNorm {TEMAZEPAM_20[0]}" in card["detail"]
    assert "Medication order" not in card["detail"]
    record = decision_record_text(client, card)
    assert f"Medication order on record: {OXYCODONE_IR_5[1]}" in record
    # a benzodiazepine without a display is named by its code, said plainly
    assert f"Medication order on record: RxNorm {TEMAZEPAM_20[0]}" in record
    assert "Medication order on record: Medication order" not in record

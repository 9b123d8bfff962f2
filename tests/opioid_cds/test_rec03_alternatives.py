"""Recommendation 3's alternatives (ontologies/opioid-cds/rec03.ttl, :ImmediateReleaseForm)
against the data they were drawn from: the guide's value sets and the toolkit's drug data.

Each alternative is an immediate-release, single-ingredient, generic oral tablet of the guide's
opioid analgesics, the lowest strength the data lists for its ingredient, and it replaces only
extended-release products of that same ingredient; every single-ingredient extended-release
product whose ingredient has such a tablet is replaced (none is left with "no alternative" by
omission)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.ontology.loader import load_ontology
from app.ontology.model import AlternativeDecl

ROOT = Path(__file__).resolve().parents[2]
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm|"
VALUESETS = ROOT / "ontologies/opioid-cds/valuesets"
DRUGS: dict[str, Any] = json.loads(
    (ROOT / "toolkits/opioid_cds/data/opioid-drugs.json").read_text()
)["drugs"]


def members(name: str) -> dict[str, str]:
    vs = json.loads((VALUESETS / f"{name}.json").read_text())
    return {c["code"]: c["display"] for c in vs["expansion"]["contains"]}


EXTENDED = members("extended-release-opioid-with-ambulatory-misuse-potential")
ANALGESICS = members("opioid-analgesics-with-ambulatory-misuse-potential")


def alternatives() -> tuple[AlternativeDecl, ...]:
    ontology = load_ontology(
        [ROOT / "ontologies/opioid-cds/rec03.ttl", ROOT / "ontologies/opioid-cds/common.ttl"]
    )
    (service,) = ontology.services.values()
    (suggestion,) = service.cards[0].suggestions
    return suggestion.alternatives


def single_ingredient(code: str) -> str | None:
    drug = DRUGS.get(code)
    if drug is None or len(drug["ingredients"]) != 1 or " / " in drug["name"]:
        return None
    return str(drug["ingredients"][0]["code"])


def immediate_release_tablets(ingredient: str) -> list[tuple[float, str]]:
    out = []
    for code in ANALGESICS:
        drug = DRUGS.get(code)
        if (
            drug is not None
            and code not in EXTENDED
            and not drug["longActing"]
            and "[" not in drug["name"]
            and drug["doseForm"]["name"] == "Oral Tablet"
            and single_ingredient(code) == ingredient
        ):
            out.append((drug["ingredients"][0]["strength"]["value"], code))
    return sorted(out)


def test_each_alternative_is_the_lowest_strength_immediate_release_tablet_of_its_ingredient() -> (
    None
):
    for alt in alternatives():
        code = alt.medication.removeprefix(RXNORM)
        assert alt.display == ANALGESICS[code]
        ingredient = single_ingredient(code)
        assert ingredient is not None, alt
        assert immediate_release_tablets(ingredient)[0][1] == code
        for replaced in alt.replaces:
            assert replaced.removeprefix(RXNORM) in EXTENDED, replaced
            assert single_ingredient(replaced.removeprefix(RXNORM)) == ingredient, replaced


def test_every_extended_release_product_with_an_immediate_release_tablet_is_replaced() -> None:
    replaced = {code.removeprefix(RXNORM) for alt in alternatives() for code in alt.replaces}
    for code in EXTENDED:
        ingredient = single_ingredient(code)
        if ingredient is not None and immediate_release_tablets(ingredient):
            assert code in replaced, (code, EXTENDED[code])

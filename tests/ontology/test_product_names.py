"""Product names read for their ingredients (``app.ontology.product_names``): RxNorm's normalised
names and the shorter ones EHRs write, branded or not."""

from __future__ import annotations

import pytest

from app.ontology.product_names import branded, ingredients


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Diazepam [Valium]", {"diazepam"}),
        ("diazepam 5 MG Oral Tablet", {"diazepam"}),
        (
            "Acetaminophen 300 MG / HYDROcodone Bitartrate 5 MG [Vicodin]",
            {"acetaminophen", "hydrocodone bitartrate"},
        ),
        (
            "12 HR oxycodone hydrochloride 10 MG Extended Release Oral Tablet",
            {"oxycodone hydrochloride"},
        ),
        ("Carbamazepine[Tegretol]", {"carbamazepine"}),
        ("Suboxone 2 MG / 0.5 MG Sublingual Film", None),  # a part names no ingredient
        ("", None),
    ],
)
def test_ingredients(name: str, expected: set[str] | None) -> None:
    found = ingredients(name)
    assert (set(found) if found is not None else None) == expected


def test_only_a_bracketed_brand_is_a_brand() -> None:
    assert branded("Diazepam [Valium]") and not branded("diazepam 5 MG Oral Tablet")

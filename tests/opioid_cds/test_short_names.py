"""A summary names the drug as a prescriber writes it, shortened by rule from RxNorm's normalized
name; the card's detail keeps the name whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkits.opioid_cds.names import LONGEST, short_name

DRUGS = (
    Path(__file__).resolve().parents[2] / "toolkits" / "opioid_cds" / "data" / "opioid-drugs.json"
)


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (
            "12 HR Oxycodone Hydrochloride 20 MG Extended Release Oral Tablet",
            "oxycodone ER 20 mg tablet",
        ),
        ("oxyCODONE HCl 10 MG 12HR Extended Release Oral Tablet", "oxycodone ER 10 mg tablet"),
        (
            "acetaminophen 325 MG / hydrocodone bitartrate 10 MG Oral Tablet [Norco]",
            "acetaminophen/hydrocodone 325/10 mg tablet",
        ),
        ("72 HR fentanyl 0.075 MG/HR Transdermal System", "fentanyl 0.075 mg/h 72-hour patch"),
        ("temazepam 20 MG Oral Capsule", "temazepam 20 mg capsule"),
        ("Diazepam 5 MG Oral Tablet [Valium]", "diazepam 5 mg tablet"),
        (
            "buprenorphine 2 MG / naloxone 0.5 MG Sublingual Film",
            "buprenorphine/naloxone 2/0.5 mg sublingual film",
        ),
        # not RxNorm's form: kept as the EHR wrote it
        ("Oxycodone IR 5 mg tablet", "Oxycodone IR 5 mg tablet"),
        ("Suboxone 2 MG / 0.5 MG Sublingual Film", "Suboxone 2 MG / 0.5 MG Sublingual Film"),
        ("RxNorm 104693", "RxNorm 104693"),
    ],
)
def test_a_name_is_said_as_a_prescriber_writes_it(name: str, short: str) -> None:
    assert short_name(name) == short


def test_a_long_name_no_rule_shortens_is_cut_at_a_word() -> None:
    name = "Morphine (as the sulfate salt) for injection, single-dose vial, preservative free"
    got = short_name(name)
    assert got.endswith("…") and len(got) <= LONGEST
    assert name.startswith(got[:-1])


def test_every_drug_of_the_opioid_data_gets_a_name_of_at_most_the_longest() -> None:
    """The names the drug data gives a code-only order (1,136 RxNorm drugs): none longer than
    the longest a summary gives a drug; most of the current extract's shortened by rule rather
    than cut (the earlier extract's retired products are mostly cough-and-cold liquids)."""
    drugs = json.loads(DRUGS.read_text(encoding="utf-8"))["drugs"]
    every = {d["name"]: short_name(d["name"]) for d in drugs.values()}
    too_long = {n: s for n, s in every.items() if len(s) > LONGEST}
    assert not too_long, too_long
    # and most are shortened by rule, not cut
    long = {d["name"]: every[d["name"]] for d in drugs.values() if "extract" not in d}
    assert len(long) == 910
    cut = [s for s in long.values() if s.endswith("…")]
    # cut: liquid and three-ingredient combination products (cough and cold, aspirin/caffeine)
    assert len(cut) < len(long) / 4, cut[:10]

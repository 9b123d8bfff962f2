"""Medication safety's drug, lab and allergy lists cover the drugs as EHRs order them, over HTTP.

Each case is a product or a lab code the deployment did not read before (an order by RxNorm
clinical drug, ketorolac, penicillin V, an eGFR reported under another LOINC code): each now
decides what its ingredient twin decides. The value sets and where their codes come from:
ontologies/valuesets/ and docs/examples.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
MED = "/cds-services/horismos-med-safety"
GFR = "mL/min/{1.73_m2}"
VALUESETS = Path(__file__).resolve().parents[2] / "ontologies" / "valuesets"
PENICILLIN_ALLERGY = "91936005"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def _call(
    client: TestClient,
    rxnorm: str,
    *,
    egfr: tuple[str, float] | None = ("33914-3", 60),
    potassium: float = 4.2,
    allergy: str | None = None,
) -> str:
    """The decision for one draft order of ``rxnorm`` for a patient born in 1970, with the
    eGFR (LOINC code, value), the potassium and, if given, one penicillin-class allergy."""
    pid = fx.new_id()
    labs = [fx.observation(pid, "2823-3", potassium, "mmol/L", category="laboratory")]
    if egfr is not None:
        labs.append(fx.observation(pid, egfr[0], egfr[1], GFR, category="laboratory"))
    allergies = [fx.allergy(pid, allergy)] if allergy else []
    if allergy is not None and "|" in allergy:  # "system|code": an allergen of another system
        system, _, code = allergy.partition("|")
        allergies[0]["code"] = {"coding": [{"system": system, "code": code}]}
    body = fx.order_sign(
        pid,
        [fx.draft_order(pid, rxnorm)],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "allergies": fx.searchset(allergies),
            "labs": fx.searchset(labs),
        },
    )
    resp = client.post(MED, json=body)
    assert resp.status_code == 200, resp.text
    run: dict[str, Any] = resp.json()["extension"]["dev.horismos.run"]
    if "undecided" in run:
        return "undecided: " + ", ".join(sorted(i["input"] for i in run["undecided"]["inputs"]))
    return str(run["decision"]["value"])


@pytest.mark.parametrize(
    ("rxnorm", "drug", "labs", "expected"),
    [
        (
            "197806",
            "ibuprofen 600 MG oral tablet (SCD)",
            {"egfr": ("33914-3", 22)},
            "Contraindicated",
        ),
        ("834022", "ketorolac 10 MG oral tablet", {"egfr": ("33914-3", 22)}, "Contraindicated"),
        ("861007", "metformin 500 MG oral tablet", {"egfr": ("33914-3", 22)}, "Contraindicated"),
        ("861007", "metformin 500 MG oral tablet", {"egfr": ("33914-3", 40)}, "Caution"),
        ("314076", "lisinopril 10 MG oral tablet", {"potassium": 6.1}, "Caution"),
        ("3827", "enalapril (ingredient)", {"potassium": 6.1}, "Caution"),
        ("314076", "lisinopril 10 MG oral tablet", {"potassium": 4.2}, "Safe"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_product_decides_like_its_ingredient(
    client: TestClient, rxnorm: str, drug: str, labs: dict[str, Any], expected: str
) -> None:
    assert _call(client, rxnorm, **labs) == expected, drug


@pytest.mark.parametrize(
    "rxnorm",
    ["834102", "308191", "617296", "1721475"],
    ids=[
        "penicillin-v-500-tablet",
        "amoxicillin-500-capsule",
        "amox-clav-500",
        "ampicillin-1g-inj",
    ],
)
def test_a_penicillin_product_with_a_penicillin_allergy_is_contraindicated(
    client: TestClient, rxnorm: str
) -> None:
    assert _call(client, rxnorm, allergy=PENICILLIN_ALLERGY) == "Contraindicated"
    assert _call(client, rxnorm) == "Safe"  # the complete case without the allergy


def test_an_allergy_to_amoxicillin_by_its_own_snomed_finding_is_a_penicillin_allergy(
    client: TestClient,
) -> None:
    """An allergy to amoxicillin recorded by its own SNOMED CT finding (294505008) was read as
    no penicillin allergy, the list being complete in SNOMED CT: amoxicillin was "Safe"."""
    assert _call(client, "308191", allergy="294505008") == "Contraindicated"  # 500 mg capsule
    assert _call(client, "723", allergy="294505008") == "Contraindicated"
    assert _call(client, "308191") == "Safe"  # the complete case without the allergy


def test_an_allergen_coded_in_rxnorm_leaves_the_check_undecided(client: TestClient) -> None:
    assert _call(client, "723", allergy=f"{fx.RXNORM}|723").startswith("undecided: hasAllergy")


@pytest.mark.parametrize(
    "loinc", ["50210-4", "69405-9", "70969-1", "77147-7", "94677-2", "98980-6"]
)
def test_an_egfr_under_each_loinc_code_in_use_is_read(client: TestClient, loinc: str) -> None:
    """A CKD-EPI 2021 creatinine-cystatin C eGFR (98980-6), a method-less one (69405-9)…
    were "another test": ibuprofen at eGFR 22 was then only a caution for an unknown eGFR."""
    assert _call(client, "5640", egfr=(loinc, 22)) == "Contraindicated"
    assert _call(client, "5640", egfr=(loinc, 60)) == "Safe"


def test_the_cockcroft_gault_clearance_is_not_an_egfr(client: TestClient) -> None:
    """35591-7 is a creatinine clearance in mL/min, not normalised to 1.73 m²: another test, so
    the eGFR is unknown (the NSAID is not checked), not contraindicated by a clearance of 22."""
    assert _call(client, "5640", egfr=("35591-7", 22)) == _call(client, "5640", egfr=None)
    assert _call(client, "5640", egfr=None).startswith("undecided: egfr")


def test_every_product_value_set_names_its_source_and_lists_rxnorm_codes() -> None:
    files = sorted(VALUESETS.glob("med-safety-*-products.json"))
    assert len(files) == 11
    for path in files:
        vs = json.loads(path.read_text(encoding="utf-8"))
        assert vs["url"] == "https://horismos.dev/med-safety/ValueSet/" + path.stem.removeprefix(
            "med-safety-"
        )
        assert vs["meta"]["source"].startswith(
            ("https://github.com/HL7/PDDI-CDS/blob/", "https://github.com/canvas-medical/")
        )
        [include] = vs["compose"]["include"]
        assert include["system"] == "http://www.nlm.nih.gov/research/umls/rxnorm"
        names = [c["display"] for c in include["concept"]]
        assert names and not [n for n in names if "Topical" in n or "Ophthalmic" in n], path.name


def test_the_single_ingredient_nsaid_set_is_what_its_script_writes_from_the_product_sets(
    tmp_path: Path,
) -> None:
    """The alternative (acetaminophen for an NSAID) replaces the products of this set only: it
    must hold no combination product (hydrocodone/ibuprofen), and stay derived from the files."""
    committed = json.loads(
        (VALUESETS / "med-safety-nsaid-single-ingredient.json").read_text(encoding="utf-8")
    )
    out = tmp_path / "out.json"
    script = VALUESETS.parents[1] / "scripts" / "single_ingredient_products.py"
    subprocess.run(
        [
            sys.executable, str(script), "--url", committed["url"], "--name", committed["name"],
            "--title", committed["title"], str(out),
            *(str(VALUESETS / f"med-safety-{drug}-products.json")
              for drug in ("ibuprofen", "naproxen", "diclofenac", "ketorolac")),
        ],
        check=True,
    )  # fmt: skip
    assert json.loads(out.read_text(encoding="utf-8")) == committed
    names = [c["display"] for c in committed["compose"]["include"][0]["concept"]]
    assert names and not [n for n in names if " / " in n]
    assert "Ibuprofen 600 MG Oral Tablet" in names


def test_an_allergy_whose_status_code_r4_does_not_allow_is_not_read_as_no_allergy(
    client: TestClient,
) -> None:
    """``clinicalStatus`` coded ``Active`` in the clinical-status system: R4's required binding
    allows ``active`` only, and the filter that reads ``active`` would have dropped the allergy
    as not active — amoxicillin "Safe" for a patient allergic to penicillin."""
    pid = fx.new_id()
    allergy = fx.allergy(pid, PENICILLIN_ALLERGY)
    allergy["clinicalStatus"]["coding"][0]["code"] = "Active"
    body = fx.order_sign(
        pid,
        [fx.draft_order(pid, "723")],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "allergies": fx.searchset([allergy]),
            "labs": fx.searchset([fx.observation(pid, "33914-3", 60, GFR, category="laboratory")]),
        },
    )
    run = client.post(MED, json=body).json()["extension"]["dev.horismos.run"]
    assert "decision" not in run
    assert {i["input"] for i in run["undecided"]["inputs"]} == {"hasAllergy"}
    assert _call(client, "723", allergy=PENICILLIN_ALLERGY) == "Contraindicated"  # as R4 writes it


def _answer(client: TestClient, rxnorms: list[str], egfr: float = 25) -> dict[str, Any]:
    pid = fx.new_id()
    body = fx.order_sign(
        pid,
        [fx.draft_order(pid, code) for code in rxnorms],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "allergies": fx.searchset([]),
            "labs": fx.searchset(
                [fx.observation(pid, "33914-3", egfr, GFR, category="laboratory")]
            ),
        },
    )
    resp = client.post(MED, json=body)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    return answer


def test_an_opioid_order_is_outside_medication_safety_and_gets_no_card(
    client: TestClient,
) -> None:
    """Oxycodone is in no list of this service, and it has no rule about opioids: the order is
    outside its scope (horis:knownOutside), not unread: no "not checked" card on every opioid
    prescription, and no "Safe" either — nothing was there to check."""
    answer = _answer(client, ["1049683"])  # oxycodone hydrochloride 10 MG Oral Tablet

    assert answer["cards"] == []
    run = answer["extension"]["dev.horismos.run"]
    assert run["terminal"] == "NothingToCheck"
    assert "decision" not in run and "undecided" not in run


def test_a_drug_no_list_names_is_still_unread_not_outside(client: TestClient) -> None:
    """Scope is a list, not a guess: celecoxib (an NSAID this deployment does not list) is in
    neither the drug lists nor the outside-scope set, so it is still not called safe."""
    answer = _answer(client, ["140587"])  # celecoxib 200 MG Oral Capsule

    [card] = answer["cards"]
    assert card["summary"] == "Medication safety not checked: lab results or allergies incomplete"
    assert "RxNorm code 140587 is not one this service lists" in card["detail"]


def test_an_opioid_beside_an_nsaid_leaves_the_nsaid_checked(client: TestClient) -> None:
    """The complete twin: an order outside the scope does not hide one inside it."""
    answer = _answer(client, ["1049683", "197806"])  # oxycodone, ibuprofen 600 MG at eGFR 25

    [card] = answer["cards"]
    assert card["indicator"] == "critical"
    assert answer["extension"]["dev.horismos.run"]["decision"]["value"] == "Contraindicated"


def test_the_outside_scope_set_is_what_its_script_writes_from_the_guides_sets(
    tmp_path: Path,
) -> None:
    """Derived, not hand-kept: the opioid guide's drug value sets less every product the
    service's own lists name (a hydrocodone/ibuprofen product stays an NSAID order)."""
    committed = json.loads((VALUESETS / "med-safety-outside-scope.json").read_text())
    guide = VALUESETS.parent / "opioid-cds" / "valuesets"
    sources = [
        guide / "opioid-analgesics-with-ambulatory-misuse-potential.json",
        guide / "supplements" / "opioid-analgesics-with-ambulatory-misuse-potential-brands.json",
        guide / "benzodiazepine-medications.json",
        guide / "cns-depressant-medications.json",
        guide / "naloxone-medications.json",
        guide / "buprenorphine-and-methadone-medications.json",
    ]
    own = sorted(p for p in VALUESETS.glob("med-safety-*-products.json"))
    out = tmp_path / "out.json"
    script = VALUESETS.parents[1] / "scripts" / "outside_scope.py"
    purpose = committed["description"].split(" The concepts of: ")[0]
    subprocess.run(
        [
            sys.executable, str(script), str(out), "--url", committed["url"],
            "--name", committed["name"], "--title", committed["title"], "--purpose", purpose,
            "--from", *(str(p.relative_to(VALUESETS.parents[1])) for p in sources),
            "--except", *(str(p.relative_to(VALUESETS.parents[1])) for p in own),
        ],
        check=True,
        cwd=VALUESETS.parents[1],
    )  # fmt: skip
    assert json.loads(out.read_text()) == committed
    codes = {c["code"] for c in committed["compose"]["include"][0]["concept"]}
    assert "1049683" in codes  # oxycodone 10 mg
    ibuprofen = json.loads((VALUESETS / "med-safety-ibuprofen-products.json").read_text())
    listed = {c["code"] for i in ibuprofen["compose"]["include"] for c in i["concept"]}
    assert not codes & listed

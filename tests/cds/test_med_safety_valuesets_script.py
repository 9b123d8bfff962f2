"""scripts/med_safety_valuesets.py keeps the products an order is coded with and leaves out
what the renal and allergy checks are not about, from inputs shaped like its two sources."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "med_safety_valuesets.py"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"


def _pddi(concepts: list[tuple[str, str]], version: str = "US 1.1") -> str:
    body = "".join(
        f'<concept><code value="{c}"/><display value="{d}"/></concept>' for c, d in concepts
    )
    return (
        '<ValueSet xmlns="http://hl7.org/fhir"><version value="' + version + '"/>'
        f'<compose><include><system value="{RXNORM}"/>{body}</include></compose></ValueSet>'
    )


def _vsac(sets: list[tuple[str, str, list[tuple[str, str]]]]) -> str:
    out = ["from ..value_set import ValueSet\n"]
    for i, (oid, name, codes) in enumerate(sets):
        lines = "".join(f'        "{c}",  # {d}\n' for c, d in codes)
        out.append(
            f"\nclass Set{i}(ValueSet):\n"
            f'    VALUE_SET_NAME = "{name}"\n    OID = "{oid}"\n'
            f'    EXPANSION_VERSION = "eCQM Update 2025-05-08"\n\n'
            f"    RXNORM = {{\n{lines}    }}\n"
        )
    return "".join(out)


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    vocab = tmp_path / "vocabulary"
    vocab.mkdir()
    oral = ("5640", "Ibuprofen")
    products = [
        oral,
        ("197806", "Ibuprofen 600 MG Oral Tablet"),
        ("1", "Ibuprofen 50 MG/ML Topical Cream"),
        ("2", "Ibuprofen 200 MG [Advil]"),
    ]
    (vocab / "valueset-ibuprofen.xml").write_text(_pddi(products))
    (vocab / "valueset-ibuprofen-exclude.xml").write_text(
        _pddi([("1", "Ibuprofen 50 MG/ML Topical Cream")])
    )
    for drug in ("naproxen", "diclofenac", "ketorolac"):
        (vocab / f"valueset-{drug}.xml").write_text(
            _pddi(
                [
                    ("9" + str(len(drug)), f"{drug} 10 MG Oral Tablet"),
                    ("8", f"{drug} 1 MG/ML Ophthalmic Solution"),
                ]
            )
        )
    vsac = tmp_path / "vsac"
    vsac.mkdir()
    antibiotics = [
        ("834102", "penicillin V potassium 500 MG Oral Tablet"),
        ("308191", "amoxicillin 500 MG Oral Capsule"),
        ("308212", "ampicillin 500 MG Oral Capsule"),
        ("197516", "azithromycin 250 MG Oral Tablet"),
    ]
    (vsac / "medication.py").write_text(
        _vsac(
            [
                ("2.16.840.1.113883.3.464.1003.196.12.1001", "Pharyngitis", antibiotics),
                ("2.16.840.1.113883.3.464.1003.1190", "URI", antibiotics[:1]),
                (
                    "2.16.840.1.113762.1.4.1196.394",
                    "Hypoglycemics",
                    [
                        ("861007", "metformin hydrochloride 500 MG Oral Tablet"),
                        ("3", "glipizide 5 MG Oral Tablet"),
                    ],
                ),
                (
                    "2.16.840.1.113883.3.526.3.1139",
                    "ACE or ARB",
                    [
                        ("314076", "lisinopril 10 MG Oral Tablet"),
                        ("4", "losartan potassium 50 MG Oral Tablet"),
                        ("5", "enalapril maleate 5 MG Oral Tablet"),
                    ],
                ),
            ]
        )
    )
    (vsac / "allergy.py").write_text(
        _vsac(
            [
                (
                    "2.16.840.1.113883.3.526.3.1489",
                    "ACE or ARB ingredient",
                    [("29046", "lisinopril"), ("52175", "losartan"), ("3827", "enalapril")],
                )
            ]
        )
    )
    return vocab, vsac


def _run(vocab: Path, vsac: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(vocab),
            "--source-commit",
            "abc",
            str(vsac),
            "--vsac-commit",
            "def",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def _codes(out: Path, key: str) -> dict[str, str]:
    vs = json.loads((out / f"med-safety-{key}-products.json").read_text(encoding="utf-8"))
    return {c["code"]: c["display"] for c in vs["compose"]["include"][0]["concept"]}


def test_the_script_keeps_systemic_products_and_the_drug_s_own(tmp_path: Path) -> None:
    vocab, vsac = _inputs(tmp_path)
    out = tmp_path / "out"
    done = _run(vocab, vsac, out)
    assert done.returncode == 0, done.stderr
    # an order's product, not the ingredient, a topical cream or a brand component
    assert _codes(out, "ibuprofen") == {"197806": "Ibuprofen 600 MG Oral Tablet"}
    assert "8" not in _codes(out, "ketorolac")  # ophthalmic
    assert set(_codes(out, "penicillin")) == {"834102", "308191", "308212"}  # no azithromycin
    assert set(_codes(out, "penicillin-v")) == {"834102"}
    assert set(_codes(out, "metformin")) == {"861007"}
    assert set(_codes(out, "ace-inhibitor")) == {"314076", "5"}  # no ARB
    assert set(_codes(out, "lisinopril")) == {"314076"}
    vs = json.loads((out / "med-safety-ibuprofen-products.json").read_text(encoding="utf-8"))
    assert vs["meta"]["source"].endswith("/blob/abc/input/vocabulary/valueset-ibuprofen.xml")
    assert vs["version"] == "pddi-US 1.1"


def test_the_script_refuses_a_source_it_cannot_read(tmp_path: Path) -> None:
    vocab, vsac = _inputs(tmp_path)
    (vocab / "valueset-naproxen.xml").unlink()
    done = _run(vocab, vsac, tmp_path / "out")
    assert done.returncode == 1
    assert "valueset-naproxen.xml" in done.stderr
    assert not (tmp_path / "out").exists()

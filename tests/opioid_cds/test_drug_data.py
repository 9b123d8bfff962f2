"""The committed drug data file says what the guide's CQL data libraries say, and the script that
generates it reads those libraries faithfully."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from toolkits.opioid_cds.drugs import drug_data, parse

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "toolkits" / "opioid_cds" / "data" / "opioid-drugs.json"
SCRIPT = ROOT / "scripts" / "opioid_drug_data.py"
VALUESETS = ROOT / "ontologies" / "opioid-cds" / "valuesets"

# Entries checked by hand against OMTKData.cql and CDCMMEClinicalConversionFactors.cql.


def test_a_fentanyl_patch_is_a_long_acting_transdermal_system_of_0_075_mg_per_hour() -> None:
    drug = drug_data().drug("197696")
    assert drug is not None
    assert drug.name == "72 HR fentanyl 0.075 MG/HR Transdermal System"
    assert (drug.dose_form_code, drug.dose_form_name) == ("316987", "Transdermal System")
    assert drug.is_patch and drug.long_acting
    [fentanyl] = drug.ingredients
    assert (fentanyl.code, fentanyl.name) == ("4337", "Fentanyl")
    assert (fentanyl.strength, fentanyl.unit) == (Decimal("0.075"), "mg/h")


def test_an_immediate_release_combination_lists_only_its_opioid_in_mg() -> None:
    drug = drug_data().drug("2105929")  # acetaminophen / caffeine / dihydrocodeine 16 MG tablet
    assert drug is not None and not drug.long_acting
    assert [(i.name, i.strength, i.unit) for i in drug.ingredients] == [
        ("dihydrocodeine", Decimal(16), "mg")
    ]


def test_two_salts_of_one_opioid_are_two_entries() -> None:
    drug = drug_data().drug("637540")  # aspirin / oxycodone HCl 4.5 MG / terephthalate 0.38 MG
    assert drug is not None
    assert [(i.code, i.strength) for i in drug.ingredients] == [
        ("7804", Decimal("4.5")),
        ("7804", Decimal("0.38")),
    ]


def test_units_are_ucum() -> None:
    units = {i.unit for d in drug_data().drugs.values() for i in d.ingredients}
    assert units == {"mg", "mg/h", "mg/mL", "mg/{actuat}"}
    assert drug_data().drug("1010603").ingredients[0].unit == "mg"  # type: ignore[union-attr]


def test_the_file_covers_the_whole_extract_and_what_only_the_earlier_one_carries() -> None:
    data = drug_data()
    raw = json.loads(DATA.read_text(encoding="utf-8"))["drugs"]
    later = {code for code, drug in raw.items() if "extract" not in drug}
    assert len(later) == 910
    assert sum(len(data.drugs[code].ingredients) for code in later) == 912
    assert data.source["rxnormExtract"] == "2020-10-20"
    # the earlier extract (RxNorm 2020-01-13) adds the products RxNorm retired in between, and
    # nothing it also carries: a code of both keeps the later extract's name
    earlier = {code for code, drug in raw.items() if drug.get("extract") == "2020-01-13"}
    assert len(earlier) == 226 and earlier | later == set(raw)
    assert "OMTKData2020.cql" in data.source["earlierDrugData"]
    vicodin = data.drug("856907")
    assert vicodin is not None
    assert vicodin.name == (
        "Acetaminophen 500 MG / Hydrocodone Bitartrate 5 MG Oral Tablet [Vicodin]"
    )
    assert [(i.name, i.strength, i.unit) for i in vicodin.ingredients] == [
        ("Hydrocodone", Decimal(5), "mg")
    ]
    assert data.drug("197873").name == "levorphanol tartrate 2 MG Oral Tablet"  # type: ignore[union-attr]


def test_the_toolkit_uses_the_cdc_2022_table_which_names_its_source() -> None:
    data = drug_data()
    assert data.factor_table == "cdc-2022"
    assert {code: (r.ingredient, r.factor) for code, r in data.factors.items() if r.factor} == {
        "2670": ("Codeine", Decimal("0.15")),
        "3423": ("Hydromorphone", Decimal(5)),
        "5489": ("Hydrocodone", Decimal(1)),
        "6813": ("Methadone", Decimal("4.7")),
        "7052": ("Morphine", Decimal(1)),
        "7804": ("Oxycodone", Decimal("1.5")),
        "7814": ("Oxymorphone", Decimal(3)),
        "787390": ("Tapentadol", Decimal("0.4")),
        "10689": ("Tramadol", Decimal("0.2")),
    }
    # 2.4 MME/day per mcg/h of patch strength, whatever the patch's frequency
    assert data.factors["4337"].by_dose_form == (("316987", Decimal(2400), Decimal(1)),)
    assert data.factors["6813"].by_daily_dose == ()
    assert "1819" not in data.factors  # buprenorphine: no factor in the table
    assert data.factor_sources["cdc-2022"]["doi"] == "10.15585/mmwr.rr7103a1"
    assert "MMWR Recomm Rep 2022;71(No. RR-3)" in data.factor_sources["cdc-2022"]["citation"]


def test_the_guide_s_older_table_is_kept_as_its_own_version() -> None:
    data = drug_data("cdc-2016")
    factors = data.factors
    assert data.factor_table == "cdc-2016"
    assert {code: (r.ingredient, r.factor) for code, r in factors.items() if r.factor} == {
        "2670": ("Codeine", Decimal("0.15")),
        "3423": ("Hydromorphone", Decimal(4)),
        "5489": ("Hydrocodone", Decimal(1)),
        "7052": ("Morphine", Decimal(1)),
        "7804": ("Oxycodone", Decimal("1.5")),
        "7814": ("Oxymorphone", Decimal(3)),
    }
    assert factors["4337"].by_dose_form == (("316987", Decimal(7200), Decimal("0.33333333")),)
    methadone = [(r.low, r.high, r.factor) for r in factors["6813"].by_daily_dose]
    assert methadone == [
        (Decimal(1), Decimal(20), Decimal(4)),
        (Decimal(21), Decimal(40), Decimal(8)),
        (Decimal(41), Decimal(60), Decimal(10)),
        (Decimal(61), None, Decimal(12)),
    ]
    assert "1819" not in factors and "10689" not in factors  # buprenorphine, tramadol
    assert "CDCMMEClinicalConversionFactors.cql" in data.factor_sources["cdc-2016"]["citation"]


def test_a_table_the_file_does_not_hold_is_refused() -> None:
    with pytest.raises(KeyError, match="cdc-1999"):
        drug_data("cdc-1999")


OMTK_SNIPPET = """library OMTKData version '3.0.0'
/* This version of the content was generated on 2020-10-20 */
// Generated from a test extract
define DrugIngredients:
{
  { drugCode: 197696, drugName: '72 HR fentanyl 0.075 MG/HR Transdermal System', doseFormCode: 316987, doseFormName: 'Transdermal System', ingredientCode: 4337, ingredientName: 'Fentanyl', strength: '0.075 MG/HR', strengthValue: 0.075, strengthUnit: 'MG/HR' },
  { drugCode: 1, drugName: 'it\\'s a test 5 MG/ML Oral Solution', doseFormCode: 316968, doseFormName: 'Oral Solution', ingredientCode: 7052, ingredientName: 'Morphine', strength: '5 MG/ML', strengthValue: 5.0, strengthUnit: 'MG/ML' }
}
"""  # noqa: E501

EARLIER_SNIPPET = """library OMTKData2020 version '2022.1.0'
// Generated from LocalDataStore_RxNav_OpioidCds-2020-01-13.sqlite
define DrugIngredients:
{
  { drugCode: 197696, drugName: '72 HR Fentanyl 0.075 MG/HR Transdermal System', doseFormCode: 316987, doseFormName: 'Transdermal System', ingredientCode: 4337, ingredientName: 'Fentanyl', strength: '0.075 MG/HR', strengthValue: 0.075, strengthUnit: 'MG/HR' },
  { drugCode: 2, drugName: 'Morphine Sulfate 15 MG Oral Tablet [Retired]', doseFormCode: 317541, doseFormName: 'Oral Tablet', ingredientCode: 7052, ingredientName: 'Morphine', strength: '15 MG', strengthValue: 15.0, strengthUnit: 'MG' }
}
"""  # noqa: E501

FACTORS_SNIPPET = """library CDCMMEClinicalConversionFactors version '3.0.0'
define CDCMMEClinicalConversionFactorsCodeSystem:
    CodeSystem { concept: List<FHIR.CodeSystem.Concept> {
        FHIR.CodeSystem.Concept {
            code: code { value: '7052' },
            display: string { value: 'Morphine' },
            property: List<FHIR.CodeSystem."Concept"."Property"> {
                FHIR.CodeSystem."Concept"."Property" {
                        code: code { value: 'conversion-factor' },
                        value: decimal { value: 1 }
                }
            }
        },
        FHIR.CodeSystem.Concept {
            code: code { value: '6813' },
            display: string { value: 'Methadone' },
            property: List<FHIR.CodeSystem."Concept"."Property"> {
                FHIR.CodeSystem."Concept"."Property" {
                        code: code { value: 'dose-range-conversion-factor' },
                        value: string { value: '61-*:12' }
                }
            }
        }
    } }
"""


def test_the_script_builds_the_file_from_the_cql_libraries(tmp_path: Path) -> None:
    cql = tmp_path / "cql"
    cql.mkdir()
    (cql / "OMTKData.cql").write_text(OMTK_SNIPPET, encoding="utf-8")
    (cql / "OMTKData2020.cql").write_text(EARLIER_SNIPPET, encoding="utf-8")
    (cql / "CDCMMEClinicalConversionFactors.cql").write_text(FACTORS_SNIPPET, encoding="utf-8")
    out = tmp_path / "drugs.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(cql), "--valuesets", str(VALUESETS), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    raw = json.loads(out.read_text(encoding="utf-8"), parse_float=Decimal)
    data = parse(raw)
    assert sorted(data.drugs) == ["1", "197696", "2"]
    # the later extract's name where both carry the code; the earlier's code marked as such
    assert data.drugs["197696"].name == "72 HR fentanyl 0.075 MG/HR Transdermal System"
    assert raw["drugs"]["2"]["extract"] == "2020-01-13" and "extract" not in raw["drugs"]["1"]
    assert data.drugs["1"].name == "it's a test 5 MG/ML Oral Solution"
    assert data.drugs["1"].ingredients[0].unit == "mg/mL"
    assert data.drugs["197696"].long_acting and not data.drugs["1"].long_acting
    assert data.factor_table == "cdc-2022"
    assert data.factors["10689"].factor == Decimal("0.2")  # the transcribed 2022 table
    assert data.factor_tables["cdc-2016"]["7052"].factor == 1
    assert data.factor_tables["cdc-2016"]["6813"].by_daily_dose[0].high is None


def test_the_script_refuses_a_library_it_cannot_read(tmp_path: Path) -> None:
    cql = tmp_path / "cql"
    cql.mkdir()
    (cql / "OMTKData.cql").write_text("library OMTKData version '3.0.0'\n", encoding="utf-8")
    (cql / "CDCMMEClinicalConversionFactors.cql").write_text(FACTORS_SNIPPET, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(cql), "--out", str(tmp_path / "x.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "DrugIngredients" in done.stderr
    assert not (tmp_path / "x.json").exists()

#!/usr/bin/env python3
"""Build the opioid drug data file the MME tools read, from the guide's CQL data libraries.

usage: scripts/opioid_drug_data.py CQL_DIR [--valuesets DIR] [--table FILE …] [--use NAME]
                                   [--out FILE]

Reads ``OMTKData.cql`` (the opioid ingredients and strengths of each RxNorm drug code) and
``OMTKData2020.cql`` when the folder has it (an earlier extract, RxNorm 2020-01-13: the
products RxNorm retired before the later one, such as Vicodin 5/500, which older charts still
carry; only the codes the later extract lacks are taken from it, each marked ``extract``),
``CDCMMEClinicalConversionFactors.cql`` (the guide's clinical conversion factors per ingredient,
after the CDC's 2016 table) — the two libraries the guide's MME calculation (``MMECalculator`` →
``OMTKLogic`` → ``ConversionFactors``) uses —, the extended-release value set from
``--valuesets``, and further conversion-factor tables transcribed from their publication
(``--table``, default ``toolkits/opioid_cds/data/cdc-2022-mme-conversion-factors.json``: the
CDC 2022 guideline's table), and writes one JSON file (default
``toolkits/opioid_cds/data/opioid-drugs.json``):

- ``drugs``: per RxNorm code, its name, dose form (code, name), whether the guide counts it as
  extended-release/long-acting (membership of the value set
  ``extended-release-opioid-with-ambulatory-misuse-potential``) and its opioid ingredients with
  their strength (value, UCUM unit, and the RxNorm text it was read from), one entry per row of
  the CQL (a drug with two salts of one ingredient has two entries with the same code);
- ``conversionFactors``: per table version (``cdc-2016`` from the CQL library, ``cdc-2022``…),
  its ``source`` and its ``factors``: per ingredient code, one of a single ``factor``,
  ``byDoseForm`` (dose form code → factor and the doses per day it was stated for) or
  ``byDailyDose`` (ranges of the ingredient's daily dose in mg → factor);
- ``conversionFactorTable``: the table the toolkit uses (``--use``, default ``cdc-2022``);
- ``source``: where it came from and when the RxNorm extract was made.

The output is deterministic (sorted keys, no timestamps of its own), so regenerating it from the
same inputs leaves the committed file unchanged.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "toolkits" / "opioid_cds" / "data" / "opioid-drugs.json"
DEFAULT_VALUESETS = ROOT / "ontologies" / "opioid-cds" / "valuesets"
DEFAULT_TABLES = (
    ROOT / "toolkits" / "opioid_cds" / "data" / "cdc-2022-mme-conversion-factors.json",
)
DEFAULT_TABLE = "cdc-2022"
#: the table version of the guide's CDCMMEClinicalConversionFactors library
CQL_TABLE = "cdc-2016"
#: an earlier extract of the same data (the guide's 2022.1.0 library, RxNorm 2020-01-13)
EARLIER = "OMTKData2020.cql"
EXTENDED_RELEASE = "extended-release-opioid-with-ambulatory-misuse-potential"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"

#: The RxNorm strength units of the extract and their UCUM form (OMTKLogic's ``ToUCUM``).
UCUM = {"MG": "mg", "MG/ACTUAT": "mg/{actuat}", "MG/HR": "mg/h", "MG/ML": "mg/mL"}


class CqlDataError(ValueError):
    """The CQL text does not have the shape this script reads."""


# --- a reader for the tuple-list literals of OMTKData.cql ---------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^'\\]|\\.)*')|(?P<number>-?\d+(?:\.\d+)?)|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<punct>[{}:,]))"
)
_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "/": "/", "n": "\n", "r": "\r", "t": "\t"}


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            return
        match = _TOKEN.match(text, pos)
        if match is None:
            raise CqlDataError(f"unexpected text at {pos}: {text[pos : pos + 40]!r}")
        kind = match.lastgroup
        assert kind is not None
        yield kind, match.group(kind)
        pos = match.end()


def _unquote(literal: str) -> str:
    body = literal[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def _parse_list(text: str) -> list[dict[str, Any]]:
    """``{ { key: value, … }, … }`` → a list of dicts (strings, ints, Decimals)."""
    tokens = list(_tokens(text))
    pos = 0

    def expect(punct: str) -> None:
        nonlocal pos
        if tokens[pos] != ("punct", punct):
            raise CqlDataError(f"expected {punct!r}, got {tokens[pos][1]!r}")
        pos += 1

    rows: list[dict[str, Any]] = []
    expect("{")
    while tokens[pos] != ("punct", "}"):
        expect("{")
        row: dict[str, Any] = {}
        while True:
            kind, key = tokens[pos]
            if kind != "name":
                raise CqlDataError(f"expected a field name, got {key!r}")
            pos += 1
            expect(":")
            kind, value = tokens[pos]
            pos += 1
            if kind == "string":
                row[key] = _unquote(value)
            elif kind == "number":
                row[key] = Decimal(value) if "." in value else int(value)
            else:
                raise CqlDataError(f"unexpected value {value!r} for {key}")
            if tokens[pos] == ("punct", ","):
                pos += 1
                continue
            expect("}")
            break
        rows.append(row)
        if tokens[pos] == ("punct", ","):
            pos += 1
    return rows


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    return re.sub(r"(?m)^\s*//.*$", "", text)


def read_drug_ingredients(omtk_data: str) -> list[dict[str, Any]]:
    """The rows of ``define DrugIngredients:`` in OMTKData.cql."""
    text = _strip_comments(omtk_data)
    found = re.search(r"define\s+DrugIngredients\s*:\s*", text)
    if found is None:
        raise CqlDataError("OMTKData.cql has no 'define DrugIngredients:'")
    return _parse_list(text[found.end() :])


def read_extract_date(omtk_data: str) -> str | None:
    """The day of the RxNorm extract: "generated on <day>" in the library's header, or the
    RxNav data store it says it was "Generated from" (``…-2020-01-13.sqlite``)."""
    found = re.search(r"generated on (\d{4}-\d{2}-\d{2})", omtk_data) or re.search(
        r"Generated from \S*?(\d{4}-\d{2}-\d{2})\.sqlite", omtk_data
    )
    return found.group(1) if found else None


# --- the conversion-factor supplement ------------------------------------------------------

_CONCEPT = re.compile(r"FHIR\.CodeSystem\.Concept\s*\{")
_CODE = re.compile(r"code:\s*code\s*\{\s*value:\s*'([^']*)'\s*\}")
_DISPLAY = re.compile(r"display:\s*string\s*\{\s*value:\s*'([^']*)'\s*\}")
_PROPERTY = re.compile(
    r"code:\s*code\s*\{\s*value:\s*'(?P<code>[^']*)'\s*\}\s*,\s*"
    r"value:\s*(?P<type>decimal|string)\s*\{\s*value:\s*(?P<value>'[^']*'|-?\d+(?:\.\d+)?)\s*\}"
)


def _number(text: str) -> Decimal:
    return Decimal(text)


def _range_bound(text: str) -> Decimal | None:
    return None if text == "*" else _number(text)


def read_conversion_factors(supplement: str) -> dict[str, dict[str, Any]]:
    """Per ingredient code: its display and how its factor is chosen (see the module doc)."""
    text = _strip_comments(supplement)
    starts = [m.end() for m in _CONCEPT.finditer(text)]
    if not starts:
        raise CqlDataError("no FHIR.CodeSystem.Concept in the conversion-factor library")
    out: dict[str, dict[str, Any]] = {}
    for i, start in enumerate(starts):
        block = text[start : starts[i + 1] if i + 1 < len(starts) else len(text)]
        code, display = _CODE.search(block), _DISPLAY.search(block)
        if code is None or display is None:
            raise CqlDataError(f"a concept without code or display near {block[:60]!r}")
        entry: dict[str, Any] = {"ingredient": display.group(1)}
        for prop in _PROPERTY.finditer(block):
            name, raw = prop.group("code"), prop.group("value").strip("'")
            if name == "conversion-factor":
                entry["factor"] = _number(raw)
            elif name == "dose-form-conversion-factor":
                form, _, rest = raw.partition(":")
                factor, _, per_day = rest.partition("@")
                rule: dict[str, Any] = {"factor": _number(factor)}
                if per_day:
                    rule["statedForDosesPerDay"] = _number(per_day)
                entry.setdefault("byDoseForm", {})[form] = rule
            elif name == "dose-range-conversion-factor":
                bounds, _, factor = raw.partition(":")
                low, _, high = bounds.partition("-")
                entry.setdefault("byDailyDose", []).append(
                    {
                        "low": _range_bound(low),
                        "high": _range_bound(high),
                        "factor": _number(factor),
                    }
                )
            else:
                raise CqlDataError(f"unknown conversion-factor property {name!r}")
        if not {"factor", "byDoseForm", "byDailyDose"} & entry.keys():
            raise CqlDataError(f"ingredient {code.group(1)} has no conversion factor")
        out[code.group(1)] = entry
    return out


# --- assembly --------------------------------------------------------------------------------


def _members(valueset: dict[str, Any]) -> set[str]:
    return {
        c["code"]
        for c in (valueset.get("expansion") or {}).get("contains") or []
        if c.get("system") == RXNORM
    }


def read_table(path: Path) -> tuple[str, dict[str, Any]]:
    """A transcribed table: its version name and ``{"source": …, "factors": …}``."""
    data = json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)
    name, source, factors = data.get("table"), data.get("source"), data.get("factors")
    if not isinstance(name, str) or not isinstance(source, dict) or not isinstance(factors, dict):
        raise CqlDataError(f"{path}: a table needs 'table', 'source' and 'factors'")
    for code, entry in factors.items():
        if not {"factor", "byDoseForm", "byDailyDose"} & set(entry):
            raise CqlDataError(f"{path}: ingredient {code} has no conversion factor")
    return name, {
        "source": source,
        "factors": dict(sorted(factors.items(), key=lambda kv: int(kv[0]))),
    }


def _drugs(rows: list[dict[str, Any]], extended: set[str]) -> dict[str, dict[str, Any]]:
    """The drug entries of one extract's ``DrugIngredients`` rows, by RxNorm code."""
    drugs: dict[str, dict[str, Any]] = {}
    for row in rows:
        code = str(row["drugCode"])
        form = {"code": str(row["doseFormCode"]), "name": row["doseFormName"]}
        drug = drugs.setdefault(
            code,
            {
                "name": row["drugName"],
                "doseForm": form,
                "longActing": code in extended,
                "ingredients": [],
            },
        )
        if drug["doseForm"] != form or drug["name"] != row["drugName"]:
            raise CqlDataError(f"drug {code} has rows with different names or dose forms")
        unit = UCUM.get(row["strengthUnit"])
        if unit is None:
            raise CqlDataError(f"drug {code}: strength unit {row['strengthUnit']!r} has no UCUM")
        ingredient = {
            "code": str(row["ingredientCode"]),
            "name": row["ingredientName"],
            "strength": {"value": row["strengthValue"], "unit": unit},
            "strengthText": row["strength"],
        }
        # one row per opioid substance: a drug with two salts of one ingredient (oxycodone
        # hydrochloride and terephthalate) has two rows with the same ingredient code, and the
        # guide's calculation counts both
        drug["ingredients"].append(ingredient)
    return drugs


def build(
    cql_dir: Path,
    valuesets: Path,
    tables: tuple[Path, ...] = DEFAULT_TABLES,
    use: str = DEFAULT_TABLE,
) -> dict[str, Any]:
    omtk = (cql_dir / "OMTKData.cql").read_text(encoding="utf-8")
    earlier_path = cql_dir / EARLIER
    earlier = earlier_path.read_text(encoding="utf-8") if earlier_path.exists() else None
    supplement = (cql_dir / "CDCMMEClinicalConversionFactors.cql").read_text(encoding="utf-8")
    extended = _members(
        json.loads((valuesets / f"{EXTENDED_RELEASE}.json").read_text(encoding="utf-8"))
    )
    drugs = _drugs(read_drug_ingredients(omtk), extended)
    earlier_day = None
    if earlier is not None:
        # RxNorm retires products (Vicodin 5/500 left with the 500 mg acetaminophen combinations)
        # that charts written before still carry: the earlier extract's codes the later one
        # lacks are kept, each saying which extract it is from
        earlier_day = read_extract_date(earlier)
        for code, drug in _drugs(read_drug_ingredients(earlier), extended).items():
            if code not in drugs:
                drugs[code] = {**drug, "extract": earlier_day}
    factor_tables: dict[str, Any] = {
        CQL_TABLE: {
            "source": {
                "citation": (
                    "CDCMMEClinicalConversionFactors.cql (library version 3.0.0) of the CDC "
                    "opioid prescribing guideline's implementation guide, the clinical table of "
                    "the CDC's 2016 guidance 'Calculating total daily dose of opioids for safer "
                    "dosage' (no factor for tapentadol or tramadol)"
                ),
                "url": "https://www.cdc.gov/drugoverdose/pdf/calculating_total_daily_dose-a.pdf",
            },
            "factors": dict(
                sorted(read_conversion_factors(supplement).items(), key=lambda kv: int(kv[0]))
            ),
        }
    }
    for path in tables:
        name, table = read_table(path)
        if name in factor_tables:
            raise CqlDataError(f"{path}: table {name!r} is given twice")
        factor_tables[name] = table
    if use not in factor_tables:
        raise CqlDataError(f"no conversion-factor table {use!r} (have {sorted(factor_tables)})")
    return {
        "source": {
            "description": (
                "Opioid ingredients and strengths per RxNorm drug code, as the CDC opioid "
                "prescribing guideline's CQL data libraries carry them (public domain, CC0), "
                "and the CDC clinical MME conversion factors by table version: the guide's "
                "library and the CDC 2022 guideline's table (public domain). Uses RxNorm data "
                "of the US National Library of Medicine, which does not endorse this product."
            ),
            "drugData": "OMTKData.cql (DrugIngredients)",
            "rxnormExtract": read_extract_date(omtk),
            **(
                {
                    "earlierDrugData": (
                        f"{EARLIER} (DrugIngredients, RxNorm {earlier_day}): the codes the "
                        "later extract does not carry, each marked with its extract"
                    )
                }
                if earlier is not None
                else {}
            ),
            "conversionFactors": (
                "per table version, each with its source; the toolkit uses conversionFactorTable"
            ),
            "longActing": f"ValueSet {EXTENDED_RELEASE}",
        },
        "conversionFactorTable": use,
        "conversionFactors": dict(sorted(factor_tables.items())),
        "drugs": dict(sorted(drugs.items(), key=lambda kv: int(kv[0]))),
    }


def _plain(value: Any) -> Any:
    """Decimals become JSON numbers: integers stay integers, the rest floats, whose shortest
    representation gives back the CQL's digits (``0.33333333``, ``0.075``)."""
    if isinstance(value, Decimal):
        return (
            int(value)
            if value == value.to_integral_value() and "." not in str(value)
            else float(value)
        )
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def render(data: dict[str, Any]) -> str:
    """The file's text: two-space indentation, decimals written exactly as the CQL has them."""
    return json.dumps(_plain(data), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cql_dir", type=Path, help="folder with OMTKData.cql and the factors")
    parser.add_argument("--valuesets", type=Path, default=DEFAULT_VALUESETS)
    parser.add_argument(
        "--table",
        type=Path,
        action="append",
        help="a transcribed conversion-factor table (JSON); default: the CDC 2022 table",
    )
    parser.add_argument("--use", default=DEFAULT_TABLE, help="the table the toolkit uses")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    try:
        data = build(args.cql_dir, args.valuesets, tuple(args.table or DEFAULT_TABLES), args.use)
    except (OSError, ValueError) as exc:
        print(f"opioid_drug_data: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(data), encoding="utf-8")
    print(f"wrote {len(data['drugs'])} drugs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

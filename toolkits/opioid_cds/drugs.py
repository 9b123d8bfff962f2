"""The opioid drug data: ingredients and strengths per RxNorm drug, CDC conversion factors.

The data file (``data/opioid-drugs.json``) is generated from the guide's CQL data libraries and
the transcribed CDC 2022 table by ``scripts/opioid_drug_data.py``; this module reads it once and
answers look-ups. The conversion factors are held per table version (``cdc-2016``: the guide's
library; ``cdc-2022``: the CDC 2022 guideline's table), each with its source; the file's
``conversionFactorTable`` says which one the toolkit uses. Decimals are read as ``Decimal`` so
that 0.075 mg/h stays 0.075.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

DATA_FILE = "opioid-drugs.json"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
#: RxNorm dose form "Transdermal System": a patch, whose strength is per hour.
PATCH_FORM = "316987"


@dataclass(frozen=True, kw_only=True)
class Ingredient:
    """One opioid substance of a drug and its strength per unit of the dose form."""

    code: str
    name: str
    strength: Decimal
    unit: str  # UCUM: mg, mg/h, mg/mL, mg/{actuat}


@dataclass(frozen=True, kw_only=True)
class Drug:
    code: str
    name: str
    dose_form_code: str
    dose_form_name: str
    long_acting: bool
    ingredients: tuple[Ingredient, ...]

    @property
    def is_patch(self) -> bool:
        return self.dose_form_code == PATCH_FORM


@dataclass(frozen=True, kw_only=True)
class DoseRangeFactor:
    """A factor for an ingredient's daily dose (mg) in ``[low, high]``; None is unbounded."""

    low: Decimal | None
    high: Decimal | None
    factor: Decimal


@dataclass(frozen=True, kw_only=True)
class FactorRule:
    """How an ingredient's conversion factor is chosen: one of the three fields is set."""

    ingredient: str
    factor: Decimal | None = None
    #: dose form code → (factor, the doses per day the factor was stated for)
    by_dose_form: tuple[tuple[str, Decimal, Decimal | None], ...] = ()
    by_daily_dose: tuple[DoseRangeFactor, ...] = ()


@dataclass(frozen=True)
class DrugData:
    """The whole file: drugs by RxNorm code, the factor rules by ingredient code of the table in
    use (``factor_table``), every table the file holds with its source, provenance."""

    drugs: dict[str, Drug]
    factors: dict[str, FactorRule]
    source: dict[str, Any]
    factor_table: str = ""
    factor_tables: dict[str, dict[str, FactorRule]] = field(default_factory=dict)
    factor_sources: dict[str, dict[str, Any]] = field(default_factory=dict)

    def drug(self, code: str) -> Drug | None:
        return self.drugs.get(code)


def _decimal(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def parse(data: dict[str, Any], table: str | None = None) -> DrugData:
    """The file's JSON (decimals as ``Decimal``) → ``DrugData``, its factors those of ``table``
    (default: the file's ``conversionFactorTable``)."""
    drugs = {
        code: Drug(
            code=code,
            name=entry["name"],
            dose_form_code=entry["doseForm"]["code"],
            dose_form_name=entry["doseForm"]["name"],
            long_acting=bool(entry["longActing"]),
            ingredients=tuple(
                Ingredient(
                    code=i["code"],
                    name=i["name"],
                    strength=_decimal(i["strength"]["value"]),
                    unit=i["strength"]["unit"],
                )
                for i in entry["ingredients"]
            ),
        )
        for code, entry in data["drugs"].items()
    }
    tables = {
        name: _factor_rules(table["factors"]) for name, table in data["conversionFactors"].items()
    }
    chosen = table or data["conversionFactorTable"]
    if chosen not in tables:
        raise KeyError(f"the drug data has no conversion-factor table {chosen!r}")
    return DrugData(
        drugs=drugs,
        factors=tables[chosen],
        source=dict(data.get("source") or {}),
        factor_table=chosen,
        factor_tables=tables,
        factor_sources={
            name: dict(t.get("source") or {}) for name, t in data["conversionFactors"].items()
        },
    )


def _factor_rules(entries: dict[str, Any]) -> dict[str, FactorRule]:
    factors = {}
    for code, entry in entries.items():
        factors[code] = FactorRule(
            ingredient=entry["ingredient"],
            factor=_decimal(entry["factor"]) if "factor" in entry else None,
            by_dose_form=tuple(
                (
                    form,
                    _decimal(rule["factor"]),
                    _decimal(rule["statedForDosesPerDay"])
                    if "statedForDosesPerDay" in rule
                    else None,
                )
                for form, rule in (entry.get("byDoseForm") or {}).items()
            ),
            by_daily_dose=tuple(
                DoseRangeFactor(
                    low=None if r["low"] is None else _decimal(r["low"]),
                    high=None if r["high"] is None else _decimal(r["high"]),
                    factor=_decimal(r["factor"]),
                )
                for r in entry.get("byDailyDose") or []
            ),
        )
    return factors


@cache
def drug_data(table: str | None = None) -> DrugData:
    """The packaged data file, read once per process (and table): its factors those of
    ``table``, by default the table the file names for the toolkit (the CDC 2022 table)."""
    text = resources.files(__package__).joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    return parse(json.loads(text, parse_float=Decimal), table)

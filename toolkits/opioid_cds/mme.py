"""Morphine milligram equivalents (MME) per day of one medication order.

Follows the guide's calculator (``MMECalculator`` over ``OMTKLogic`` and the CDC clinical
conversion factors) ingredient by ingredient:

1. the drug: the first of the order's RxNorm codes found in the drug data;
2. doses per day from the timing (``dosage.doses_per_day``);
3. the daily dose of each opioid ingredient:
   - a patch (transdermal system) of fentanyl or buprenorphine: doses/day × dose × strength
     (mg/h);
   - a dose given as a mass (mg): doses/day × dose;
   - otherwise the dose counts units of the dose form (tablets, mL, patches, actuations):
     doses/day × dose × strength;
4. the ingredient's conversion factor, from the drug data's table in use (the CDC 2022
   guideline's by default; the guide's own library holds the older 2016 one): a single factor,
   one per dose form (a fentanyl patch factor is stated for a number of doses per day and
   scales with the actual doses per day: 2400 per mg/h at 1 a day in the 2022 table, 7200 at
   0.33333333 in the guide's), or one per range of the daily dose (methadone in the guide's
   table; the 2022 table gives methadone one factor);
5. MME = daily dose × factor, rounded to 0.1 per ingredient (half up), summed over the
   ingredients that have a factor.

Where this differs from the reference, and why, is listed in docs/opioid-cds.md ("MME").
The computation is pure and deterministic: exact decimals, no clock, no I/O beyond the packaged
data file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum

from toolkits.opioid_cds.dosage import doses_per_day
from toolkits.opioid_cds.drugs import RXNORM, Drug, DrugData, FactorRule, Ingredient, drug_data

#: Ingredients whose patch strength (per hour) the calculation knows: buprenorphine, fentanyl.
PATCH_INGREDIENTS = frozenset({"1819", "4337"})
#: Mass units a dose may be given in, as milligrams per unit. The reference reads only mg and
#: takes ug as if it were mg; a microgram dose is converted here.
MASS_IN_MG = {
    "mg": Decimal(1),
    "ug": Decimal("0.001"),
    "mcg": Decimal("0.001"),
    "g": Decimal(1000),
}
TENTH = Decimal("0.1")


class MmeStatus(StrEnum):
    """How far the order's MME could be computed (the tool's ``mmeStatus``)."""

    COMPUTED = "Computed"  # every opioid ingredient has a factor
    PARTLY_COUNTED = "PartlyCounted"  # some ingredients have no factor and are left out
    NOT_COUNTED = "NotCounted"  # no ingredient has a factor (buprenorphine, tramadol…): 0
    UNKNOWN_DRUG = "UnknownDrug"  # no RxNorm code of the order is in the drug data
    INCOMPLETE_DOSAGE = "IncompleteDosage"  # no dose, or a timing that says no frequency
    AMBIGUOUS_DOSAGE = "AmbiguousDosage"  # several doses or timings for one order


#: Statuses with a number: the order's MME is known (0 when nothing was counted).
KNOWN = frozenset({MmeStatus.COMPUTED, MmeStatus.PARTLY_COUNTED, MmeStatus.NOT_COUNTED})


@dataclass(frozen=True, kw_only=True)
class Dosage:
    """The parts of one dosage instruction the calculation reads."""

    dose_value: Decimal | None
    dose_unit: str | None  # the Quantity's code: UCUM (mg, mL, {tablet}) or a dose-form code
    frequency: int | None = None
    frequency_max: int | None = None
    period: Decimal | None = None
    period_unit: str | None = None
    times_of_day: int | None = None


@dataclass(frozen=True, kw_only=True)
class IngredientMme:
    ingredient: Ingredient
    daily_dose: Decimal | None
    daily_unit: str | None
    factor: Decimal | None
    mme: Decimal | None  # None: no factor, the ingredient is not counted
    note: str


@dataclass(frozen=True, kw_only=True)
class MmeResult:
    status: MmeStatus
    mme: Decimal | None  # MME per day; None unless ``status`` is in ``KNOWN``
    drug: Drug | None
    doses_per_day: Decimal | None
    ingredients: tuple[IngredientMme, ...]
    explanation: str


def show(value: Decimal) -> str:
    """A decimal for people: at most 8 places, no trailing zeros (``0.075``, ``180``)."""
    text = format(value.quantize(Decimal("0.00000001")).normalize(), "f")
    return text


def find_drug(codes: list[str], data: DrugData) -> Drug | None:
    """The first code (in the order given) that the drug data knows. A code may be bare
    (``197696``) or a coding as ``system|code``; a coding of another system is not RxNorm."""
    for text in codes:
        system, bar, code = text.strip().rpartition("|")
        if bar and system != RXNORM:
            continue
        drug = data.drug(code)
        if drug is not None:
            return drug
    return None


def factor_for(
    rule: FactorRule, *, daily_mg: Decimal, dose_form: str, per_day: Decimal
) -> Decimal | None:
    """The conversion factor of one ingredient, or None when none applies."""
    if rule.by_daily_dose:
        ranges = sorted(rule.by_daily_dose, key=lambda r: r.low or Decimal(0))
        for r in ranges:
            # the published ranges are integers (1-20, 21-40…): a daily dose in a gap between
            # them (20.5) takes the next range's factor, one below the first takes the first's
            if r.high is None or daily_mg <= r.high:
                return r.factor
        return ranges[-1].factor
    for form, factor, stated_per_day in rule.by_dose_form:
        if form == dose_form:
            if stated_per_day is None:
                return factor
            if per_day == 0:
                return None
            return stated_per_day / per_day * factor
    return rule.factor


def _unit_text(unit: str) -> str:
    """A dose unit for people: UCUM annotations lose their braces (``{tablet}`` → tablet)."""
    return unit[1:-1] if unit.startswith("{") and unit.endswith("}") else unit


def _daily_dose(
    drug: Drug, ingredient: Ingredient, dosage: Dosage, per_day: Decimal, dose: Decimal
) -> tuple[Decimal | None, str | None, str]:
    """(daily dose, its unit, the calculation in words) of one ingredient."""
    unit = (dosage.dose_unit or "").strip()
    if drug.is_patch:
        if ingredient.code not in PATCH_INGREDIENTS:
            return None, None, f"no patch calculation for {ingredient.name}"
        daily = per_day * dose * ingredient.strength
        return (
            daily,
            ingredient.unit,
            f"{show(dose)} patch × {show(ingredient.strength)} {ingredient.unit}",
        )
    if unit in MASS_IN_MG:
        daily = per_day * dose * MASS_IN_MG[unit]
        return daily, "mg", f"{show(dose)} {unit} × {show(per_day)}/day"
    daily = per_day * dose * ingredient.strength
    per = ingredient.unit.rsplit("/", 1)[0]
    shown = _unit_text(unit) or "unit"
    return (
        daily,
        per,
        (
            f"{show(dose)} {shown} × {show(ingredient.strength)} {ingredient.unit} × "
            f"{show(per_day)}/day"
        ),
    )


def _note(drug: Drug, part: IngredientMme, how: str, per_day: Decimal) -> str:
    if part.mme is None or part.factor is None or part.daily_dose is None:
        return part.note
    if drug.is_patch:
        # the patch factor scales with 1/(doses per day): per mg/h it is constant
        per_strength = part.factor * per_day
        return (
            f"{part.ingredient.name}: {how} × {show(per_strength)} per {part.daily_unit} = "
            f"{part.mme} MME/day"
        )
    return (
        f"{part.ingredient.name}: {how} = {show(part.daily_dose)} {part.daily_unit}/day × "
        f"factor {show(part.factor)} = {part.mme} MME/day"
    )


def order_mme(codes: list[str], dosage: Dosage, data: DrugData | None = None) -> MmeResult:
    """The MME per day of one order: its RxNorm codes and its one dosage instruction."""
    data = data or drug_data()
    drug = find_drug(codes, data)
    if drug is None:
        said = ", ".join(codes) if codes else "none"
        return MmeResult(
            status=MmeStatus.UNKNOWN_DRUG,
            mme=None,
            drug=None,
            doses_per_day=None,
            ingredients=(),
            explanation=f"no opioid strength data for the RxNorm code(s) {said}",
        )
    per_day, timing = doses_per_day(
        frequency=dosage.frequency,
        frequency_max=dosage.frequency_max,
        period=dosage.period,
        period_unit=dosage.period_unit,
        times_of_day=dosage.times_of_day,
    )
    if dosage.dose_value is None or per_day is None:
        why = "the dosage gives no dose" if dosage.dose_value is None else timing
        return MmeResult(
            status=MmeStatus.INCOMPLETE_DOSAGE,
            mme=None,
            drug=drug,
            doses_per_day=per_day,
            ingredients=(),
            explanation=f"{drug.name}: {why}",
        )
    parts: list[IngredientMme] = []
    for ingredient in drug.ingredients:
        daily, daily_unit, how = _daily_dose(drug, ingredient, dosage, per_day, dosage.dose_value)
        rule = data.factors.get(ingredient.code)
        factor = (
            None
            if daily is None or rule is None
            else factor_for(rule, daily_mg=daily, dose_form=drug.dose_form_code, per_day=per_day)
        )
        if daily is None or factor is None:
            why = how if daily is None else "no CDC conversion factor"
            parts.append(
                IngredientMme(
                    ingredient=ingredient,
                    daily_dose=daily,
                    daily_unit=daily_unit,
                    factor=None,
                    mme=None,
                    note=f"{ingredient.name}: {why}, not counted",
                )
            )
            continue
        part = IngredientMme(
            ingredient=ingredient,
            daily_dose=daily,
            daily_unit=daily_unit,
            factor=factor,
            mme=(daily * factor).quantize(TENTH, rounding=ROUND_HALF_UP),
            note="",
        )
        parts.append(replace(part, note=_note(drug, part, how, per_day)))
    counted = [p.mme for p in parts if p.mme is not None]
    if len(counted) == len(parts):
        status = MmeStatus.COMPUTED
    elif counted:
        status = MmeStatus.PARTLY_COUNTED
    else:
        status = MmeStatus.NOT_COUNTED
    total = sum(counted, Decimal(0))
    explanation = f"{drug.name} ({timing}): " + "; ".join(p.note for p in parts)
    return MmeResult(
        status=status,
        mme=total,
        drug=drug,
        doses_per_day=per_day,
        ingredients=tuple(parts),
        explanation=explanation,
    )

"""MME per order, against numbers worked out by hand the way the guide's calculator works them
(doses per day × dose × strength × the CDC factor, rounded to 0.1 per ingredient), including the
orders of the guide's own rec-04-05 and rec-08 examples. The factors are the CDC 2022
guideline's table (the toolkit's default); the guide's older table is tested as its own
version."""

from __future__ import annotations

from decimal import Decimal

import pytest

from toolkits.opioid_cds import Dosage, MmeStatus, order_mme
from toolkits.opioid_cds.dosage import doses_per_day
from toolkits.opioid_cds.drugs import drug_data

D = Decimal


def daily(
    dose: str, unit: str, times: int = 1, period: str = "1", period_unit: str = "d"
) -> Dosage:
    return Dosage(
        dose_value=D(dose),
        dose_unit=unit,
        frequency=times,
        period=D(period),
        period_unit=period_unit,
    )


@pytest.mark.parametrize(
    ("case", "codes", "dosage", "mme"),
    [
        # rec-04-05 "MME greater than fifty": fentanyl 75 mcg/h, one patch, frequency 1/day.
        # 1 × 0.075 mg/h × 2400 per mg/h (2.4 per mcg/h) = 180.0 ("taper now": ≥ 90)
        ("rec-04-05 fentanyl 75 mcg/h", ["197696"], daily("1", "{patch}"), "180.0"),
        # rec-08 "on naloxone" and the stored order of "MME greater than fifty": one patch every
        # 3 days; the factor scales with 1/(doses per day), so the frequency cancels: 180.0
        ("rec-08 fentanyl q3d", ["197696"], daily("1", "{patch}", period="3"), "180.0"),
        # rec-08 "MME less than fifty": 0.2 patch every 12 days: 0.2 × 0.075 × 2400 = 36.0 (< 50)
        ("rec-08 fentanyl 0.2 q12d", ["197696"], daily("0.2", "{patch}", period="12"), "36.0"),
        # rec-10 / rec-11 stored order: oxycodone ER 10 mg, 1 tablet 3×/day: 30 mg × 1.5 = 45.0
        ("oxycodone ER 10 mg tid", ["1049502"], daily("1", "{tablet}", times=3), "45.0"),
        # acetaminophen/codeine 300/30: 2 tablets every 4 h = 12 tablets: 360 mg × 0.15 = 54.0
        (
            "codeine 30 mg 2 q4h",
            ["993781"],
            daily("2", "{tablet}", period="4", period_unit="h"),
            "54.0",
        ),
        # hydromorphone 1 mg/mL solution, 2 mL every 6 h: 4 × 2 × 1 mg = 8 mg × 5 = 40.0
        (
            "hydromorphone 2 mL q6h",
            ["897657"],
            daily("2", "mL", period="6", period_unit="h"),
            "40.0",
        ),
        # the same as a mass dose: 2 mg four times a day: 8 mg × 5 = 40.0
        ("hydromorphone 2 mg qid", ["897696"], daily("2", "mg", times=4), "40.0"),
        # micrograms are converted: 500 ug × 4 = 2 mg × 5 = 10.0 (the reference would say 10000)
        ("hydromorphone 500 ug qid", ["897696"], daily("500", "ug", times=4), "10.0"),
        # morphine ER 15 mg twice a day (period given in hours): 30 mg × 1 = 30.0
        (
            "morphine ER 15 mg q12h",
            ["891878"],
            daily("1", "{tablet}", period="12", period_unit="h"),
            "30.0",
        ),
        # two oxycodone salts, each rounded: 4.5×4×1.5 = 27.0 and 0.38×4×1.5 = 2.28 → 2.3
        ("oxycodone two salts", ["637540"], daily("1", "{tablet}", times=4), "29.3"),
        # hydrocodone 0.5 mg/mL, 4.5 mL once: 2.25 → 2.3 (half up, as CQL's Round)
        ("hydrocodone rounding", ["859366"], daily("4.5", "mL"), "2.3"),
        # methadone: one factor, 4.7, whatever the daily dose
        ("methadone 20 mg/d", ["864706"], daily("20", "mg"), "94.0"),
        ("methadone 60 mg/d", ["991147"], daily("6", "mL"), "282.0"),
        ("methadone 61 mg/d", ["864706"], daily("61", "mg"), "286.7"),
        # tramadol 50 mg, 2 tablets every 6 h: 400 mg × 0.2 = 80.0 (no MME in the older table)
        (
            "tramadol 50 mg 2 q6h",
            ["835603"],
            daily("2", "{tablet}", period="6", period_unit="h"),
            "80.0",
        ),
        # acetaminophen/tramadol 325/37.5, 2 tablets 4×/day: 300 mg × 0.2 = 60.0
        ("tramadol 37.5 mg 2 qid", ["836395"], daily("2", "{tablet}", times=4), "60.0"),
        # tapentadol ER 100 mg twice a day: 200 mg × 0.4 = 80.0
        ("tapentadol ER 100 mg bid", ["1148797"], daily("1", "{tablet}", times=2), "80.0"),
    ],
)
def test_mme_per_order(case: str, codes: list[str], dosage: Dosage, mme: str) -> None:
    result = order_mme(codes, dosage)
    assert result.status is MmeStatus.COMPUTED, result.explanation
    assert result.mme == D(mme), result.explanation


def test_the_most_aggressive_frequency_counts() -> None:
    """1–2 tablets of oxycodone 5 mg a day: frequencyMax 2 → 10 mg × 1.5 = 15.0."""
    dosage = Dosage(
        dose_value=D(1),
        dose_unit="{tablet}",
        frequency=1,
        frequency_max=2,
        period=D(1),
        period_unit="d",
    )
    assert order_mme(["1049621"], dosage).mme == D("15.0")


def test_codings_written_system_bar_code_are_read_for_their_rxnorm_code() -> None:
    dosage = daily("1", "{tablet}", times=3)
    rxnorm = "http://www.nlm.nih.gov/research/umls/rxnorm|1049502"
    assert order_mme([rxnorm], dosage).mme == D("45.0")
    assert order_mme(["http://snomed.info/sct|1049502"], dosage).status is MmeStatus.UNKNOWN_DRUG


def test_the_first_code_the_data_knows_is_the_drug() -> None:
    dosage = daily("1", "{tablet}", times=3)
    result = order_mme(["999999999", "1049502"], dosage)
    assert result.drug is not None and result.drug.code == "1049502"
    assert result.mme == D("45.0")


@pytest.mark.parametrize(
    ("codes", "why"),
    [
        (["1010603"], "buprenorphine/naloxone film (rec-01, rec-02, rec-03 examples)"),
        (["904870"], "buprenorphine patch"),
        (["310295"], "fentanyl lozenge: the factor is for patches only"),
    ],
)
def test_ingredients_without_a_cdc_factor_are_not_counted(codes: list[str], why: str) -> None:
    result = order_mme(codes, daily("1", "{tablet}", times=2))
    assert result.status is MmeStatus.NOT_COUNTED, why
    assert result.mme == 0
    assert "not counted" in result.explanation


@pytest.mark.parametrize(
    ("case", "codes", "dosage", "mme"),
    [
        ("hydromorphone 2 mg qid", ["897696"], daily("2", "mg", times=4), "32.0"),
        ("fentanyl 75 mcg/h q3d", ["197696"], daily("1", "{patch}", period="3"), "180.0"),
        # methadone by daily dose: 20 mg → ×4, 21 mg → ×8, 60 → ×10, 61 → ×12
        ("methadone 20 mg/d", ["864706"], daily("20", "mg"), "80.0"),
        ("methadone 21 mg/d", ["864706"], daily("21", "mg"), "168.0"),
        ("methadone 60 mg/d", ["991147"], daily("6", "mL"), "600.0"),
        ("methadone 61 mg/d", ["864706"], daily("61", "mg"), "732.0"),
        # a daily dose between the published integer ranges takes the higher range's factor
        ("methadone 20.5 mg/d", ["864706"], daily("20.5", "mg"), "164.0"),
        ("methadone 0.5 mg/d", ["864706"], daily("0.5", "mg"), "2.0"),
    ],
)
def test_the_guide_s_older_table_gives_its_own_numbers(
    case: str, codes: list[str], dosage: Dosage, mme: str
) -> None:
    result = order_mme(codes, dosage, drug_data("cdc-2016"))
    assert result.status is MmeStatus.COMPUTED, result.explanation
    assert result.mme == D(mme), result.explanation


def test_tramadol_and_tapentadol_had_no_mme_in_the_guide_s_older_table() -> None:
    older = drug_data("cdc-2016")
    for codes in (["835603"], ["1148797"]):
        result = order_mme(codes, daily("1", "{tablet}", times=2), older)
        assert result.status is MmeStatus.NOT_COUNTED
        assert "no CDC conversion factor" in result.explanation
        assert order_mme(codes, daily("1", "{tablet}", times=2)).status is MmeStatus.COMPUTED


def test_a_drug_missing_from_the_data_has_no_mme() -> None:
    """rec-04-05 "MME less than fifty" orders RxNorm 892495, which the drug data does not have."""
    result = order_mme(["892495"], daily("1", "TAB"))
    assert result.status is MmeStatus.UNKNOWN_DRUG
    assert result.mme is None
    assert "892495" in result.explanation


@pytest.mark.parametrize(
    "dosage",
    [
        Dosage(dose_value=None, dose_unit=None, frequency=1, period=D(1), period_unit="d"),
        Dosage(dose_value=D(1), dose_unit="{tablet}"),  # no timing at all
        Dosage(
            dose_value=D(1), dose_unit="{tablet}", frequency=2, period=D(1), period_unit="fortnight"
        ),
        Dosage(dose_value=D(1), dose_unit="{tablet}", frequency=2, period=D(0), period_unit="d"),
    ],
)
def test_an_incomplete_dosage_has_no_mme(dosage: Dosage) -> None:
    """The reference counts such an order as 0 doses a day (its ``Count`` of no times of day);
    an unknown dose is not a small one."""
    result = order_mme(["1049502"], dosage)
    assert result.status is MmeStatus.INCOMPLETE_DOSAGE
    assert result.mme is None


@pytest.mark.parametrize(
    ("frequency", "period", "unit", "times_of_day", "per_day"),
    [
        (1, "1", "d", None, "1"),
        (3, "1", "d", None, "3"),
        (1, "8", "h", None, "3"),
        (1, "30", "min", None, "48"),
        (1, "1", "wk", None, str(D(1) / D(7))),
        (1, "1", "mo", None, str(D(1) / D(30))),
        (1, "1", "a", None, str(D(1) / D(365))),
        (2, "1", "day", None, "2"),
        (None, "12", "h", None, "2"),  # no frequency: once per period
        (None, None, None, 3, "3"),  # three times of day
        (None, "1", "d", 2, "2"),  # times of day when no frequency is given
    ],
)
def test_doses_per_day(
    frequency: int | None,
    period: str | None,
    unit: str | None,
    times_of_day: int | None,
    per_day: str,
) -> None:
    got, _how = doses_per_day(
        frequency=frequency,
        frequency_max=None,
        period=D(period) if period else None,
        period_unit=unit,
        times_of_day=times_of_day,
    )
    assert got == D(per_day)


def test_the_explanation_shows_the_calculation() -> None:
    text = order_mme(["1049502"], daily("1", "{tablet}", times=3)).explanation
    assert "1 tablet × 10 mg × 3/day = 30 mg/day × factor 1.5 = 45.0 MME/day" in text

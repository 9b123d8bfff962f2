"""Days of supply and of validity, the way the guide's routines read an order's dispense request."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from toolkits.opioid_cds import supply_days, supply_end, validity_days

D = Decimal


@pytest.mark.parametrize(
    ("value", "unit", "days"),
    [
        ("30", "d", "30"),
        ("27.0", "d", "27.0"),
        ("4", "wk", "28"),
        ("1", "mo", "30"),
        ("1", "a", "365"),
        ("48", "h", "2"),
        ("2", "D", "2"),  # compared as the reference's ~ does: case does not matter
    ],
)
def test_supply_days(value: str, unit: str, days: str) -> None:
    assert supply_days(D(value), unit) == D(days)


@pytest.mark.parametrize(
    ("value", "unit"), [(None, "d"), ("30", None), ("30", "days"), ("-1", "d")]
)
def test_a_supply_without_a_known_time_unit_is_unknown(value: str | None, unit: str | None) -> None:
    assert supply_days(D(value) if value else None, unit) is None


def test_validity_days_are_whole_days_between_start_and_end() -> None:
    # rec-04-05's draft order: 2023-05-01 to 2023-11-01 (UTC-6 both)
    assert validity_days("2023-05-01T00:00:00-06:00", "2023-11-01T00:00:00-06:00") == 184
    assert validity_days("2023-05-01", "2023-05-29") == 28
    assert validity_days("2023-05-01T12:00:00Z", "2023-05-29T11:59:59Z") == 27


@pytest.mark.parametrize(("start", "end"), [(None, "2023-05-01"), ("2023-05", "2023-06-01")])
def test_validity_without_two_days_is_unknown(start: str | None, end: str | None) -> None:
    assert validity_days(start, end) is None


def test_the_supply_ends_whole_days_after_the_authored_day() -> None:
    assert supply_end("2023-04-23", D("7.0")) == date(2023, 4, 30)
    assert supply_end("2023-04-23T10:00:00-06:00", D("6.5")) == date(2023, 4, 29)
    assert supply_end(None, D(7)) is None

"""UCUM conversion (``app.ucum.convert``) answers what pint answers for the pair, to the sixth
decimal, whichever way it gets there: a pair of plain units by pint's own factor (cached), one
with an offset or a logarithmic unit value by value."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.ucum import UnitError, _registry, _unit, convert, convertible


def pint_says(value: Decimal, source: str, target: str) -> Decimal:
    magnitude = _registry().Quantity(float(value), _unit(source)).to(_unit(target)).magnitude
    return Decimal(repr(round(float(magnitude), 6)))


@pytest.mark.parametrize(
    ("value", "source", "target"),
    [
        ("913.4935", "mg", "g"),  # an exact half of the sixth decimal, rounded as pint's float
        ("-39.4707", "h", "d"),
        ("10.89295", "%", "1"),
        ("100.6", "[degF]", "Cel"),  # an offset unit
        ("1.1", "B", "1"),  # logarithmic units
        ("0.5", "Np", "%"),
        ("50", "%", "dB"),
        ("-0", "mg", "g"),
    ],
)
def test_a_conversion_is_pints(value: str, source: str, target: str) -> None:
    assert str(convert(Decimal(value), source, target)) == str(
        pint_says(Decimal(value), source, target)
    )


def test_past_a_doubles_range_the_map_is_taken_in_decimals() -> None:
    assert convert(Decimal("1.7e308"), "mL/s", "mL/min") == Decimal("1.02E+310")


def test_units_of_different_kinds_do_not_convert() -> None:
    with pytest.raises(UnitError):
        convert(Decimal(1), "mg", "mL")
    assert not convertible("mg", "mL") and convertible("Np", "%")

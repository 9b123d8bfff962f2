"""UCUM unit conversion (``ucumvert`` → pint) for values read from FHIR Quantities."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any


class UnitError(ValueError):
    """Raised when a unit is not valid UCUM or cannot be converted to the wanted unit."""


@lru_cache(maxsize=1)
def _registry() -> Any:
    from ucumvert import PintUcumRegistry

    return PintUcumRegistry()


@lru_cache(maxsize=512)
def _unit(code: str) -> Any:
    from ucumvert import InvalidUcumError

    try:
        return _registry().from_ucum(code).units
    except (InvalidUcumError, ValueError, KeyError, AttributeError) as exc:
        raise UnitError(f"{code!r} is not a UCUM unit this service knows") from exc


def warm() -> None:
    """Load the UCUM registry now rather than on the first hook call."""
    _unit("Cel")


def convert(value: Decimal, source: str, target: str) -> Decimal:
    """``value`` in UCUM unit ``source`` expressed in UCUM unit ``target``."""
    if source == target:
        return value
    from pint.errors import DimensionalityError

    reg = _registry()
    try:
        quantity = reg.Quantity(float(value), _unit(source)).to(_unit(target))
    except DimensionalityError as exc:
        raise UnitError(f"{source!r} cannot be converted to {target!r}") from exc
    return Decimal(repr(round(float(quantity.magnitude), 6)))

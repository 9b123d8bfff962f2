"""UCUM unit conversion (``ucumvert`` → pint) for values read from FHIR Quantities."""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

_ANNOTATION = re.compile(r"\{[^{}]*\}")


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


def annotations_of(code: str) -> list[str]:
    """The ``{annotations}`` of a UCUM code, in order (``mL/min/{1.73_m2}`` → ``{1.73_m2}``)."""
    return _ANNOTATION.findall(code)


def convert(value: Decimal, source: str, target: str) -> Decimal:
    """``value`` in UCUM unit ``source`` expressed in UCUM unit ``target``.

    UCUM annotations are dimensionless, so ``mL/min`` would convert 1:1 into
    ``mL/min/{1.73_m2}``. When ``target`` carries annotations, ``source`` must carry the same ones
    (a clearance not indexed to body surface is not an indexed rate); an annotation only the
    source has (``{beats}/min`` → ``/min``) is descriptive and converts.
    """
    if source == target:
        return value
    wanted = annotations_of(target)
    if wanted and sorted(annotations_of(source)) != sorted(wanted):
        raise UnitError(
            f"{source!r} cannot be converted to {target!r}: "
            f"the annotation {' '.join(wanted)} must be in the source unit"
        )
    from pint.errors import DimensionalityError

    reg = _registry()
    try:
        quantity = reg.Quantity(float(value), _unit(source)).to(_unit(target))
    except DimensionalityError as exc:
        raise UnitError(f"{source!r} cannot be converted to {target!r}") from exc
    return Decimal(repr(round(float(quantity.magnitude), 6)))

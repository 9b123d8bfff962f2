"""UCUM conversion for values read from FHIR Quantities: the adapter's face of ``app.ucum``,
the one UCUM implementation verification checks ontology units with."""

from __future__ import annotations

from app.ucum import UnitError, annotations_of, convert, warm

__all__ = ["UnitError", "annotations_of", "convert", "warm"]

"""The opioid toolkit's typed tools, as a deployment binds them from Turtle.

Each tool reads the arguments its ``horis:takes`` declares (any subset of the names below; an
argument the tool does not know is a contract error) and answers every ``horis:effect`` it
declares, by the effect property's local name (again any subset of the names below). A value the
computation cannot give is answered ``null``: the runtime asserts nothing for it.

``order_mme`` (binding ``python:toolkits.opioid_cds.tools.order_mme``), one medication order.
Arguments: ``rxnorm`` (xsd:string, one or several: the medication's RxNorm codes),
``doseValue`` (xsd:decimal: ``doseQuantity.value`` or ``doseRange.high.value``), ``doseUnit``
(xsd:string: that quantity's ``code``), ``frequency``, ``frequencyMax`` (xsd:integer),
``period`` (xsd:decimal), ``periodUnit`` (xsd:string), ``timesOfDay`` (xsd:integer: how many
``timing.repeat.timeOfDay`` entries). Effects: ``mme`` (xsd:decimal, MME per day; ``null``
unless ``mmeStatus`` is Computed, PartlyCounted or NotCounted), ``mmeStatus`` (xsd:string or an
individual of that local name: Computed, PartlyCounted, NotCounted, UnknownDrug,
IncompleteDosage, AmbiguousDosage), ``mmeExplanation`` (xsd:string, the calculation in words)
and ``dosesPerDay`` (xsd:decimal or ``null``).

``prescription_supply`` (binding ``python:toolkits.opioid_cds.tools.prescription_supply``).
Arguments: ``supplyValue`` (xsd:decimal), ``supplyUnit`` (xsd:string, the Duration's code),
``validityStart``, ``validityEnd``, ``authoredOn`` (FHIR dateTime or date text). Effects:
``supplyDays`` (xsd:decimal), ``validityDays`` (xsd:integer), ``supplyEnd`` (a date as text).

``drug_name`` (binding ``python:toolkits.opioid_cds.tools.drug_name``), one medication order
whose FHIR resource gives no name (no ``text``, no coding ``display``). Argument:
``medication`` (xsd:string, one or several codings as ``system|code``). Effect: ``drugName``
(xsd:string): the drug data's name of the first RxNorm code it lists, else the first coding
said plainly (``RxNorm 1049621``), ``null`` without any coding. Nothing is made up: a code the
data does not list is never given a name.

``short_drug_name`` (binding ``python:toolkits.opioid_cds.tools.short_drug_name``), one
medication order. Argument: ``drugName`` (xsd:string). Effect: ``shortDrugName`` (xsd:string):
the name as a prescriber writes it in a summary, shortened by rule from RxNorm's normalized
name ("12 HR Oxycodone Hydrochloride 20 MG Extended Release Oral Tablet" is "oxycodone ER 20 mg
tablet", ``toolkits/opioid_cds/names.py``), any other name unchanged.

docs/opioid-cds.md has the same contract with the FHIR paths each argument is read from.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from app.clinical_text import code_text
from app.ontology.model import local_name
from app.tools.call import ToolCall
from app.tools.errors import ToolError
from app.tools.invoker import tool_aware
from toolkits.opioid_cds.drugs import drug_data
from toolkits.opioid_cds.mme import KNOWN, Dosage, MmeStatus, find_drug
from toolkits.opioid_cds.mme import order_mme as compute_mme
from toolkits.opioid_cds.names import short_name
from toolkits.opioid_cds.supply import supply_days, supply_end, validity_days

MME_ARGS = frozenset(
    {
        "rxnorm",
        "doseValue",
        "doseUnit",
        "frequency",
        "frequencyMax",
        "period",
        "periodUnit",
        "timesOfDay",
    }
)
NAME_ARGS = frozenset({"medication"})
SHORT_NAME_ARGS = frozenset({"drugName"})
SUPPLY_ARGS = frozenset({"supplyValue", "supplyUnit", "validityStart", "validityEnd", "authoredOn"})


class _Ambiguous(Exception):
    """An argument that should be one value carries several different ones."""


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else [value]
    return [v for v in items if v is not None]


def _one(args: Mapping[str, Any], name: str) -> Any:
    found = list(dict.fromkeys(_values(args.get(name))))
    if len(found) > 1:
        raise _Ambiguous(f"{name} has several values {found}")
    return found[0] if found else None


def _decimal(args: Mapping[str, Any], name: str) -> Decimal | None:
    value = _one(args, name)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ToolError(f"{name} = {value!r} is not a number", kind="contract")
    try:
        return Decimal(repr(value)) if isinstance(value, float) else Decimal(str(value))
    except InvalidOperation as exc:
        raise ToolError(f"{name} = {value!r} is not a number", kind="contract") from exc


def _integer(args: Mapping[str, Any], name: str) -> int | None:
    value = _decimal(args, name)
    if value is None:
        return None
    if value != value.to_integral_value():
        raise ToolError(f"{name} = {value} is not a whole number", kind="contract")
    return int(value)


def _text(args: Mapping[str, Any], name: str) -> str | None:
    value = _one(args, name)
    if value is not None and not isinstance(value, str):
        raise ToolError(f"{name} = {value!r} is not text", kind="contract")
    return value


def _number(value: Decimal | None) -> int | float | None:
    """JSON form of a decimal (the World reads a float back exactly through its shortest text)."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else float(value)


def _check_args(call: ToolCall, known: frozenset[str]) -> None:
    unknown = sorted(set(call.args) - known)
    if unknown:
        raise ToolError(
            f"{call.tool.name} does not take {unknown}; it takes {sorted(known)}", kind="contract"
        )


def _answer(call: ToolCall, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the declared effects, by local name; one the tool cannot produce is an error."""
    answer: dict[str, Any] = {}
    for effect in call.tool.effects:
        if effect.now:
            continue
        key = local_name(effect.property)
        if key not in outputs:
            raise ToolError(
                f"{call.tool.name} cannot produce {key!r}; it produces {sorted(outputs)}",
                kind="contract",
            )
        answer[key] = outputs[key]
    return answer


@tool_aware
def order_mme(call: ToolCall) -> Mapping[str, Any]:
    """MME per day of one medication order (see the module doc for the contract)."""
    _check_args(call, MME_ARGS)
    codes = [str(c) for c in _values(call.args.get("rxnorm"))]
    try:
        dosage = Dosage(
            dose_value=_decimal(call.args, "doseValue"),
            dose_unit=_text(call.args, "doseUnit"),
            frequency=_integer(call.args, "frequency"),
            frequency_max=_integer(call.args, "frequencyMax"),
            period=_decimal(call.args, "period"),
            period_unit=_text(call.args, "periodUnit"),
            times_of_day=_integer(call.args, "timesOfDay"),
        )
    except _Ambiguous as exc:
        outputs: dict[str, Any] = {
            "mme": None,
            "mmeStatus": MmeStatus.AMBIGUOUS_DOSAGE.value,
            "mmeExplanation": f"one dose cannot be read: {exc}",
            "dosesPerDay": None,
        }
        return _answer(call, outputs)
    result = compute_mme(codes, dosage)
    outputs = {
        "mme": _number(result.mme) if result.status in KNOWN else None,
        "mmeStatus": result.status.value,
        "mmeExplanation": result.explanation,
        "dosesPerDay": _number(result.doses_per_day),
    }
    return _answer(call, outputs)


@tool_aware
def prescription_supply(call: ToolCall) -> Mapping[str, Any]:
    """Days of supply, days of validity and the day the supply ends, of one order."""
    _check_args(call, SUPPLY_ARGS)
    try:
        days = supply_days(_decimal(call.args, "supplyValue"), _text(call.args, "supplyUnit"))
        validity = validity_days(_text(call.args, "validityStart"), _text(call.args, "validityEnd"))
        end = supply_end(_text(call.args, "authoredOn"), days)
    except _Ambiguous as exc:
        raise ToolError(f"{call.tool.name}: {exc}", kind="contract") from exc
    return _answer(
        call,
        {
            "supplyDays": _number(days),
            "validityDays": validity,
            "supplyEnd": end.isoformat() if end is not None else None,
        },
    )


@tool_aware
def drug_name(call: ToolCall) -> Mapping[str, Any]:
    """How a reader names the drug of one order whose resource names none: the drug data's
    name for its RxNorm code, else its first code said plainly, else nothing."""
    _check_args(call, NAME_ARGS)
    codes = [str(c) for c in _values(call.args.get("medication"))]
    drug = find_drug(codes, drug_data())
    name = drug.name if drug is not None else (code_text(codes[0]) if codes else None)
    return _answer(call, {"drugName": name})


@tool_aware
def short_drug_name(call: ToolCall) -> Mapping[str, Any]:
    """The drug's name as a prescriber writes it in a summary ("oxycodone ER 20 mg tablet"),
    from its RxNorm normalized name; any other name as it is."""
    _check_args(call, SHORT_NAME_ARGS)
    name = _text(call.args, "drugName")
    return _answer(call, {"shortDrugName": short_name(name) if name is not None else None})

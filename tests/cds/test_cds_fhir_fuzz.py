"""No FHIR-valid value makes a hook call fail: a property over the R4B models, through the real
app over HTTP.

Hypothesis builds the prefetch (and draft orders) of a call — Patient, Observation (vital signs
and labs, panels too), Condition, AllergyIntolerance, Encounter, MedicationRequest — about the
call's patient, with values drawn at the edges of what FHIR allows: dates from 0001 to 9999 in
every precision, offsets out to -13:59 and +14:00, leap seconds, decimals from 1e-30 to twenty-odd
digits (sent as the digits written, not as a float), whitespace-only strings, extensions nested
past the service's depth limit, keys left null. Every resource is validated with
``fhir.resources.R4B`` first; one the model refuses is rejected from the strategy, never sent.
The service shows times in ``Pacific/Kiritimati`` (+14:00), the zone furthest from UTC.

For the triage and medication-safety deployments and three opioid services (recommendations
4–5, 7 and 8), each answer is either a well-formed CDS response whose decision record opens
(JSON and HTML), or a 4xx OperationOutcome naming the field — never a 5xx. Examples are
derandomized (the same ones on every run); times "recent" are relative to the wall clock the
hook reads.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from fhir.resources.R4B import get_fhir_model_class
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from app.cds.response_check import check_response
from app.main import create_app
from app.settings import Settings
from tests.cds import clinical as fx
from tests.support import opioid_cases as oc
from tests.support.depth import examples

Resource = dict[str, Any]
LOINC, SNOMED, UCUM = "http://loinc.org", "http://snomed.info/sct", "http://unitsofmeasure.org"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
TERMINOLOGY = "http://terminology.hl7.org/CodeSystem/"
ZONE = "Pacific/Kiritimati"
OPIOID_SERVICES = ("opioidcds-04-05", "opioidcds-07", "opioidcds-08")
FUZZ = settings(
    max_examples=examples(30),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def client(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The service with its bundled deployments on a fresh SQLite database for this module
    (every call carries a hookInstance of its own)."""
    path = tmp_path_factory.mktemp("fhir-fuzz") / "horismos.db"
    path.write_bytes(sqlite_template.read_bytes())
    settings_ = Settings(database_url=f"sqlite:///{path}", timezone=ZONE)
    with TestClient(create_app(settings_)) as app_client:
        yield app_client


# --- values at the edges ----------------------------------------------------------------------

#: FHIR's offsets run from -14:00 to +14:00 (the grammar: ``(0[0-9]|1[0-3]):[0-5][0-9]|14:00``)
OFFSETS = ("Z", "+00:00", "-00:00", "+14:00", "-12:00", "-13:59", "+13:59", "+05:45", "-03:30")
SENTINELS = (
    "0001-01-01T00:00:00+01:00",
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00Z",
    "0001-01-01",
    "0001",
    "9999-12-31T23:59:59-12:00",
    "9999-12-31T23:59:60-12:00",
    "9999-12-31T23:59:59.999999999Z",
    "9999-12-31",
    "9999",
    "1900-01-01",
    "1970-01-01T00:00:00Z",
)


def _offset(text: str) -> timezone:
    if text in ("Z", "+00:00", "-00:00"):
        return UTC
    sign = -1 if text[0] == "-" else 1
    return timezone(sign * timedelta(hours=int(text[1:3]), minutes=int(text[4:6])))


def _written(day: date, hour: int, minute: int, second: int, fraction: str, offset: str) -> str:
    return f"{day.year:04d}-{day:%m-%d}T{hour:02d}:{minute:02d}:{second:02d}{fraction}{offset}"


def _ago(minutes: int, offset: str) -> str:
    """A time ``minutes`` before now (negative: after), written in ``offset``: the readings a
    decision takes as fresh."""
    when = (datetime.now(UTC) - timedelta(minutes=minutes)).astimezone(_offset(offset))
    return when.isoformat(timespec="seconds").replace("+00:00", "Z" if offset == "Z" else offset)


ANY_DAY = st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31))
FRACTIONS = st.sampled_from(("", ".0", ".5", ".123456", ".123456789", ".999999999"))
#: an instant: a time and an offset
INSTANTS = st.one_of(
    st.sampled_from([t for t in SENTINELS if "T" in t]),
    st.builds(
        _written,
        ANY_DAY,
        st.integers(0, 23),
        st.integers(0, 59),
        st.integers(0, 60),  # 60: a leap second, which FHIR's grammar admits
        FRACTIONS,
        st.sampled_from(OFFSETS),
    ),
    st.builds(_ago, st.integers(-24 * 60, 400 * 24 * 60), st.sampled_from(OFFSETS)),
)
#: a dateTime: an instant, or a day, month or year alone
DATETIMES = st.one_of(
    INSTANTS,
    st.sampled_from([t for t in SENTINELS if "T" not in t]),
    st.builds(lambda d: f"{d.year:04d}-{d:%m}", ANY_DAY),
    ANY_DAY.map(lambda d: f"{d.year:04d}-{d:%m-%d}"),
)
DATES = st.one_of(
    st.sampled_from(("0001-01-01", "0001", "9999-12-31", "9999-12", "2000-02-29")),
    ANY_DAY.map(lambda d: f"{d.year:04d}-{d:%m-%d}"),
    st.builds(lambda d: f"{d.year:04d}", ANY_DAY),
    st.integers(0, 120).map(lambda years: f"{datetime.now(UTC).year - years:04d}-01-01"),
)

#: decimals as written (JSON keeps every digit; the service reads what it reads)
DECIMALS = st.one_of(
    st.sampled_from(
        [
            Decimal("1e-30"),
            Decimal("0.000000000000000000000000000001"),
            Decimal("12345678901234567890.123"),
            Decimal("123456789012345678901234567890.12345678901234567890"),
            Decimal("3.14159265358979323846264338327950288419716939937510"),
            Decimal("0"),
            Decimal("-0"),
            Decimal("0E-30"),
            Decimal("1E+30"),
            Decimal("-1E+300"),
            Decimal("1.7976931348623157E+308"),  # the largest double: converted, it overflows
            Decimal("5E-324"),
            Decimal("1E-400"),
            Decimal("1E+400"),  # FHIR's grammar has no bound; past a double, a 4xx names it
        ]
    ),
    st.integers(-(10**25), 10**25).map(Decimal),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: Decimal(repr(f))),
    st.decimals(min_value=-1000, max_value=1000, allow_nan=False, allow_infinity=False),
    st.sampled_from([Decimal(v) for v in ("80", "160", "36.8", "98", "22", "6.1", "120", "30")]),
)
#: FHIR ``string``: whitespace only is one (``[ \r\n\t\S]+``); an empty one is not, and the model
#: refuses it, so none is drawn
_FHIR_CHARACTERS = st.characters(codec="utf-8", exclude_characters="\x00").filter(
    lambda c: c in " \r\n\t" or not c.isspace()
)  # NUL is FHIR but never stored: tests/cds/test_cds_hostile_input.py has it refused
TEXTS = st.one_of(
    st.sampled_from([" ", "\t", " \n ", "chest pain", "PCN - anaphylaxis", "<30", "162", "N/A"]),
    st.text(_FHIR_CHARACTERS, min_size=1, max_size=30),
)
POSITIVE_INTS = st.one_of(st.sampled_from([1, 2, 3, 2147483647]), st.integers(1, 2147483647))


#: codes the bundled deployments read, with units they convert (and some they refuse)
VITALS = {
    "8867-4": ["/min", "{beats}/min"],
    "9279-1": ["/min"],
    "59408-5": ["%", "1"],
    "8480-6": ["mm[Hg]"],
    "8310-5": ["Cel", "[degF]", "K"],
}
LABS = {
    "33914-3": ["mL/min/{1.73_m2}", "mL/min", "mL/s/{1.73_m2}"],
    "62238-1": ["mL/min/{1.73_m2}"],
    "2823-3": ["mmol/L", "meq/L"],
    "6298-4": ["mmol/L"],
}
CONDITIONS = ["29857009", "21522001", "25064002", "386661006", "422768004", "267036007"]
ALLERGIES = ["91936005", "764146007", "91935009"]
DRUGS = ["723", "733", "5640", "6809", "29046", "1049502", "1049621", "856908", "104693"]
IDS = st.uuids().map(lambda u: u.hex[:16])
#: extensions nested this deep: 46 take a prefetch resource past the 100 levels the service reads
DEPTHS = st.one_of(st.integers(0, 8), st.integers(40, 55))
Draw = Callable[[st.SearchStrategy[Any]], Any]


def _some(draw: Draw, resource: Resource, **fields: st.SearchStrategy[Any]) -> Resource:
    """``resource`` with some of ``fields`` drawn into it, each present or not."""
    for name, strategy in fields.items():
        if draw(st.booleans()):
            resource[name] = draw(strategy)
    return resource


def _nested(depth: int) -> list[Resource]:
    """An extension holding an extension … ``depth`` deep, a value at the bottom."""
    node: Resource = {"url": "http://example.org/fhir/StructureDefinition/leaf", "valueString": "x"}
    for _ in range(depth):
        node = {"url": "http://example.org/fhir/StructureDefinition/nest", "extension": [node]}
    return [node]


def _base(draw: Draw, kind: str, rid: str | None = None) -> Resource:
    """A resource of ``kind``; now and then nested deep in extensions (rarely: a call that
    carries one too deep is refused whole, and the rest of it goes unread)."""
    resource: Resource = {"resourceType": kind, "id": rid or draw(IDS)}
    if draw(st.integers(0, 9)) == 0:
        resource["extension"] = _nested(draw(DEPTHS))
    return _some(draw, resource, meta=INSTANTS.map(lambda t: {"lastUpdated": t}))


def _valid(resource: Resource) -> bool:
    """Whether the R4B model takes ``resource`` as it is: only such resources are sent."""
    try:
        get_fhir_model_class(resource["resourceType"]).model_validate(resource)
    except ValidationError:
        return False
    return True


@st.composite
def _concept(draw: Draw, system: str, codes: list[str]) -> Resource:
    """A CodeableConcept: codings of ``system`` (one of ``codes`` or any other digits), text,
    or both."""
    concept: Resource = {}
    codings = []
    for _ in range(draw(st.integers(0, 2))):
        code = draw(
            st.one_of(st.sampled_from(codes), st.from_regex(r"[1-9][0-9]{0,17}", fullmatch=True))
        )
        codings.append(_some(draw, {"system": system, "code": code}, display=TEXTS))
    if codings:
        concept["coding"] = codings
    if not codings or draw(st.booleans()):
        concept["text"] = draw(TEXTS)
    return concept


def _status(system: str, codes: list[str]) -> st.SearchStrategy[Resource]:
    return st.sampled_from(codes).map(
        lambda c: {"coding": [{"system": TERMINOLOGY + system, "code": c}]}
    )


def _category(system: str, code: str) -> list[Resource]:
    return [{"coding": [{"system": TERMINOLOGY + system, "code": code}]}]


@st.composite
def _quantity(draw: Draw, units: list[str], *, comparator: bool = True) -> Resource:
    """A Quantity at the edges: its value any decimal, its unit UCUM or display text only."""
    quantity: Resource = {"value": draw(DECIMALS)}
    if draw(st.booleans()):
        code = draw(st.sampled_from(units))
        quantity.update(unit=code, system=UCUM, code=code)
    else:
        _some(draw, quantity, unit=TEXTS)
    if comparator:
        _some(draw, quantity, comparator=st.sampled_from(["<", "<=", ">=", ">"]))
    return quantity


def _period(draw: Draw) -> Resource:
    return _some(draw, {}, start=DATETIMES, end=DATETIMES)


@st.composite
def patients(draw: Draw, pid: str) -> Resource:
    """The call's patient, born on any day (or month, or year) of the calendar."""
    return _some(
        draw,
        _base(draw, "Patient", pid),
        birthDate=DATES,
        gender=st.sampled_from(["female", "male", "other", "unknown"]),
        deceasedDateTime=DATETIMES,
        active=st.booleans(),
        name=TEXTS.map(lambda t: [{"text": t}]),
    )


@st.composite
def observations(draw: Draw, pid: str, codes: dict[str, list[str]], category: str) -> Resource:
    """A vital sign or lab of the patient: a quantity, a string, a panel's component or no
    value at all, taken whenever."""
    obs = _base(draw, "Observation")
    obs["status"] = draw(st.sampled_from(["final", "amended", "preliminary", "cancelled"]))
    obs["category"] = _category("observation-category", category)
    obs["subject"] = {"reference": f"Patient/{pid}"}
    code = draw(st.sampled_from(sorted(codes)))
    shape = draw(st.sampled_from(["quantity", "quantity", "string", "absent", "panel"]))
    if shape == "panel":
        obs["code"] = {"coding": [{"system": LOINC, "code": "85354-9"}]}
        obs["component"] = [
            {
                "code": {"coding": [{"system": LOINC, "code": part}]},
                "valueQuantity": draw(_quantity(["mm[Hg]"])),
            }
            for part in ("8480-6", "8462-4")
        ]
    else:
        obs["code"] = {"coding": [{"system": LOINC, "code": code}]}
        if shape == "quantity":
            obs["valueQuantity"] = draw(_quantity(codes[code]))
        elif shape == "string":
            obs["valueString"] = draw(TEXTS)
        else:
            obs["dataAbsentReason"] = _category("data-absent-reason", "unknown")[0]
    when = draw(
        st.sampled_from(["effectiveDateTime", "effectiveInstant", "effectivePeriod", "issued", ""])
    )
    if when == "effectivePeriod":
        obs[when] = _period(draw)
    elif when:
        obs[when] = draw(INSTANTS if when in ("effectiveInstant", "issued") else DATETIMES)
    return obs


@st.composite
def conditions(draw: Draw, pid: str) -> Resource:
    """A diagnosis or problem of the patient, with its onset as a time, an age or text."""
    condition = _base(draw, "Condition")
    condition["subject"] = {"reference": f"Patient/{pid}"}
    condition["code"] = draw(_concept(SNOMED, CONDITIONS))
    onset = draw(st.sampled_from(["onsetDateTime", "onsetAge", "onsetString", ""]))
    if onset == "onsetAge":
        condition[onset] = {**draw(_quantity(["a"], comparator=False)), "system": UCUM, "code": "a"}
    elif onset == "onsetString":
        condition[onset] = draw(TEXTS)
    elif onset:
        condition[onset] = draw(DATETIMES)
    return _some(
        draw,
        condition,
        clinicalStatus=_status(
            "condition-clinical", ["active", "recurrence", "relapse", "inactive", "resolved"]
        ),
        verificationStatus=_status(
            "condition-ver-status", ["confirmed", "provisional", "unconfirmed", "refuted"]
        ),
        category=st.sampled_from(["encounter-diagnosis", "problem-list-item"]).map(
            lambda c: _category("condition-category", c)
        ),
        recordedDate=DATETIMES,
        abatementDateTime=DATETIMES,
    )


@st.composite
def allergies(draw: Draw, pid: str) -> Resource:
    """An allergy of the patient, recorded, begun and last seen whenever."""
    allergy = _base(draw, "AllergyIntolerance")
    allergy["patient"] = {"reference": f"Patient/{pid}"}
    allergy["code"] = draw(_concept(SNOMED, ALLERGIES))
    reaction = st.builds(
        lambda manifestation, more: {"manifestation": [manifestation], **more},
        _concept(SNOMED, ["39579001", "271807003"]),
        st.fixed_dictionaries(
            {}, optional={"substance": _concept(RXNORM, ["7980", "723"]), "onset": DATETIMES}
        ),
    )
    return _some(
        draw,
        allergy,
        clinicalStatus=_status("allergyintolerance-clinical", ["active", "inactive", "resolved"]),
        verificationStatus=_status(
            "allergyintolerance-verification", ["confirmed", "unconfirmed", "refuted"]
        ),
        criticality=st.sampled_from(["low", "high", "unable-to-assess"]),
        recordedDate=DATETIMES,
        onsetDateTime=DATETIMES,
        lastOccurrence=DATETIMES,
        reaction=st.lists(reaction, min_size=1, max_size=2),
    )


@st.composite
def encounters(draw: Draw, pid: str, eid: str | None = None) -> Resource:
    """A visit of the patient (``eid``: the hook's own encounter), over any period."""
    encounter = _base(draw, "Encounter", eid)
    encounter["status"] = draw(st.sampled_from(["arrived", "in-progress", "finished", "cancelled"]))
    encounter["class"] = {
        "system": "http://terminology.hl7.org/CodeSystem/v3-ActCode",
        "code": draw(st.sampled_from(["EMER", "AMB", "IMP"])),
    }
    encounter["subject"] = {"reference": f"Patient/{pid}"}
    if draw(st.booleans()):
        encounter["period"] = _period(draw)
    return _some(
        draw,
        encounter,
        reasonCode=st.lists(_concept(SNOMED, CONDITIONS), min_size=1, max_size=2),
        type=st.lists(_concept(SNOMED, ["185463005", "390906007"]), min_size=1, max_size=1),
    )


@st.composite
def medication_requests(draw: Draw, pid: str, statuses: list[str]) -> Resource:
    """An order of the patient: any drug, dose, frequency, period and supply, authored
    whenever."""
    order = _base(draw, "MedicationRequest")
    order["status"] = draw(st.sampled_from(statuses))
    order["intent"] = "order"
    order["subject"] = {"reference": f"Patient/{pid}"}
    order["medicationCodeableConcept"] = draw(_concept(RXNORM, DRUGS))
    repeat = _some(
        draw,
        {},
        frequency=POSITIVE_INTS,
        frequencyMax=POSITIVE_INTS,
        period=DECIMALS,
        periodUnit=st.sampled_from(["s", "min", "h", "d", "wk", "mo", "a"]),
    )
    dose = {"doseQuantity": draw(_quantity(["{tablet}", "mg", "ug"], comparator=False))}
    dispense = _some(
        draw,
        {},
        expectedSupplyDuration=st.builds(
            lambda value, code: {"value": value, "unit": code, "system": UCUM, "code": code},
            DECIMALS,
            st.sampled_from(["d", "wk", "mo", "h", "a", "min"]),
        ),
        validityPeriod=st.builds(lambda s, e: {"start": s, "end": e}, DATETIMES, DATETIMES),
        numberOfRepeatsAllowed=st.integers(0, 2147483647),
    )
    return _some(
        draw,
        order,
        authoredOn=DATETIMES,
        category=st.sampled_from(["community", "inpatient", "outpatient"]).map(
            lambda c: _category("medicationrequest-category", c)
        ),
        dosageInstruction=st.just([{"timing": {"repeat": repeat}, "doseAndRate": [dose]}]),
        dispenseRequest=st.just(dispense),
    )


@st.composite
def procedures(draw: Draw, pid: str) -> Resource:
    """A procedure of the patient, performed whenever."""
    procedure = _base(draw, "Procedure")
    procedure["status"] = draw(st.sampled_from(["completed", "in-progress", "not-done"]))
    procedure["subject"] = {"reference": f"Patient/{pid}"}
    procedure["code"] = draw(_concept(SNOMED, ["313071005", "225337009"]))
    return _some(draw, procedure, performedDateTime=DATETIMES)


# --- calls ---------------------------------------------------------------------------------------


def _searchset(resources: list[Resource]) -> Resource:
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": len(resources),
        "entry": [{"resource": r} for r in resources],
    }


def _key(draw: Draw, value: st.SearchStrategy[Any]) -> Any:
    """A prefetch key's value, null now and then (the EHR found nothing to send)."""
    return None if draw(st.integers(0, 9)) == 0 else draw(value)


def _records(strategy: st.SearchStrategy[Resource], *, most: int = 4) -> st.SearchStrategy[Any]:
    return st.lists(strategy.filter(_valid), max_size=most).map(_searchset)


def _body(hook: str, context: Resource, prefetch: Resource) -> Resource:
    return {
        "hook": hook,
        "hookInstance": str(uuid.uuid4()),
        "context": {"userId": "Practitioner/example", **context},
        "prefetch": prefetch,
    }


def _drafts(orders: list[Resource]) -> Resource:
    return {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": o} for o in orders],
    }


@st.composite
def triage_calls(draw: Draw) -> Resource:
    """An encounter-start call, sometimes with a complete set of fresh, unremarkable vital
    signs beside the edge ones (so that decided runs, and their proofs, are drawn too)."""
    pid, eid = draw(IDS), draw(IDS)
    vitals = draw(st.lists(observations(pid, VITALS, "vital-signs").filter(_valid), max_size=5))
    if draw(st.booleans()):
        vitals += fx.vital_signs(pid)
    return _body(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        {
            "patient": _key(draw, patients(pid).filter(_valid)),
            "encounter": _key(draw, encounters(pid, eid).filter(_valid)),
            "vitals": None if draw(st.integers(0, 9)) == 0 else _searchset(vitals),
            "conditions": _key(draw, _records(conditions(pid))),
        },
    )


@st.composite
def med_safety_calls(draw: Draw) -> Resource:
    """An order-sign call of one to three draft orders."""
    pid = draw(IDS)
    drafts = draw(
        st.lists(medication_requests(pid, ["draft"]).filter(_valid), min_size=1, max_size=3)
    )
    return _body(
        "order-sign",
        {"patientId": pid, "draftOrders": _drafts(drafts)},
        {
            "patient": _key(draw, patients(pid).filter(_valid)),
            "allergies": _key(draw, _records(allergies(pid))),
            "labs": _key(draw, _records(observations(pid, LABS, "laboratory"))),
        },
    )


#: what each opioid prefetch template reads, by the resource type it starts with
_OPIOID_RECORDS: dict[str, Callable[[str], st.SearchStrategy[Any]]] = {
    "MedicationRequest": lambda pid: _records(
        medication_requests(pid, ["active", "completed", "stopped", "on-hold"])
    ),
    "Condition": lambda pid: _records(conditions(pid)),
    "Encounter": lambda pid: _records(encounters(pid)),
    "Procedure": lambda pid: _records(procedures(pid)),
    "Observation": lambda pid: _records(observations(pid, LABS, "laboratory")),
}


@st.composite
def opioid_calls(draw: Draw, templates: dict[str, str]) -> Resource:
    """An order-sign call of an opioid service: a prefetch value for each of its templates."""
    pid = draw(IDS)
    drafts = draw(
        st.lists(
            medication_requests(pid, ["draft", "active"]).filter(_valid), min_size=0, max_size=2
        )
    )
    plain = draw(st.booleans())  # beside a plain adult and opioid draft, so that checks run
    if plain or not drafts:
        drafts.append(oc.order("draft-" + draw(IDS), pid, oc.HYDROCODONE_10, dose=5))
    prefetch: Resource = {}
    for key, template in templates.items():
        kind = re.split(r"[/?]", template, maxsplit=1)[0]
        if kind == "Patient":
            adult = st.just(oc.patient(pid))
            prefetch[key] = _key(draw, adult if plain else patients(pid).filter(_valid))
        else:
            records = _OPIOID_RECORDS.get(kind)
            empty = st.just(_searchset([]))  # a type the property does not draw: none on record
            prefetch[key] = _key(draw, records(pid) if records is not None else empty)
    return _body("order-sign", {"patientId": pid, "draftOrders": _drafts(drafts)}, prefetch)


# --- the property ------------------------------------------------------------------------------

_DECIMAL = re.compile(r'"@decimal:([^"@]+)@"')


def _as_sent(body: Resource) -> str:
    """The body as JSON, each decimal in the digits it was drawn with (not a float's)."""
    text = json.dumps(body, default=lambda d: f"@decimal:{d}@")
    return _DECIMAL.sub(r"\1", text)


def _answers_or_names_the_field(client: TestClient, service: str, body: Resource) -> None:
    """Send ``body`` (every resource in it valid R4B) and check the answer."""
    sent = [v for v in body["prefetch"].values() if v is not None]
    if "draftOrders" in body["context"]:
        sent.append(body["context"]["draftOrders"])
    assert all(_valid(resource) for resource in sent)  # fixtures beside the drawn ones too
    resp = client.post(
        f"/cds-services/{service}",
        content=_as_sent(body),
        headers={"content-type": "application/json"},
    )
    assert resp.status_code < 500, resp.text
    if resp.status_code != 200:
        outcome = resp.json()
        assert outcome["resourceType"] == "OperationOutcome", outcome
        assert any(issue.get("expression") for issue in outcome["issue"]), outcome
        return
    answer = resp.json()
    assert check_response(answer) == [], answer
    run_id = answer["extension"]["dev.horismos.run"]["runId"]
    record = client.get(f"/runs/{run_id}")
    assert record.status_code == 200, record.text
    page = client.get(f"/runs/{run_id}", headers={"accept": "text/html"})
    assert page.status_code == 200, page.text


@FUZZ
@given(body=triage_calls())
def test_no_fhir_valid_triage_input_is_a_server_error(client: TestClient, body: Resource) -> None:
    _answers_or_names_the_field(client, "horismos-triage", body)


@FUZZ
@given(body=med_safety_calls())
def test_no_fhir_valid_medication_safety_input_is_a_server_error(
    client: TestClient, body: Resource
) -> None:
    _answers_or_names_the_field(client, "horismos-med-safety", body)


@FUZZ
@given(data=st.data())
def test_no_fhir_valid_opioid_input_is_a_server_error(
    client: TestClient, data: st.DataObject
) -> None:
    services = {s["id"]: s for s in client.get("/individual/cds-services").json()["services"]}
    service = data.draw(st.sampled_from(OPIOID_SERVICES))
    body = data.draw(opioid_calls(services[service]["prefetch"]))
    _answers_or_names_the_field(client, service, body)

"""Our own real-chart conformance set: public third-party patient records, over HTTP.

Each file of ``tests/data/real-charts/`` is one hook call built from records nobody on the
project wrote (the FHIR R4 specification's examples, US Core's examples, the Inferno reference
server's data, Synthea charts), with the answer a careful clinician reads from the record and
the deployment's declared logic, and where every resource came from
(``tests/data/real-charts/README.md``). The call is posted to the bundled deployments as an EHR
sends it, everything prefetched; dates are written relative to the day the test runs
(``@now-30m``, ``@date-20d``) and rolled here.

Where the service's answer is not the clinician's, the case says so in ``known_gap`` and its
answer test is a strict xfail: the gap stays visible, and the test fails once it is fixed so
that the mark is removed. Whatever the answer, a call with data a real EHR sends is answered
200 (``test_answered_as_a_cds_response`` has no xfail).
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

CASES_DIR = Path(__file__).resolve().parents[1] / "data" / "real-charts"
CASE_FILES = sorted(CASES_DIR.glob("*.json"))
OPIOID_PREFIX = "opioidcds-"
#: ``@now``, ``@now-30m``, ``@now-6h``, ``@now-3d`` (a dateTime) and ``@date-20d``, ``@date+345d``
#: (a date), relative to the moment the test runs
_RELATIVE = re.compile(r"^@(now|date)(?:([+-])(\d+)([mhd]))?$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def load(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return case


def roll(node: Any, now: datetime) -> Any:
    """``node`` with every relative date written as FHIR writes it on ``now``."""
    if isinstance(node, dict):
        return {key: roll(value, now) for key, value in node.items()}
    if isinstance(node, list):
        return [roll(value, now) for value in node]
    if isinstance(node, str):
        match = _RELATIVE.match(node)
        if match:
            kind, sign, amount, unit = match.groups()
            delta = timedelta(**{_UNITS[unit]: int(amount)}) if amount else timedelta(0)
            moment = now - delta if sign == "-" else now + delta
            return (
                moment.isoformat(timespec="seconds") if kind == "now" else moment.date().isoformat()
            )
    return node


def hook_call(case: dict[str, Any], now: datetime) -> dict[str, Any]:
    body: dict[str, Any] = roll(copy.deepcopy(case["request"]), now)
    body["hookInstance"] = str(uuid.uuid4())
    return body


def resources(node: Any) -> Iterator[dict[str, Any]]:
    """The resources a request carries: the values of its keys, unpacked from Bundles."""
    if isinstance(node, dict) and node.get("resourceType") == "Bundle":
        for entry in node.get("entry") or []:
            yield from resources(entry.get("resource"))
    elif isinstance(node, dict) and "resourceType" in node:
        yield node


def carried(case: dict[str, Any]) -> list[dict[str, Any]]:
    request = case["request"]
    found = list(resources(request["context"].get("draftOrders")))
    for value in request["prefetch"].values():
        found.extend(resources(value))
    return found


def answer(run: dict[str, Any]) -> dict[str, Any]:
    """What the run decided, in the case files' terms."""
    if "undecided" in run:
        return {"undecided": sorted(i["input"] for i in run["undecided"]["inputs"])}
    return {"decision": run["decision"]["value"]}


def expected_answer(case: dict[str, Any]) -> dict[str, Any]:
    expected = case["expected"]
    if "undecided" in expected:
        return {"undecided": sorted(expected["undecided"])}
    return {"decision": expected["decision"]}


@pytest.fixture(scope="module")
def client(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The service with its bundled deployments on a fresh SQLite database, once for the module
    (each call carries a hookInstance of its own)."""
    path = tmp_path_factory.mktemp("real-charts") / "horismos.db"
    path.write_bytes(sqlite_template.read_bytes())
    with TestClient(create_app(Settings(database_url=f"sqlite:///{path}"))) as app_client:
        yield app_client


@pytest.fixture(scope="module")
def responses() -> dict[str, Any]:
    """Each case's answer, posted once and read by both tests of the case."""
    return {}


def respond(client: TestClient, responses: dict[str, Any], path: Path) -> Any:
    if path.stem not in responses:
        case = load(path)
        responses[path.stem] = client.post(
            f"/cds-services/{case['service']}", json=hook_call(case, datetime.now(UTC))
        )
    return responses[path.stem]


def _answer_params() -> list[Any]:
    params = []
    for path in CASE_FILES:
        gap = load(path).get("known_gap")
        marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_answered_as_a_cds_response(
    client: TestClient, responses: dict[str, Any], path: Path
) -> None:
    """Data a real EHR sends is never a 4xx or a 5xx: the call is answered with cards and a run
    that either decided or names what it could not decide on."""
    resp = respond(client, responses, path)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert isinstance(body["cards"], list)
    run = body["extension"]["dev.horismos.run"]
    assert ("decision" in run) != ("undecided" in run), run


@pytest.mark.parametrize("path", _answer_params())
def test_the_service_answers_what_the_clinician_reads(
    client: TestClient, responses: dict[str, Any], path: Path
) -> None:
    case = load(path)
    resp = respond(client, responses, path)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    cards = [(c["indicator"], c["summary"]) for c in body["cards"]]
    got = answer(body["extension"]["dev.horismos.run"])
    assert got == expected_answer(case), (case["clinician"], cards)
    if "cards" in case["expected"]:
        indicators = sorted(indicator for indicator, _ in cards)
        assert indicators == sorted(case["expected"]["cards"]), (case["clinician"], cards)


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_every_case_names_the_origin_of_each_resource(path: Path) -> None:
    case = load(path)
    for key in ("title", "service", "request", "expected", "clinician", "dates", "sources"):
        assert key in case, f"{path.name}: no {key!r}"
    assert ("decision" in case["expected"]) != ("undecided" in case["expected"])
    if "known_gap" in case:
        assert case["known_gap"].strip(), f"{path.name}: an empty known_gap"
    sources = {s["resource"]: s for s in case["sources"]}
    assert len(sources) == len(case["sources"]), f"{path.name}: a resource listed twice"
    keys = {f"{r['resourceType']}/{r['id']}" for r in carried(case)}
    assert keys == set(sources), (
        f"{path.name}: carried {sorted(keys ^ set(sources))} without a source or the reverse"
    )
    for source in case["sources"]:
        assert source.get("path"), source
        assert isinstance(source.get("edits"), list), source
        if "repository" in source:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repository"]), source
            assert _COMMIT.match(source.get("commit", "")), source
        else:
            assert source.get("package") and source.get("version"), source


def test_the_set_covers_triage_medication_safety_and_five_opioid_services() -> None:
    services = [load(path)["service"] for path in CASE_FILES]
    assert len(services) >= 40
    assert "horismos-triage" in services
    assert "horismos-med-safety" in services
    opioid = {s for s in services if s.startswith(OPIOID_PREFIX)}
    assert len(opioid) >= 5, sorted(opioid)


def test_relative_dates_are_rolled_to_the_day_the_test_runs() -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    rolled = roll({"a": "@now-30m", "b": ["@date-1d", "@date+365d"], "c": "@now", "d": "@x"}, now)
    assert rolled == {
        "a": "2026-03-01T11:30:00+00:00",
        "b": ["2026-02-28", "2027-03-01"],
        "c": "2026-03-01T12:00:00+00:00",
        "d": "@x",
    }


def test_the_readme_table_says_which_cases_are_known_gaps() -> None:
    """The set's README lists every case once, with "yes" exactly where its file has a gap."""
    rows = re.findall(
        r"^\| `([^`]+)` \|.*\|\s*(yes)?\s*\|$",
        (CASES_DIR / "README.md").read_text(encoding="utf-8"),
        flags=re.MULTILINE,
    )
    files = {p.stem: "known_gap" in load(p) for p in CASES_DIR.glob("*.json")}
    assert {name: gap == "yes" for name, gap in rows} == files
    assert len(rows) == len(files)

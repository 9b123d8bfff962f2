"""The CDC opioid guide's example requests, made ready to replay against a FHIR server.

``load_examples()`` reads ``tests/data/opioid-cds/examples/``. ``prepare(example, today, tag)``
returns the request as an EHR would send it on ``today``:

1. dates rolled to ``today`` (``tests.support.date_roller``);
2. resources that share a type and id but differ (four Observations under one id; a stored order
   under the id of a draft order for another drug) get ids of their own: the draft order keeps
   its id, each later different resource gets ``<id>-2``, ``<id>-3``… (a FHIR server keeps one
   resource per id, so the EHR these requests stand for cannot have had them otherwise);
3. every id the example defines is prefixed with ``tag``, in resources, references (bare ones
   too) and the context's ids, so examples that reuse a patient id never meet on one FHIR server.

The context keeps the example's own quirks (``Patient/x`` as ``patientId``, a bare
``subject.reference``, the older ``order-select`` hook): the service under test must cope with
them. What the harness does as the EHR — filling prefetch templates — uses the bare ids an EHR
knows (``fill_template``).
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from app.fhir_json import resources_of
from tests.support.date_roller import roll

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from tests.support.fhir_server import FhirServer

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "data" / "opioid-cds" / "examples"
#: cases of our own at the boundaries of each recommendation, in the examples' format
CASES_DIR = EXAMPLES_DIR.parent / "cases"
_REFERENCE = re.compile(r"^([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})$")
_CONTEXT_IDS = ("patientId", "encounterId")
_TOKEN = re.compile(r"\{\{\s*([^}\s]+)\s*\}\}")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Example:
    name: str  # e.g. "rec-08-on-naloxone"
    path: Path
    service: str  # the guide's service id the example was written for
    request: dict[str, Any]
    expected: list[dict[str, Any]]  # the reference's cards: indicator and summary

    @property
    def expected_indicators(self) -> list[str]:
        return sorted(card["indicator"] for card in self.expected)


@dataclass
class Prepared:
    """An example's request on the test day, and the stored resources an EHR would hold."""

    request: dict[str, Any]
    stored: list[dict[str, Any]]
    renamed: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    @property
    def patient_id(self) -> str:
        """The bare id of the patient (what the EHR itself knows)."""
        return bare(str(self.request["context"]["patientId"]))


def deployed_services() -> frozenset[str]:
    """The service ids the bundled ontology serves, i.e. what discovery lists."""
    from app.main import configured_deployments
    from app.settings import Settings
    from app.tools.host import ToolHost

    deployments = configured_deployments(Settings(), ToolHost.discover())
    return frozenset(s.id for s, _ in deployments.services())


def load_examples(folder: Path = EXAMPLES_DIR) -> list[Example]:
    examples = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        examples.append(
            Example(
                name=path.stem.split("--", 1)[1],
                path=path,
                service=data["service"],
                request=data["request"],
                expected=list(data["expectedCards"]),
            )
        )
    return examples


def bare(value: str) -> str:
    """``Patient/x`` → ``x``; a bare id stays as it is."""
    match = _REFERENCE.match(value)
    return match.group(2) if match else value


def _top_level(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Context resources first (the draft orders keep their ids), then prefetch resources."""
    found: list[dict[str, Any]] = []
    for value in (request.get("context") or {}).values():
        found.extend(resources_of(value))
    for value in (request.get("prefetch") or {}).values():
        found.extend(resources_of(value))
    return found


def _canonical(resource: dict[str, Any]) -> str:
    return json.dumps(resource, sort_keys=True, separators=(",", ":"))


def _own_ids(resources: list[dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """Give each different resource under one ``Type/id`` an id of its own, in place; returns
    the ids given per original ``(type, id)``."""
    seen: dict[tuple[str, str], list[str]] = {}
    renamed: dict[tuple[str, str], list[str]] = {}
    for resource in resources:
        key = (resource["resourceType"], resource["id"])
        text = _canonical(resource)
        versions = seen.setdefault(key, [])
        if not versions or text in versions:
            if not versions:
                versions.append(text)
            continue
        versions.append(text)
        resource["id"] = f"{key[1]}-{len(versions)}"
        renamed.setdefault(key, []).append(resource["id"])
    return renamed


def _retag(node: Any, ids: set[str], tag: str) -> Any:
    """Prefix every id of ``ids`` wherever the example names it."""
    if isinstance(node, list):
        return [_retag(item, ids, tag) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "id" and "resourceType" in node and value in ids:
            out[key] = tag + value
        elif key == "reference" and isinstance(value, str):
            out[key] = _retag_reference(value, ids, tag)
        else:
            out[key] = _retag(value, ids, tag)
    return out


def _retag_reference(value: str, ids: set[str], tag: str) -> str:
    match = _REFERENCE.match(value)
    if match and match.group(2) in ids:
        return f"{match.group(1)}/{tag}{match.group(2)}"
    return tag + value if value in ids else value


def prepare(example: Example, today: date, tag: str) -> Prepared:
    """The example's request on ``today`` with ids of its own (see the module doc)."""
    request = roll(copy.deepcopy(example.request), today)
    renamed = _own_ids(_top_level(request))
    ids = {r["id"] for r in _top_level(request)}
    context = request.get("context") or {}
    ids.update(bare(str(context[name])) for name in _CONTEXT_IDS if context.get(name))
    request["context"] = _retag(context, ids, tag)
    for name in _CONTEXT_IDS:
        if name in request["context"]:
            request["context"][name] = _retag_reference(str(context[name]), ids, tag)
    if "selections" in context:
        request["context"]["selections"] = [
            _retag_reference(str(s), ids, tag) for s in context["selections"]
        ]
    request["prefetch"] = _retag(request.get("prefetch") or {}, ids, tag)
    stored: dict[tuple[str, str], dict[str, Any]] = {}
    for value in request["prefetch"].values():
        for resource in resources_of(value):
            stored.setdefault(
                (resource["resourceType"], resource["id"]), as_stored(resource, today)
            )
    return Prepared(request=request, stored=list(stored.values()), renamed=renamed)


_NOT_CHANGES = frozenset({"birthDate", "extension"})  # dates that say nothing of a record's edits
_ENCOUNTER_CLASS = {
    "system": "http://terminology.hl7.org/CodeSystem/v3-ActCode",
    "code": "AMB",
    "display": "ambulatory",
}


def _latest_day(node: Any, today: date) -> str | None:
    """The latest day up to ``today`` written anywhere in ``node`` (a date or dateTime)."""
    days: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(v for k, v in item.items() if k not in _NOT_CHANGES)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and _DAY.match(item) and item[:10] <= today.isoformat():
            days.append(item[:10])
    return max(days) if days else None


def as_stored(resource: dict[str, Any], today: date) -> dict[str, Any]:
    """The resource as a FHIR R4 server holds it. The guide's examples were sent as prefetch and
    never stored, so two things a server requires are added: an ``Encounter`` without its
    required ``class`` is ambulatory (every example encounter is an office or outpatient visit;
    no rule reads the class), and ``meta.lastUpdated`` (which a server stamps on every write) is
    the record's own when it has one, else the latest day up to today that the record mentions,
    so that "created or updated in the past 90 days" (recommendation 2) reads the example as its
    author meant."""
    stored = copy.deepcopy(resource)
    if stored["resourceType"] == "Encounter" and "class" not in stored:
        stored["class"] = dict(_ENCOUNTER_CLASS)
    meta = dict(stored.get("meta") or {})
    last = meta.get("lastUpdated") or _latest_day(stored, today)
    if last:
        meta["lastUpdated"] = last if "T" in last else f"{last}T00:00:00Z"
        stored["meta"] = meta
    return stored


def fill_template(template: str, context: dict[str, Any]) -> str | None:
    """A prefetch template filled as an EHR fills it (bare ids for ``{{context.patientId}}``
    and ``{{context.encounterId}}``, the user's id for ``{{userPractitionerId}}``…); None when
    it names something the context does not carry (the key does not apply)."""
    user_type, _, user_id = str(context.get("userId") or "").partition("/")
    tokens = {
        "userPractitionerId": user_id if user_type == "Practitioner" else None,
        "userPractitionerRoleId": user_id if user_type == "PractitionerRole" else None,
        "userPatientId": user_id if user_type == "Patient" else None,
        "userRelatedPersonId": user_id if user_type == "RelatedPerson" else None,
    }
    missing = False

    def fill(match: re.Match[str]) -> str:
        nonlocal missing
        name = match.group(1)
        value: Any
        if name.startswith("context."):
            value = context.get(name.removeprefix("context."))
            if name.removeprefix("context.") in _CONTEXT_IDS and isinstance(value, str):
                value = bare(value)
        else:
            value = tokens.get(name)
        if not isinstance(value, str) or not value:
            missing = True
            return ""
        return value

    filled = _TOKEN.sub(fill, template)
    return None if missing else filled


def ehr_prefetch(
    templates: dict[str, str], context: dict[str, Any], fhir: FhirServer
) -> dict[str, Any]:
    """Each template executed against the FHIR server as the EHR executes it: a read that finds
    nothing is ``null``; a template that does not apply to this context is left out."""
    out: dict[str, Any] = {}
    with httpx.Client(base_url=fhir.base_url + "/", timeout=10.0) as http:
        for key, template in templates.items():
            query = fill_template(template, context)
            if query is None:
                continue
            answer = http.get(query, headers={"accept": "application/fhir+json"})
            if answer.status_code == 404:
                out[key] = None
                continue
            assert answer.status_code == 200, f"{key}: {query} → {answer.status_code} {answer.text}"
            out[key] = answer.json()
    return out


def call_service(
    client: TestClient,
    fhir: FhirServer,
    example: Example,
    *,
    service_id: str,
    mode: str,
    today: date,
) -> httpx.Response:
    """Load the example's stored resources into ``fhir`` and call ``service_id`` with it:
    ``mode`` "prefetch" fills every key by executing the service's discovery templates against
    ``fhir``; "fetch" sends no prefetch, so the service reads ``fhir`` itself."""
    prepared = prepare(example, today, tag=fhir.new_id()[:6] + "-")
    for resource in prepared.stored:
        fhir.store_as_of(resource)
    services = [  # a service on its own, or a combined one
        *client.get("/individual/cds-services").json()["services"],
        *client.get("/cds-services").json()["services"],
    ]
    service = next((s for s in services if s["id"] == service_id), None)
    assert service is not None, f"{service_id} is not in discovery"
    request = dict(prepared.request)
    request.update(hookInstance=str(uuid.uuid4()), fhirServer=fhir.base_url)
    request.pop("fhirAuthorization", None)
    if mode == "prefetch":
        request["prefetch"] = ehr_prefetch(service.get("prefetch") or {}, request["context"], fhir)
    else:
        request.pop("prefetch", None)
    return client.post(f"/cds-services/{service_id}", json=request)

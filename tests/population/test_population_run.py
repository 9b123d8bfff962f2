"""Population runs on Apache Spark (local mode), end to end: the guide's recommendation 12
examples written as a Bulk Data export (one NDJSON file per resource type), run with
``population_run``, and each patient's row compared with a live hook call over HTTP, on
PostgreSQL, that reads the same patient's records from the project's FHIR server: the same
decision and the same cards (per-run uuids and decision-record links aside).

Also: a line that is not a resource is counted, never fatal; a service whose hook needs a draft
order is refused before Spark starts, naming why; ``population diff`` names exactly the patient
whose data changed, with both answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.ontology import default_ontology_paths
from app.population.decide import PatientDecider, ServiceRefused, comparable
from app.population.spark import population_run
from app.runtime.runner import Runner
from app.settings import Settings
from tests.support.fhir_server import FhirServer
from tests.support.opioid_examples import CASES_DIR, EXAMPLES_DIR, bare, load_examples, prepare

pytestmark = [pytest.mark.fhirserver, pytest.mark.timeout(600)]

SERVICE = "opioidcds-12-patient-view"
ROOT = Path(__file__).resolve().parents[2]


def write_export(folder: Path, resources: list[dict[str, Any]]) -> None:
    """The resources as ``$export`` writes them: one NDJSON file per type."""
    by_type: dict[str, list[str]] = defaultdict(list)
    for r in resources:
        by_type[r["resourceType"]].append(json.dumps(r))
    folder.mkdir(parents=True, exist_ok=True)
    for kind, lines in by_type.items():
        (folder / f"{kind}.ndjson").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def population(
    fhir_server: FhirServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path, list[dict[str, Any]], datetime]]:
    """The recommendation 12 examples as one export, stored on the FHIR server too, and the
    population run over it."""
    today = datetime.now(UTC).date()
    examples = [
        e for e in [*load_examples(EXAMPLES_DIR), *load_examples(CASES_DIR)] if e.service == SERVICE
    ]
    assert len(examples) >= 5
    resources: list[dict[str, Any]] = []
    for example in examples:
        prepared = prepare(example, today, tag=fhir_server.new_id()[:6] + "-")
        for r in prepared.stored:
            fhir_server.store_as_of(r)
        resources.extend(prepared.stored)
    root = tmp_path_factory.mktemp("population")
    export = root / "export"
    write_export(export, resources)
    with (export / "Observation.ndjson").open("a", encoding="utf-8") as f:
        f.write("{not json\n")  # a broken line: counted, never fatal
    at = datetime.now(UTC)
    summary = population_run(
        SERVICE, export, root / "out", ontology_paths=default_ontology_paths(), at=at
    )
    yield export, root / "out", resources, at
    assert summary["unreadableLines"] == 1


def rows(out: Path) -> dict[str, dict[str, Any]]:
    import pyarrow.parquet as pq

    table = pq.read_table(out / "decisions").to_pylist()
    return {r["patient_id"]: r for r in table}


def test_each_patient_is_decided_as_a_live_hook_call_decides_it(
    population: tuple[Path, Path, list[dict[str, Any]], datetime],
    fhir_server: FhirServer,
    pg_url: str,
) -> None:
    _export, out, resources, _at = population
    found = rows(out)
    patients = {r["id"] for r in resources if r["resourceType"] == "Patient"}
    assert set(found) == patients
    summary = json.loads((out / "summary.json").read_text())
    assert summary["patients"] == len(patients) and summary["errors"] == {}

    with TestClient(create_app(Settings(database_url=pg_url))) as client:
        for pid in sorted(patients):
            live = client.post(
                f"/cds-services/{SERVICE}",
                json={
                    "hook": "patient-view",
                    "hookInstance": str(uuid.uuid4()),
                    "fhirServer": fhir_server.base_url,
                    "context": {"patientId": pid, "userId": "Practitioner/live"},
                },
            )
            assert live.status_code == 200, live.text
            answer = live.json()
            run = answer["extension"]["dev.horismos.run"]
            row = found[pid]
            assert row["error"] is None, row
            assert (json.loads(row["decision"]) if row["decision"] else None) == run.get(
                "decision"
            ), pid
            assert row["terminal"] == run["terminal"], pid
            assert json.loads(row["cards"]) == comparable(answer["cards"]), pid
    decided = [r for r in found.values() if r["decision"] is not None]
    carded = [r for r in found.values() if json.loads(r["cards"])]
    assert decided and carded  # the comparison saw cards, not only empty answers


def test_a_service_whose_hook_needs_a_draft_order_is_refused_by_name() -> None:
    from app.deployments import load_deployments
    from app.tools.host import ToolHost

    deployments = load_deployments(default_ontology_paths(), ToolHost().packaged)
    with pytest.raises(ServiceRefused, match="order-sign, whose context needs more"):
        PatientDecider(deployments, "opioidcds-08", datetime.now(UTC), Runner())


def test_diff_names_the_patient_whose_data_changed_with_both_answers(
    population: tuple[Path, Path, list[dict[str, Any]], datetime], tmp_path: Path
) -> None:
    _export, out, resources, at = population
    found = rows(out)
    carded = sorted(pid for pid, r in found.items() if json.loads(r["cards"]))[0]
    # the same export without that patient's conditions: its card cannot stand
    kept = [
        r
        for r in resources
        if not (r["resourceType"] == "Condition" and bare(r["subject"]["reference"]) == carded)
    ]
    changed = tmp_path / "export"
    write_export(changed, kept)
    command = [str(Path(sys.executable).parent / "horismos"), "population"]
    subprocess.run(
        [*command, "run", SERVICE, "--ndjson", str(changed), "--out", str(tmp_path / "out"),
         "--at", at.isoformat()],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    same = subprocess.run(
        [*command, "diff", str(out), str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert same.returncode == 0 and json.loads(same.stdout)["changed"] == []

    differ = subprocess.run(
        [*command, "diff", str(out), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )

    assert differ.returncode == 1, differ.stderr
    [entry] = json.loads(differ.stdout)["changed"]
    assert entry["patient"] == carded
    assert (
        json.loads(entry["before"]["cards"]) and entry["after"]["cards"] != entry["before"]["cards"]
    )


def _client_key(tmp_path: Path) -> Path:
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-384", parameters={"kid": "population-test"})
    path = tmp_path / "client.jwk.json"
    path.write_text(json.dumps(key.as_dict(private=True)))
    return path


def test_export_from_the_fhir_server_then_run_then_diff_end_to_end(
    population: tuple[Path, Path, list[dict[str, Any]], datetime],
    fhir_server: FhirServer,
    tmp_path: Path,
) -> None:
    """Bulk Data $export (Group level, SMART Backend Services token, async polling) from the
    project's FHIR server writes the folder a population run reads; run on it, the population
    answers as the run on the same records written directly did."""
    _export, out, resources, at = population
    patients = sorted({r["id"] for r in resources if r["resourceType"] == "Patient"})
    group = fhir_server.create(
        {
            "resourceType": "Group",
            "type": "person",
            "actual": True,
            "member": [{"entity": {"reference": f"Patient/{pid}"}} for pid in patients],
        }
    )
    exported = tmp_path / "exported"
    horismos = [str(Path(sys.executable).parent / "horismos"), "population"]
    base = fhir_server.base_url
    export = subprocess.run(
        [*horismos, "export", base, "--out", str(exported), "--group", group["id"],
         "--client-id", "population-test", "--key", str(_client_key(tmp_path)),
         "--token-url", f"{base}/auth/token"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert export.returncode == 0, export.stderr
    lines = [
        json.loads(line)
        for path in exported.glob("*.ndjson")
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert sorted((r["resourceType"], r["id"]) for r in lines) == sorted(
        (r["resourceType"], r["id"]) for r in resources
    )

    subprocess.run(
        [*horismos, "run", SERVICE, "--ndjson", str(exported), "--out", str(tmp_path / "out"),
         "--at", at.isoformat()],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    same = subprocess.run(
        [*horismos, "diff", str(out), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert same.returncode == 0, same.stdout + same.stderr


def test_an_export_resumes_and_is_refused_without_a_token(
    population: tuple[Path, Path, list[dict[str, Any]], datetime],
    fhir_server: FhirServer,
    tmp_path: Path,
) -> None:
    from app.population.export import BackendClient, ExportFailed, bulk_export

    _export, _out, resources, _at = population
    pid = next(r["id"] for r in resources if r["resourceType"] == "Patient")
    group = fhir_server.create(
        {"resourceType": "Group", "type": "person", "actual": True,
         "member": [{"entity": {"reference": f"Patient/{pid}"}}]}
    )  # fmt: skip
    base = fhir_server.base_url
    with pytest.raises(ExportFailed, match="401"):
        bulk_export(base, tmp_path / "no-token", group=group["id"], sleep=lambda _s: None)

    client = BackendClient(
        client_id="population-test",
        key=json.loads(_client_key(tmp_path).read_text()),
        token_url=f"{base}/auth/token",
    )
    waits: list[float] = []
    first = bulk_export(
        base, tmp_path / "out", group=group["id"], client=client, sleep=waits.append
    )
    assert waits == [1.0]  # the server's Retry-After, once: the first poll is still building
    mark = fhir_server.mark()
    again = bulk_export(
        base, tmp_path / "out", group=group["id"], client=client, sleep=waits.append
    )
    assert again == first
    asked = [r["url"] for r in fhir_server.requests(since=mark)]
    assert not [u for u in asked if "$export?" in u or u.endswith("$export")], asked
    assert not [u for u in asked if "$export-file" in u], asked  # every file was there already


def test_change_impact_lists_the_patients_whose_cards_the_change_would_change(
    population: tuple[Path, Path, list[dict[str, Any]], datetime],
    pg_url: str,
    tmp_path: Path,
) -> None:
    """A proposed change to recommendation 12's card, run on the whole export before approval:
    exactly the patients who get the card are listed, each with both answers and proofs; the
    others are the same under both versions."""
    import shutil

    export, out, _resources, at = population
    folder = tmp_path / "opioid-cds"
    folder.mkdir()
    for name in ("rec12-patient-view.ttl", "common.ttl"):
        shutil.copy(ROOT / "ontologies/opioid-cds" / name, folder / name)
    shutil.copytree(ROOT / "ontologies/opioid-cds/valuesets", folder / "valuesets")
    paths = [folder / "rec12-patient-view.ttl", folder / "common.ttl"]
    text = paths[0].read_text()
    old = "none ordered in the past 90 days"
    assert old in text
    changed = text.replace(old, "no MOUD order in 90 days").replace(
        'owl:versionInfo "1.0.0"', 'owl:versionInfo "1.1.0"'
    )
    settings = Settings(database_url=pg_url, ontology_paths=paths)
    with TestClient(create_app(settings)) as client:
        [rec12] = [
            d for d in client.get("/deployments").json()["deployments"] if SERVICE in d["services"]
        ]
        proposed = client.post(
            "/changes",
            json={
                "deployment": rec12["id"],
                "baseDigest": rec12["digest"],
                "files": [{"path": "rec12-patient-view.ttl", "content": changed}],
                "author": "a.author",
                "rationale": "A shorter summary.",
            },
        )
        assert proposed.status_code in (200, 201), proposed.text
        change_id = proposed.json()["id"]

    env = {
        **__import__("os").environ,
        "HORISMOS_DATABASE_URL": pg_url,
        "HORISMOS_ONTOLOGY_PATHS": json.dumps([str(p) for p in paths]),
    }
    horismos = str(Path(sys.executable).parent / "horismos")
    impact = subprocess.run(
        [horismos, "change", "impact", change_id, "--ndjson", str(export),
         "--out", str(tmp_path / "impact"), "--at", at.isoformat()],
        capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip

    assert impact.returncode == 1, impact.stderr
    report = json.loads(impact.stdout)
    assert (report["activeVersion"], report["candidateVersion"]) == ("1.0.0", "1.1.0")
    found = rows(out)
    carded = sorted(pid for pid, r in found.items() if json.loads(r["cards"]))
    listed = report["services"][SERVICE]["changed"]
    assert sorted(c["patient"] for c in listed) == carded
    for entry in listed:
        assert old in entry["before"]["cards"] and "no MOUD order" in entry["after"]["cards"]
        assert entry["before"]["proof"] and entry["after"]["proof"]
    assert report["services"][SERVICE]["compared"] == len(found)
    # the change's page shows it beside the stored-run replay, before anyone approves
    with TestClient(create_app(settings)) as client:
        page = client.get(f"/changes/{change_id}", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert "Impact on a population" in page.text
    assert all(pid in page.text for pid in carded)
    shot(page.text, tmp_path)


def shot(html: str, tmp_path: Path) -> None:
    """The change page as a reviewer sees it, in Chromium: the impact section is on screen
    (kept under test-artifacts/; ``WRITE_DOCS_PICTURES=1`` also writes the picture
    docs/population.md shows)."""
    import os

    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.set_content(html)
            section = page.locator("h2", has_text="Impact on a population")
            assert section.is_visible()
            section.scroll_into_view_if_needed()
            artifacts = ROOT / "test-artifacts" / "population"
            artifacts.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(artifacts / "change-impact.png"), full_page=True)
            if os.environ.get("WRITE_DOCS_PICTURES") == "1":
                page.screenshot(
                    path=str(ROOT / "docs" / "images" / "change-impact.png"), full_page=True
                )
        finally:
            browser.close()


def test_two_answers_differ_by_the_pages_their_cards_link_not_by_their_records() -> None:
    def card(run: str, *pages: str) -> dict[str, Any]:
        links = [{"label": "Decision record: proof and trace", "url": f"https://h/runs/{run}"}]
        links += [{"label": "Guide", "url": page, "type": "absolute"} for page in pages]
        return {"uuid": run, "summary": "s", "indicator": "info", "links": links}

    assert comparable([card("a")]) == comparable([card("b")])
    assert comparable([card("a", "https://g/1")]) == comparable([card("b", "https://g/1")])
    assert comparable([card("a", "https://g/1")]) != comparable([card("b", "https://g/2")])

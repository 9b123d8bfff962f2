"""``horismos reconcile`` settles an effect whose answer was lost, once the server is back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from adapters.fhir.commit import CommitContext, CommitFailed, FhirCommitAdapter, SourceRef
from app.store.effects import effect_reports
from app.tools.call import ToolCall
from tests.commit.dropping_proxy import dropping_proxy
from tests.commit.test_commit_adapter import GRANTED, NS, ONTOLOGY, PRIORITY, TOOL, URGENT
from tests.support.fhir_server import FhirServer
from tests.support.runs import claimed_run

pytestmark = pytest.mark.fhirserver

HORISMOS = str(Path(sys.executable).with_name("horismos"))


def _reconcile(url: str) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run(
        [HORISMOS, "reconcile", "--url", url, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stderr == ""
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def test_lost_answer_is_unknown_until_the_server_is_back_and_reconcile_runs(
    fhir_server: FhirServer, pg_url: str, pg_engine: Engine
) -> None:
    encounter = fhir_server.create(
        {"resourceType": "Encounter", "id": fhir_server.new_id(), "status": "in-progress"}
    )
    run_id = claimed_run(pg_engine, NS + "Flow")
    origin = fhir_server.base_url.removesuffix("/fhir")

    with dropping_proxy(origin) as (proxy, forwarded):
        port = int(proxy.rsplit(":", 1)[1])
        context = CommitContext(
            fhir_server=proxy + "/fhir",
            scope=GRANTED,
            sources=(
                SourceRef(
                    resource_type="Encounter",
                    id=encounter["id"],
                    version_id=encounter["meta"]["versionId"],
                ),
            ),
        )
        adapter = FhirCommitAdapter(ontology=ONTOLOGY, engine=pg_engine, context=context)
        with pytest.raises(CommitFailed):
            adapter(ToolCall(tool=TOOL, args={"level": URGENT}, timeout=2.0, run_id=run_id))
        assert len(forwarded) == 1

    # The server (behind the same address) is gone: nothing can be settled yet.
    code, lines = _reconcile(pg_url)
    assert code == 1
    assert [(e["before"], e["after"]) for e in lines] == [("unknown", "unknown")]

    with dropping_proxy(origin, drop_writes=False, port=port):
        code, lines = _reconcile(pg_url)

    assert code == 0
    assert [(e["before"], e["after"]) for e in lines] == [("unknown", "accepted")]
    [effect] = effect_reports(pg_engine, run_id)
    current = fhir_server.read("Encounter", encounter["id"])
    assert effect["state"] == "accepted"
    assert effect["newVersion"] == current["meta"]["versionId"]
    assert current["priority"]["coding"][0] == {"system": PRIORITY, "code": "UR"}

"""docs/first-service.md is a test: its scaffold, verify and serve commands run as written (the
server on a free loopback port), its request is posted and the answer holds the card it shows.
And ``horismos new`` writes a sound deployment for every registry hook, never over a file."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.deployments.scaffold import ScaffoldRefused, scaffold
from app.ontology import load_ontology, verify
from app.ontology.hooks import HOOKS
from tests.support.live_server import free_port

ROOT = Path(__file__).resolve().parents[2]
WALKTHROUGH = ROOT / "docs" / "first-service.md"
HORISMOS = ".venv/bin/horismos"


def _blocks(language: str) -> list[str]:
    text = WALKTHROUGH.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def _command(start: str) -> str:
    """The one documented shell line that starts with ``start``."""
    (line,) = [
        line
        for block in _blocks("sh")
        for line in block.splitlines()
        if line.startswith(start) or line.startswith(f"{HORISMOS} {start}")
    ]
    return line


def _horismos(words: list[str]) -> list[str]:
    """A documented ``.venv/bin/horismos …`` line as this interpreter runs it."""
    assert words[0] == HORISMOS, words
    return [sys.executable, "-c", "from app.cli import main; main()", *words[1:]]


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    return {**env, **extra}


def _contains(actual: Any, expected: Any) -> bool:
    """Whether ``actual`` holds everything ``expected`` shows (lists item by item)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _contains(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_contains(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return bool(actual == expected)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The walkthrough's steps 2 to 5 in an empty folder: the served base URL and the folder."""
    new = shlex.split(_command("new"))
    made = subprocess.run(
        _horismos(new),
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[0] == (
        "wrote bp-check.ttl: the CDS service bp-check on patient-view"
    )
    checked = subprocess.run(
        _horismos(shlex.split(_command("verify"))),
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("ok: 1 file(s)")

    assignment, *serve = shlex.split(_command("HORISMOS_ONTOLOGY_PATHS="))
    name, value = assignment.split("=", 1)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*_horismos(serve), "--port", str(port)],
            cwd=tmp_path,
            env=_environment(**{name: value}),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        with httpx.Client(timeout=2.0) as client:
            while process.poll() is None and time.monotonic() < deadline:
                try:
                    if client.get(base + "/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                try:
                    process.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    continue
        assert process.poll() is None, log.read_text()
        yield base, tmp_path
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_the_walkthrough_serves_the_documented_card(served: tuple[str, Path]) -> None:
    base, _ = served
    request_text, expected_text = _blocks("json")
    request, expected = json.loads(request_text), json.loads(expected_text)
    curl = shlex.split(_command("curl"))
    path = "/" + next(w for w in curl if w.startswith("localhost:")).split("/", 1)[1]

    with httpx.Client(base_url=base, timeout=30.0) as client:
        assert [s["id"] for s in client.get("/cds-services").json()["services"]] == ["bp-check"]
        answer = client.post(path, json=request)
        assert answer.status_code == 200, answer.text
        assert _contains(answer.json(), expected), json.dumps(answer.json(), indent=1)

        # the page's last step: no reading is said, not guessed around
        request["hookInstance"] = "0b6b1b5e-4c1e-4f4e-9a57-2f0e6c1f7d11"
        request["prefetch"]["systolic"]["entry"] = []
        empty = client.post(path, json=request).json()
    assert [(c["indicator"], c["summary"]) for c in empty["cards"]] == [
        ("warning", "No systolic blood pressure reading to check")
    ]


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_a_scaffold_verifies_for_every_registry_hook(hook: str, tmp_path: Path) -> None:
    written = scaffold("first", hook, output=tmp_path / "first.ttl", custom_hook=False, iri=None)
    ontology = load_ontology([written])
    assert [str(p) for p in verify(ontology)] == []
    assert [(s.id, s.hook) for s in ontology.services.values()] == [("first", hook)]


def test_a_hook_outside_the_registry_needs_declaring(tmp_path: Path) -> None:
    target = tmp_path / "mine.ttl"
    with pytest.raises(ScaffoldRefused, match="--custom-hook"):
        scaffold("mine", "chart-open", output=target, custom_hook=False, iri=None)
    assert not target.exists()
    scaffold("mine", "chart-open", output=target, custom_hook=True, iri=None)
    assert [str(p) for p in verify(load_ontology([target]))] == []
    with pytest.raises(ScaffoldRefused, match="registry hook"):
        scaffold("mine", "patient-view", output=tmp_path / "b.ttl", custom_hook=True, iri=None)


def test_a_scaffold_never_overwrites_a_file(tmp_path: Path) -> None:
    target = tmp_path / "bp-check.ttl"
    target.write_text("# my own work\n")
    with pytest.raises(ScaffoldRefused, match="exists"):
        scaffold("bp-check", "patient-view", output=target, custom_hook=False, iri=None)
    assert target.read_text() == "# my own work\n"


@pytest.mark.parametrize("service_id", ["Bp Check", "../etc", "", "bp_check"])
def test_a_service_id_must_be_a_url_segment(service_id: str, tmp_path: Path) -> None:
    with pytest.raises(ScaffoldRefused, match="service id"):
        scaffold(service_id, "patient-view", output=tmp_path / "x.ttl", custom_hook=False, iri=None)

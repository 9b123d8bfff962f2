"""The container files, checked without a Docker engine: the compose file against the Compose
Specification schema, the Dockerfile against the tree it copies and the routes it probes."""

from __future__ import annotations

import json
import re
import shlex
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "foundation"
#: Where an installed wheel looks for the terminology (app/resources.py, python:3.11-slim's
#: prefix /usr/local).
INSTALLED_TERMINOLOGY = "/usr/local/share/horismos/terminology/packages"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a line continuation"
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1]) for text in logical]


def _compose() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(document, dict)
    return document


def _dockerignored(relative: str) -> bool:
    patterns = [
        p.strip()
        for p in (ROOT / ".dockerignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    return any(
        fnmatch(relative, pattern) or fnmatch(relative, pattern.removeprefix("**/"))
        for pattern in patterns
    )


def test_compose_file_follows_the_compose_specification() -> None:
    schema = json.loads((DATA / "compose-spec.json").read_text())
    validator = jsonschema.Draft201909Validator(schema)
    errors = [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(_compose())
    ]
    assert errors == []


def test_compose_runs_the_service_on_a_healthy_postgres_16() -> None:
    compose = _compose()
    service, db = compose["services"]["horismos"], compose["services"]["db"]
    assert db["image"] == "postgres:16"
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert service["depends_on"]["db"]["condition"] == "service_healthy"
    volume = db["volumes"][0].split(":")[0]
    assert volume in compose["volumes"], "the database volume must be a named volume"
    url = service["environment"]["HORISMOS_DATABASE_URL"]
    env = db["environment"]
    assert url == (
        f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@db:5432/{env['POSTGRES_DB']}"
    )
    assert service["build"] == "."


def _stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's build stages, each a list of instructions starting with its FROM."""
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        assert stages, "the Dockerfile must start with FROM"
        stages[-1].append(instruction)
    return stages


def test_every_dockerfile_copy_source_exists_in_the_build_context() -> None:
    sources: list[str] = []
    heads = [stage[0][1].split() for stage in _stages()]
    stage_names = [words[-1] for words in heads if len(words) == 3 and words[1].upper() == "AS"]
    for instruction, args in _instructions():
        if instruction in {"COPY", "ADD"}:
            words = shlex.split(args)
            source_stage = [w.split("=", 1)[1] for w in words if w.startswith("--from=")]
            if source_stage:  # copied from an earlier stage, not from the build context
                assert source_stage[0] in stage_names, f"COPY from unknown stage {source_stage}"
                continue
            sources.extend(w for w in words[:-1] if not w.startswith("--"))
    assert sources, "the Dockerfile copies nothing"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY source {source} does not exist"
        assert not _dockerignored(source.rstrip("/")), f"{source} is excluded by .dockerignore"


def test_dockerfile_runs_as_non_root_and_migrates_before_serving() -> None:
    instructions = _instructions()
    for stage in _stages():
        image, *name = stage[0][1].split()
        if name[-1:] == ["terminology"]:  # fetches the terminology package; only files leave it
            assert re.fullmatch(r"node:\d+-slim", image), stage[0]
        else:
            assert image == "python:3.11-slim", stage[0]
    assert _stages()[-1][0][1] == "python:3.11-slim"
    users = [args for name, args in instructions if name == "USER"]
    assert users and users[-1] not in {"root", "0"}
    (entrypoint,) = [args for name, args in instructions if name == "ENTRYPOINT"]
    command = " ".join(json.loads(entrypoint))
    assert re.search(r"horismos db upgrade && exec horismos serve --host 0\.0\.0\.0", command)


def test_healthcheck_probes_a_real_route_on_the_served_port() -> None:
    instructions = _instructions()
    (healthcheck,) = [args for name, args in instructions if name == "HEALTHCHECK"]
    match = re.search(r"http://127\.0\.0\.1:(\d+)(/[\w/-]*)", healthcheck)
    assert match, healthcheck
    port, path = match.groups()
    assert path in create_app(Settings()).openapi()["paths"]
    (entrypoint,) = [args for name, args in instructions if name == "ENTRYPOINT"]
    assert f"--port {port}" in entrypoint
    assert ("EXPOSE", port) in instructions


def test_the_image_installs_the_runtime_lock_and_a_built_wheel_not_the_tree() -> None:
    *_, final = _stages()
    runs = [args for name, args in final if name == "RUN"]
    parts = [part.strip() for run in runs for part in run.split("&&")]
    pip_installs = [part for part in parts if "pip install" in part]
    locked = [cmd for cmd in pip_installs if "-r" in shlex.split(cmd)]
    assert locked and all("--require-hashes" in cmd for cmd in locked), pip_installs
    copied = " ".join(args for name, args in final if name == "COPY")
    assert "requirements/runtime.txt" in copied
    assert "requirements/dev.txt" not in " ".join(a for _, a in _instructions())
    for cmd in pip_installs:
        words = shlex.split(cmd)
        assert "-e" not in words and "--editable" not in words, f"editable install: {cmd}"
        assert "--no-deps" in words, f"{cmd} would resolve dependencies outside the lock"
    assert any(cmd.endswith(".whl") for cmd in pip_installs), "the image installs no wheel"
    assert any("pip check" in run for run in runs), "the image never checks its requirements"


def test_the_image_carries_the_checked_terminology_package_where_the_service_reads_it() -> None:
    stages = {stage[0][1].split()[-1]: stage for stage in _stages()[:-1]}
    fetch = " ".join(args for name, args in stages["terminology"] if name == "RUN")
    assert "scripts/install-terminology /terminology/packages" in fetch
    *_, final = _stages()
    copies = [shlex.split(args) for name, args in final if name == "COPY"]
    assert ["--from=terminology", "/terminology/packages", INSTALLED_TERMINOLOGY] in copies
    runs = [args for name, args in final if name == "RUN"]
    assert "python -m app.terminology build" in runs  # indexed at its default place
    (entrypoint,) = [args for name, args in final if name == "ENTRYPOINT"]
    assert "install-terminology" not in entrypoint and "npm" not in entrypoint

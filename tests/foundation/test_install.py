"""Reproducible installs: the lock files agree with pyproject.toml, `make serve` installs the
runtime lock only, and the wheel an image installs carries the ontologies and migrations."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "requirements"
DEV_TOOLS = {"pytest", "ruff", "mypy", "schemathesis", "hypothesis", "playwright", "uv"}


def _pins(lock: Path) -> dict[str, str]:
    """name → version of every requirement of ``lock`` whose marker holds on this interpreter."""
    environment = default_environment()
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        if not line or line[0] in " #-":
            continue
        requirement = Requirement(line.removesuffix("\\").strip())
        if requirement.marker is None or requirement.marker.evaluate(environment):
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"{lock.name}: {line} is not an exact pin"
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def _project() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {"runtime": project["dependencies"], "dev": project["optional-dependencies"]["dev"]}


@pytest.mark.parametrize(("group", "lock"), [("runtime", "runtime.txt"), ("dev", "dev.txt")])
def test_every_declared_dependency_is_pinned_within_its_range(group: str, lock: str) -> None:
    pins = _pins(LOCKS / lock)
    declared = _project()["runtime"] + (_project()["dev"] if group == "dev" else [])
    unlocked = []
    for text in declared:
        requirement = Requirement(text)
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is None or not requirement.specifier.contains(pinned, prereleases=True):
            unlocked.append(f"{text} (locked: {pinned})")
    assert unlocked == [], "pyproject.toml changed without `make lock`"


def test_the_runtime_lock_holds_no_dev_tool_and_agrees_with_the_dev_lock() -> None:
    runtime, dev = _pins(LOCKS / "runtime.txt"), _pins(LOCKS / "dev.txt")
    assert DEV_TOOLS.isdisjoint(runtime)
    assert set(dev) >= DEV_TOOLS
    assert {name: dev.get(name) for name in runtime} == runtime


def test_every_lock_pins_hashes() -> None:
    for lock in sorted(LOCKS.glob("*.txt")):
        entries = re.split(r"\n(?=[a-z0-9])", lock.read_text().split("\n", 2)[2].strip())
        assert entries, lock
        for entry in entries:
            assert "--hash=sha256:" in entry, f"{lock.name}: {entry.splitlines()[0]} has no hash"


def _make_dry_run(target: str) -> str:
    """The commands ``make -B TARGET`` would run from a fresh clone, without running them."""
    return subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def test_make_serve_installs_the_runtime_lock_only() -> None:
    commands = _make_dry_run("serve")
    assert "--require-hashes --no-deps -r requirements/runtime.txt" in commands
    assert "dev.txt" not in commands and "[dev]" not in commands
    assert "npm" not in commands and "chromium" not in commands


def test_make_deps_installs_the_dev_lock() -> None:
    commands = _make_dry_run("deps")
    assert "--require-hashes --no-deps -r requirements/dev.txt" in commands
    assert "npm ci" in commands


@pytest.mark.parametrize("target", ["serve", "deps"])
def test_serving_and_testing_both_install_and_index_the_terminology_package(target: str) -> None:
    commands = _make_dry_run(target).splitlines()
    install = commands.index("scripts/install-terminology terminology/packages")
    assert commands[install + 1].endswith("python -m app.terminology build terminology/packages")
    if target == "serve":
        assert install < commands.index(".venv/bin/horismos db upgrade")


def test_the_wheel_carries_the_bundled_ontologies_and_migrations(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("horismos-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = next(n.split("/", 1)[0] for n in names if ".data/" in n) + "/data/share/horismos"
    expected = [f"ontologies/{p.name}" for p in (ROOT / "ontologies").glob("*.ttl")]
    templates = (ROOT / "ontologies" / "templates").glob("*.template")
    expected += [f"ontologies/templates/{p.name}" for p in templates]
    # med-safety's drug product value sets, which its classes name
    expected += [
        f"ontologies/valuesets/{p.name}" for p in (ROOT / "ontologies/valuesets").glob("*.json")
    ]
    versions = (ROOT / "migrations" / "versions").glob("*.py")
    expected += [f"migrations/versions/{p.name}" for p in versions]
    expected += ["migrations/env.py", "migrations/script.py.mako"]
    assert sorted(f"{data}/{name}" for name in expected if f"{data}/{name}" not in names) == []
    assert {"app/main.py", "app/fhir/hydrate.py", "adapters/fhir/client.py"} <= names
    # the pages' templates and style, which the service reads at run time
    pages = sorted(p.name for p in (ROOT / "app/api/templates").iterdir() if p.is_file())
    assert [n for n in pages if f"app/api/templates/{n}" not in names] == []

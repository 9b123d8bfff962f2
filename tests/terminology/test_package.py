"""The installed package: which one it is, the index the install step wrote, and what a
service without it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from app.terminology import (
    Terminology,
    TerminologyNotInstalled,
    default_packages_dir,
    load_terminology,
    package_dirs,
)
from app.terminology._build import INDEX_FILE, build_index

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "install-terminology"


def test_the_terminology_names_the_package_it_came_from(terminology: Terminology) -> None:
    (package,) = terminology.packages
    assert (package.name, package.version) == ("hl7.terminology.r4", "7.0.1")
    assert package.label == "hl7.terminology.r4#7.0.1"
    assert terminology.counts["CodeSystem"] == 897
    assert terminology.counts["NamingSystem"] == 660


def test_the_written_index_is_what_the_package_gives() -> None:
    folder = default_packages_dir()
    written = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(build_index(package_dirs(folder))))


def test_without_the_written_index_the_package_itself_is_read(tmp_path: Path) -> None:
    (package,) = package_dirs(default_packages_dir())
    (tmp_path / package.parent.name).symlink_to(package.parent)
    from_package = load_terminology(tmp_path)
    assert from_package.canonical_system("http://hl7.org/fhir/v2/0078") == (
        "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation"
    )
    assert from_package.subsumes("http://hl7.org/fhir/condition-clinical", "active", "relapse")


def test_a_folder_without_the_package_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(TerminologyNotInstalled) as raised:
        load_terminology(tmp_path)
    message = str(raised.value)
    assert "\n" not in message
    assert str(tmp_path) in message and "make terminology" in message


def test_serve_without_the_package_stops_at_start_with_the_install_command(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    env["HORISMOS_TERMINOLOGY_PACKAGES"] = str(tmp_path)
    env["HORISMOS_DATABASE_URL"] = f"sqlite:///{tmp_path / 'never.db'}"
    env["PYTHONPATH"] = str(ROOT)  # this tree's horismos, whatever the interpreter has installed
    result = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "serve", "--port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("horismos serve: no HL7 terminology package is installed in ")
    assert line.endswith("run make terminology (scripts/install-terminology)")
    assert not (tmp_path / "never.db").exists()  # stopped before migrating


def _fake_npm(bin_dir: Path, tarball: Path) -> None:
    """An ``npm`` whose ``pack`` hands over ``tarball``: the registry, faked at the PATH seam."""
    npm = bin_dir / "npm"
    npm.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "--pack-destination" ]; do shift; done\n'
        f'cp "{tarball}" "$2/hl7.terminology.r4-7.0.1.tgz"\n'
    )
    npm.chmod(0o755)


def test_the_install_refuses_a_tarball_of_another_integrity(tmp_path: Path) -> None:
    content = tmp_path / "package"
    content.mkdir()
    (content / "package.json").write_text('{"name": "hl7.terminology.r4", "version": "7.0.1"}')
    tarball = tmp_path / "forged.tgz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(content, arcname="package")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_npm(bin_dir, tarball)
    dest = tmp_path / "packages"
    result = subprocess.run(
        [str(INSTALL), str(dest)],
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "expected sha512-UamZUcARk" in result.stderr and "not installed" in result.stderr
    assert package_dirs(dest) == []

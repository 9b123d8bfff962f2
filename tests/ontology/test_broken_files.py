"""Every load-error kind and every verification error class, one small broken file each.

Each ``tests/data/ontology/{load,verify}_*.ttl`` file says in its header what must be reported:
``# expect: CODE NODE PATH`` lines (NODE a local name, PATH ``-`` when the problem is on the named
node itself) and one ``# says:`` fragment the output must contain. The set of reported
(code, node, path) must equal the expected set: a typo is reported, and reported once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from app.ontology import OntologyError, Problem, load_ontology, verify
from app.ontology.errors import ProblemCode
from app.ontology.model import local_name
from tests.ontology.conftest import DATA, REGISTRY

Expected = set[tuple[str, str, str | None]]


def _expectations(path: Path) -> tuple[Expected, str]:
    text = path.read_text(encoding="utf-8")
    expected: Expected = set()
    for code, node, where in re.findall(r"^# expect: (\S+) (\S+) (.+)$", text, re.M):
        expected.add((code, node, None if where == "-" else where))
    (says,) = re.findall(r"^# says: (.+)$", text, re.M)
    return expected, says


def _reported(problems: list[Problem]) -> Expected:
    return {(p.code, local_name(p.node), p.path) for p in problems}


# A file whose problem is in what sits beside it (a valuesets folder) has a folder of its own.
LOAD_FILES = sorted(DATA.glob("load_*.ttl")) + sorted(DATA.glob("*/load_*.ttl"))
VERIFY_FILES = sorted(DATA.glob("verify_*.ttl"))
VERIFY_BROKEN = [p for p in VERIFY_FILES if p.name != "verify_sound.ttl"]


def test_there_is_a_broken_file_for_every_problem_code() -> None:
    codes = {code for p in LOAD_FILES + VERIFY_BROKEN for code, _, _ in _expectations(p)[0]}
    codes.add("syntax")
    # An unresolved edge cannot be written in Turtle (it is a load error, dangling-reference);
    # test_verify.py builds one in memory.
    assert codes == set(get_args(ProblemCode)) - {"unresolved-edge"}


@pytest.mark.parametrize("path", LOAD_FILES, ids=lambda p: p.stem)
def test_load_errors_name_the_node(path: Path) -> None:
    expected, says = _expectations(path)
    with pytest.raises(OntologyError) as err:
        load_ontology([path], registry=REGISTRY)
    problems = err.value.problems
    if path.stem == "load_syntax":
        assert [(p.code, Path(p.node).name) for p in problems] == [("syntax", path.name)]
    else:
        assert _reported(problems) == expected
    assert says in str(err.value)


def test_the_sound_base_of_the_verify_files_verifies() -> None:
    assert verify(load_ontology([DATA / "verify_sound.ttl"])) == []


@pytest.mark.parametrize("path", VERIFY_BROKEN, ids=lambda p: p.stem)
def test_verification_errors_name_the_node_and_what_to_add(path: Path) -> None:
    expected, says = _expectations(path)
    problems = verify(load_ontology([path], registry=REGISTRY))
    assert _reported(problems) == expected
    assert any(says in str(p) for p in problems), [str(p) for p in problems]

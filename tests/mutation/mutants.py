"""Silent-failure mutants of every bundled deployment.

Each operator finds the sites it applies to in a deployment's Turtle (a predicate and its
string literal: ``horis:unit "mm[Hg]"``) and makes the one-token mistake a person makes there:
a unit that is not UCUM, a typo in a FHIRPath element, a prefetch token the hook does not have,
a misspelt hook, a code system that is relative or a near miss of the canonical URI, … Each of
these once loaded, verified and answered 200 with no card, every call. The deployments are
whatever ``ontologies/*.ttl`` and ``ontologies/*/*.ttl`` hold (``default_ontology_paths``), so
a new deployment is mutated as soon as it lands; a mistake in a file others import (a common
file) is checked in every deployment that imports it, and must be refused by those it reaches.
An operator is applied at every site it finds, up to ``PER_SITE`` sites per file, so the mutants
stay few enough to run in the suite.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from app.ontology import default_ontology_paths
from app.ontology.deployments import DeploymentSource, find_deployments
from app.ontology.loader import vocabulary_path
from app.ucum import is_ucum

#: At most this many sites per operator and deployment (the first ones in the file).
PER_SITE = 2

_LITERAL = r'"((?:[^"\\]|\\.)*)"'
_SUBJECT = re.compile(r"^(:[\w.\-]+|<[^>\s]+>)\s", re.M)
_PREFIX = re.compile(r"^@prefix\s+:\s+<([^>]+)>", re.M)


@dataclass(frozen=True, kw_only=True)
class Mutant:
    """One deployment with one mistake in it."""

    deployment: Path
    operator: str
    before: str  # the literal as written
    after: str  # the literal as mutated
    owner: str  # IRI of the named node the mistake is under
    text: str  # the whole mutated Turtle

    @property
    def id(self) -> str:
        return f"{self.deployment.stem}:{self.operator}:{self.before}->{self.after}"


Mutate = Callable[[str], str | None]


@dataclass(frozen=True, kw_only=True)
class Operator:
    """A mistake: where it is made (a predicate's literal) and what it does to the literal."""

    name: str
    predicate: str  # horis:unit
    mutate: Mutate  # None: not applicable at this site
    about: str
    sites: int = PER_SITE  # how many sites per deployment it is applied at


def _typo(word: str) -> str:
    """Drop the second-to-last letter: ``valueQuantity`` → ``valueQuantiy``."""
    return word[:-2] + word[-1] if len(word) > 3 else word + word[-1]


def _unit(unit: str) -> str | None:
    for wrong in (unit.replace("[", "").replace("]", ""), unit.swapcase(), unit + "_"):
        if wrong != unit and not is_ucum(wrong):
            return wrong
    return None


def _first_element(path: str) -> str | None:
    """A typo in the first element name of a FHIRPath expression."""
    found = re.search(r"(?<![\w'%.$])([a-z][A-Za-z]{2,})(?![\w(])", path)
    if found is None:
        return None
    return path[: found.start()] + _typo(found.group(1)) + path[found.end() :]


def _token(query: str) -> str | None:
    """``{{context.patientId}}`` → ``{{context.patient}}`` (or a plural for another name)."""
    found = re.search(r"\{\{\s*context\.(\w+)\s*\}\}", query)
    if found is None:
        return None
    name = found.group(1)
    wrong = name[:-2] if name.endswith("Id") else name + "s"
    return query[: found.start(1)] + wrong + query[found.end(1) :]


def _swap_last_letters(hook: str) -> str:
    """``patient-view`` → ``patient-veiw``."""
    return hook[:-3] + hook[-2] + hook[-3] + hook[-1] if len(hook) > 3 else hook[::-1]


def _relative_system(coding: str) -> str | None:
    system, bar, code = coding.partition("|")
    found = re.match(r"^[a-z]+://(.+)$", system)
    return f"{found.group(1)}{bar}{code}" if found and bar else None


def _https_system(coding: str) -> str | None:
    system, bar, code = coding.partition("|")
    if not system.startswith("http://"):
        return None
    return f"https://{system.removeprefix('http://')}{bar}{code}"


def _query_type(query: str) -> str | None:
    found = re.match(r"^([A-Z][A-Za-z]+)", query)
    return _typo(found.group(1)) + query[found.end() :] if found else None


OPERATORS: tuple[Operator, ...] = (
    Operator(
        name="unit-not-ucum",
        predicate="horis:unit",
        mutate=_unit,
        about="a property unit that is not UCUM (mmHg for mm[Hg])",
        sites=99,  # every unit: each is its own spelling
    ),
    Operator(
        name="fhirpath-typo",
        predicate="horis:fhirPath",
        mutate=_first_element,
        about="a misspelt element in a FHIRPath (valueQuantiy)",
    ),
    Operator(
        name="where-typo",
        predicate="horis:where",
        mutate=_first_element,
        about="a horis:where that never matches: a misspelt element",
    ),
    Operator(
        name="prefetch-token",
        predicate="horis:query",
        mutate=_token,
        about="a prefetch token the hook does not give ({{context.patient}})",
    ),
    Operator(
        name="prefetch-type",
        predicate="horis:query",
        mutate=_query_type,
        about="a prefetch template reading a misspelt resource type",
    ),
    Operator(
        name="hook-typo",
        predicate="horis:hook",
        mutate=_swap_last_letters,
        about="a misspelt hook (patient-veiw)",
    ),
    Operator(
        name="coding-relative",
        predicate="horis:coding",
        mutate=_relative_system,
        about="a coding whose system is not an absolute URI (loinc.org)",
    ),
    Operator(
        name="coding-wrong-uri",
        predicate="horis:coding",
        mutate=_https_system,
        about="a coding under a near miss of the canonical system URI (https://loinc.org)",
    ),
    Operator(
        name="code-relative",
        predicate="horis:code",
        mutate=_relative_system,
        about="a class code whose system is not an absolute URI",
    ),
    Operator(
        name="mapping-type",
        predicate="horis:resourceType",
        mutate=_typo,
        about="a mapping, text source or commit naming a misspelt resource type",
    ),
    Operator(
        name="context-key",
        predicate="horis:fromContext",
        mutate=lambda key: key[:-1] if key.endswith("s") else key + "s",
        about="a mapping reading a hook context key the hook does not have",
    ),
    Operator(
        name="commit-element",
        predicate="horis:element",
        mutate=_typo,
        about="a commit writing a misspelt element",
    ),
    Operator(
        name="commit-system",
        predicate="horis:codeSystem",
        mutate=lambda system: system.split("://", 1)[1] if "://" in system else None,
        about="a commit whose code system is not an absolute URI",
    ),
)


def _other_dimension(unit: str) -> str | None:
    """A valid UCUM unit readings in ``unit`` cannot be converted to (``/min`` → ``kg``)."""
    from app.ucum import convertible

    return next(
        (u for u in ("kg", "m", "mol/L") if is_ucum(unit) and not convertible(unit, u)), None
    )


def _other_code(coding: str) -> str | None:
    """A code no data carries: ``http://loinc.org|8867-4`` → ``http://loinc.org|8867-40``."""
    system, bar, code = coding.partition("|")
    return f"{system}|{code}0" if bar and code else None


#: Mistakes verification cannot see, because only the data shows them: a valid unit the
#: readings are never in, a code no resource carries. Served, each must yield a card that names
#: the input it cost (the property's label), never a quiet decision without it.
RUNTIME_OPERATORS: tuple[Operator, ...] = (
    Operator(
        name="unit-other-dimension",
        predicate="horis:unit",
        mutate=_other_dimension,
        about="a valid UCUM unit of another dimension: every reading is refused",
    ),
    Operator(
        name="coding-other-code",
        predicate="horis:coding",
        mutate=_other_code,
        about="a code no resource carries: the input is never found",
    ),
)


def deployments() -> list[Path]:
    """Every bundled deployment file, as ``horismos serve`` loads them by default."""
    return default_ontology_paths()


def deployment_files() -> list[list[Path]]:
    """Every bundled deployment as the files it loads: its own, then what it imports."""
    return [source.paths for source in find_deployments(default_ontology_paths())]


def write_mutant(mutant: Mutant, folder: Path) -> Path:
    """The mutant as the service would read it, in ``folder``: the mutated file, the Turtle
    files beside it (what it imports, what imports it) and its value sets; returns its path."""
    source = mutant.deployment.parent
    for sibling in source.glob("*.ttl"):
        if sibling != mutant.deployment:
            shutil.copy(sibling, folder / sibling.name)
    if (source / "valuesets").is_dir():
        shutil.copytree(source / "valuesets", folder / "valuesets")
    path = folder / mutant.deployment.name
    path.write_text(mutant.text, encoding="utf-8")
    return path


def affected(path: Path) -> list[DeploymentSource]:
    """The deployments a file written by :func:`write_mutant` is part of (its own, or every one
    that imports it)."""
    found = find_deployments(sorted(path.parent.glob("*.ttl")), skip=vocabulary_path())
    return [d for d in found if path.resolve() in {p.resolve() for p in d.paths}]


def mutants(path: Path, operators: tuple[Operator, ...] = OPERATORS) -> Iterator[Mutant]:
    """Every mutant of one deployment file."""
    text = path.read_text(encoding="utf-8")
    base = _PREFIX.search(text)
    namespace = base.group(1) if base else ""
    for op in operators:
        made = 0
        # the literal right after the predicate (the first of an object list)
        for site in re.finditer(re.escape(op.predicate) + r"\s+" + _LITERAL, text):
            if made >= op.sites:
                break
            before = site.group(1)
            after = op.mutate(before)
            if after is None or after == before:
                continue
            start, end = site.span(1)
            made += 1
            yield Mutant(
                deployment=path,
                operator=op.name,
                before=before,
                after=after,
                owner=_owner(text, start, namespace),
                text=text[:start] + after + text[end:],
            )


def all_mutants() -> list[Mutant]:
    return [m for path in deployments() for m in mutants(path)]


def _owner(text: str, position: int, namespace: str) -> str:
    """The IRI of the named node whose statement holds ``position``."""
    subject = ""
    for found in _SUBJECT.finditer(text, 0, position):
        subject = found.group(1)
    return namespace + subject[1:] if subject.startswith(":") else subject.strip("<>")

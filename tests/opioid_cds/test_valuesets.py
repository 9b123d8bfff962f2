"""The opioid deployments' value sets are data a loader can read: valid R4 ValueSet resources,
each named by its id under the guide's canonical base (or, for the few Horismos adds, under its
own), each listing its member codes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from fhir.resources.R4B.valueset import ValueSet

from app.ontology.valuesets import load_value_sets, load_value_sets_with_history

FOLDER = Path(__file__).resolve().parents[2] / "ontologies" / "opioid-cds" / "valuesets"
CANONICAL_BASE = "http://fhir.org/guides/cdc/opioid-cds/ValueSet/"
#: value sets Horismos adds beside the guide's (what a coded urine screen result means, a history
#: of overdose)
OWN_BASE = "https://horismos.dev/opioid-cds/ValueSet/"
FILES = sorted(FOLDER.glob("*.json"))


def _base(resource: dict[str, Any]) -> str:
    return OWN_BASE if resource.get("publisher") == "Horismos" else CANONICAL_BASE


def members(resource: dict[str, Any]) -> set[tuple[str, str]]:
    """(system, code) pairs from the expansion (nested ``contains`` too) and the compose lists."""
    found: set[tuple[str, str]] = set()
    stack = list((resource.get("expansion") or {}).get("contains") or [])
    while stack:
        entry = stack.pop()
        stack.extend(entry.get("contains") or [])
        if entry.get("code") and not entry.get("abstract"):
            found.add((entry["system"], entry["code"]))
    for include in (resource.get("compose") or {}).get("include") or []:
        for concept in include.get("concept") or []:
            found.add((include["system"], concept["code"]))
    return found


def test_the_folder_holds_every_value_set_the_guide_logic_names() -> None:
    guide = [f for f in FILES if _base(json.loads(f.read_text(encoding="utf-8"))) == CANONICAL_BASE]
    assert len(guide) == 58 and len(FILES) == 61
    urls = [json.loads(f.read_text(encoding="utf-8"))["url"] for f in FILES]
    assert len(set(urls)) == len(urls), "two files claim one canonical"


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_value_set_is_valid_r4_and_lists_its_members(path: Path) -> None:
    resource = json.loads(path.read_text(encoding="utf-8"))
    ValueSet.model_validate(resource)
    assert resource["id"] == path.stem
    assert resource["url"] == _base(resource) + path.stem
    codes = members(resource)
    assert codes, f"{path.name} lists no member a loader can read"
    assert all(system.startswith(("http://", "https://")) for system, _ in codes)


def test_membership_is_read_from_the_expansion_where_the_definition_is_a_filter() -> None:
    """A hierarchy filter cannot be evaluated without the code system: the expansion decides."""
    resource = json.loads((FOLDER / "limited-life-expectancy-conditions.json").read_text())
    assert any("filter" in inc for inc in resource["compose"]["include"])
    assert ("http://snomed.info/sct", "300936002") in members(resource)


def test_the_ontology_loader_reads_every_value_set_of_the_folder() -> None:
    found, problems = load_value_sets([FOLDER])
    assert problems == []
    assert len(found) == len(FILES)
    naloxone = found[CANONICAL_BASE + "naloxone-medications"]
    assert "http://www.nlm.nih.gov/research/umls/rxnorm|1191212" in naloxone.codes


HISTORY = FOLDER / "history"
RETIRED_OUD = {
    ("http://snomed.info/sct", code)
    for code in ("191865004", "191867007", "191868002", "191869005", "230443000", "724653003")
}


def test_an_earlier_expansion_keeps_the_opioid_use_disorder_codes_the_current_one_dropped() -> None:
    """A chart coded with 724653003 "Opioid dependence with current use" (listed by the guide's
    2022.1.0 release) is not in today's expansion: the earlier one is shipped, with its source,
    under the same canonical, and read as an earlier expansion (a code only there counts, with
    a data-quality note: tests/opioid_cds/test_boundaries.py)."""
    current = json.loads((FOLDER / "opioid-misuse-disorders.json").read_text(encoding="utf-8"))
    earlier_path = HISTORY / "opioid-misuse-disorders-2022.1.0.json"
    earlier = json.loads(earlier_path.read_text(encoding="utf-8"))
    ValueSet.model_validate(earlier)
    assert earlier["url"] == current["url"]
    assert earlier["meta"]["source"].startswith(
        "https://github.com/cqframework/opioid-cds-r4/blob/6909afc6ff6c"
    )
    assert members(earlier) - members(current) == RETIRED_OUD
    loaded, problems = load_value_sets([FOLDER])
    assert problems == []
    assert not RETIRED_OUD & {tuple(code.split("|", 1)) for code in loaded[current["url"]].codes}, (
        "the current expansion stays the current one"
    )
    _, history, problems = load_value_sets_with_history([FOLDER])
    assert problems == []
    [older] = history[current["url"]]
    assert older.version == "2022.1.0"
    assert {tuple(code.split("|", 1)) for code in older.codes} >= RETIRED_OUD


@pytest.mark.parametrize(
    ("name", "brand"),
    [
        # Vicodin 5/300; Vicodin 5/500, retired from RxNorm, from the drug table's earlier extract
        ("opioid-analgesics-with-ambulatory-misuse-potential", {"1310202", "856907"}),
        # Duragesic 25 µg/h (a brand the list left out); Avinza 60 mg (retired), an
        # extended-release morphine capsule
        ("extended-release-opioid-with-ambulatory-misuse-potential", {"261184", "892351"}),
    ],
)
def test_a_branded_products_supplement_is_what_the_script_derives(
    name: str, brand: set[str]
) -> None:
    """The supplement adds only branded products (SBD) of clinical drugs the guide's list names,
    each derived by RxNorm's naming; the committed file is the script's output."""

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location(
        "branded_products", root / "scripts" / "branded_products.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    folder = root / "ontologies" / "opioid-cds" / "valuesets"
    valueset = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
    drugs = json.loads(
        (root / "toolkits" / "opioid_cds" / "data" / "opioid-drugs.json").read_text(
            encoding="utf-8"
        )
    )
    committed = json.loads(
        (folder / "supplements" / f"{name}-brands.json").read_text(encoding="utf-8")
    )
    assert committed == script.branded(valueset, drugs)
    members = {c["code"] for c in valueset["expansion"]["contains"]}
    added = committed["expansion"]["contains"]
    assert added and all(c["code"] not in members and c["display"].endswith("]") for c in added)
    assert brand <= {c["code"] for c in added}


def test_the_overdose_history_value_set_is_what_the_script_derives() -> None:
    """The guide's opioid poisonings and Synthea's Drug overdose, nothing else."""
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location(
        "overdose_history", root / "scripts" / "overdose_history.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    misuse = json.loads((FOLDER / "opioid-misuse-disorders.json").read_text(encoding="utf-8"))
    committed = json.loads((FOLDER / "overdose-history.json").read_text(encoding="utf-8"))
    assert committed == script.overdose_history(misuse)
    codes = {c["code"] for c in committed["expansion"]["contains"]}
    assert "55680006" in codes and "13187008" in codes  # drug overdose; heroin poisoning
    assert codes - {"55680006"} <= {c["code"] for c in misuse["expansion"]["contains"]}

#!/usr/bin/env python3
"""Build med-safety's drug product value sets from two public sources of RxNorm code lists.

usage: scripts/med_safety_valuesets.py PDDI_VOCABULARY_DIR --source-commit SHA
           VSAC_VALUE_SET_DIR --vsac-commit SHA [--out DIR]

**NSAIDs.**
``VOCABULARY_DIR`` is the ``input/vocabulary`` folder of the HL7 *Potential Drug-Drug
Interaction (PDDI) CDS* implementation guide (repository ``HL7/PDDI-CDS``), whose element value
sets list, per NSAID, its RxNorm concepts (ingredient, brand, dose-form groups and every
clinical and branded drug and pack), and whose ``-exclude`` value sets list the products of that
drug the guide keeps out (topical ibuprofen, ophthalmic diclofenac and ketorolac).

Per drug (ibuprofen, naproxen, diclofenac, ketorolac) this writes one FHIR R4 ``ValueSet``
(``med-safety-<drug>-products.json``, canonical
``https://horismos.dev/med-safety/ValueSet/<drug>-products``) listing in ``compose.include``
the guide's concepts for the drug

- less its ``-exclude`` value set,
- that are products: the RxNorm name states a strength (a digit) and a dose form, which the
  clinical and branded drugs (SCD, SBD) and packs (GPCK, BPCK) do and ingredients, brands,
  components and dose-form groups do not (those are not what an order is coded with; the
  ingredient is the class's own ``horis:code``),
- and are taken by mouth, injection, nose or rectum: the dose form is oral, chewable,
  injectable, nasal or rectal, or a pack, and the name says none of Topical, Ophthalmic,
  Otic, Transdermal, Medicated Patch, because the renal and age cautions the deployment gives
  are about systemic NSAIDs.

**Penicillins, metformin, ACE inhibitors.** ``VSAC_VALUE_SET_DIR`` holds the VSAC eCQM value
set expansions (eCQM Update 2025-05-08) as the ``canvas_sdk/value_set/v2026`` modules of the
public repository ``canvas-medical/canvas-plugins`` transcribe them: per value set its name,
OID, expansion version and its RxNorm codes, each with its RxNorm name in a comment. This reads
those lists as data (``medication.py``, ``allergy.py``) and writes

- ``penicillin-products``: the products of "Antibiotic Medications for Pharyngitis"
  (2.16.840.1.113883.3.464.1003.196.12.1001) and "Antibiotic Medications for Upper Respiratory
  Infection" (2.16.840.1.113883.3.464.1003.1190) whose name contains "cillin" (amoxicillin,
  ampicillin, dicloxacillin, nafcillin, oxacillin, penicillin G and V, piperacillin), and of those
  ``amoxicillin-products``, ``ampicillin-products``, ``penicillin-v-products`` by name;
- ``metformin-products``: the products of "Hypoglycemics Treatment Medications"
  (2.16.840.1.113762.1.4.1196.394) whose name contains "metformin";
- ``ace-inhibitor-products``: the products of "ACE Inhibitor or ARB or ARNI"
  (2.16.840.1.113883.3.526.3.1139) whose name contains an ingredient of "ACE Inhibitor or ARB
  or ARNI Ingredient" (2.16.840.1.113883.3.526.3.1489) named with the ACE inhibitors' "-pril"
  stem, and of those ``lisinopril-products``.

These eCQM expansions list prescribable generic drugs (SCD, GPCK): branded drugs are not in
them. Codes and names are the sources', unchanged; each file says where it came from. The output
is deterministic: the same input gives the same files.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "ontologies" / "valuesets"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
FHIR = {"f": "http://hl7.org/fhir"}
DRUGS = ("ibuprofen", "naproxen", "diclofenac", "ketorolac")
NOT_SYSTEMIC = re.compile(r"Topical|Ophthalmic|Otic|Transdermal|Medicated Patch", re.IGNORECASE)
#: RxNorm dose forms (and packs) of an NSAID taken by mouth, injection, nose or rectum
SYSTEMIC = re.compile(
    r"\b(Oral|Chewable|Injection|Injectable|Prefilled Syringe|Cartridge|Nasal|Rectal|"
    r"Suppository|Pack)\b"
)
BASE = "https://horismos.dev/med-safety/ValueSet/"
REPOSITORY = "https://github.com/HL7/PDDI-CDS"


VSAC_REPOSITORY = "https://github.com/canvas-medical/canvas-plugins"
VSAC_PATH = "canvas_sdk/value_set/v2026"
PHARYNGITIS = "2.16.840.1.113883.3.464.1003.196.12.1001"
URI = "2.16.840.1.113883.3.464.1003.1190"
HYPOGLYCEMICS = "2.16.840.1.113762.1.4.1196.394"
ACE_OR_ARB = "2.16.840.1.113883.3.526.3.1139"
ACE_OR_ARB_INGREDIENT = "2.16.840.1.113883.3.526.3.1489"


class VocabularyError(ValueError):
    """A value set file is missing or not the shape this script reads."""


def read_concepts(path: Path) -> tuple[str | None, dict[str, str]]:
    """(the value set's version, its RxNorm concepts code → display)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise VocabularyError(f"{path}: {exc}") from exc
    version = root.find("f:version", FHIR)
    out: dict[str, str] = {}
    for include in root.findall("f:compose/f:include", FHIR):
        system = include.find("f:system", FHIR)
        if system is None or system.get("value") != RXNORM:
            raise VocabularyError(f"{path}: an include of another system than RxNorm")
        for concept in include.findall("f:concept", FHIR):
            code = concept.find("f:code", FHIR)
            display = concept.find("f:display", FHIR)
            if code is None or not code.get("value"):
                raise VocabularyError(f"{path}: a concept without a code")
            out[str(code.get("value"))] = "" if display is None else str(display.get("value"))
    return (None if version is None else version.get("value")), out


def products(vocabulary: Path, drug: str) -> tuple[str | None, dict[str, str]]:
    version, concepts = read_concepts(vocabulary / f"valueset-{drug}.xml")
    exclude_path = vocabulary / f"valueset-{drug}-exclude.xml"
    excluded = read_concepts(exclude_path)[1] if exclude_path.exists() else {}
    kept = {
        code: display
        for code, display in concepts.items()
        if code not in excluded
        and re.search(r"\d", display)
        and SYSTEMIC.search(display)
        and not NOT_SYSTEMIC.search(display)
    }
    if not kept:
        raise VocabularyError(f"{drug}: no product left")
    return version, dict(sorted(kept.items(), key=lambda kv: int(kv[0])))


_VSAC_CLASS = re.compile(r"^class \w+\(ValueSet\):\n(?P<body>.*?)(?=^class |\Z)", re.M | re.S)
_VSAC_CODE = re.compile(r'^\s+"(?P<code>[^"]+)",\s*#\s*(?P<name>.+?)\s*$', re.M)


def read_vsac(path: Path) -> dict[str, dict[str, Any]]:
    """Per OID: the value set's name, expansion version and RxNorm codes (code → name)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise VocabularyError(f"{path}: {exc}") from exc
    out: dict[str, dict[str, Any]] = {}
    for match in _VSAC_CLASS.finditer(text):
        body = match.group("body")
        oid = re.search(r'OID = "([^"]+)"', body)
        name = re.search(r'VALUE_SET_NAME = "([^"]+)"', body)
        expansion = re.search(r'EXPANSION_VERSION = "([^"]+)"', body)
        rxnorm = re.search(r"^    RXNORM = \{\n(?P<codes>.*?)^    \}", body, re.M | re.S)
        if oid is None or name is None or expansion is None:
            raise VocabularyError(f"{path}: a value set without OID, name or expansion version")
        codes = (
            {}
            if rxnorm is None
            else dict(
                (m.group("code"), m.group("name"))
                for m in _VSAC_CODE.finditer(rxnorm.group("codes"))
            )
        )
        out[oid.group(1)] = {
            "name": name.group(1),
            "expansion": expansion.group(1),
            "codes": codes,
        }
    return out


def _vsac_set(sets: dict[str, dict[str, Any]], oid: str) -> dict[str, Any]:
    found = sets.get(oid)
    if found is None or not found["codes"]:
        raise VocabularyError(f"no VSAC value set {oid} with RxNorm codes")
    return found


def vsac_products(folder: Path) -> dict[str, tuple[str, list[str], dict[str, str]]]:
    """Per value set id: (expansion version, the VSAC value sets it was read from, codes)."""
    medication = read_vsac(folder / "medication.py")
    allergy = read_vsac(folder / "allergy.py")
    antibiotics: dict[str, str] = {}
    for oid in (PHARYNGITIS, URI):
        antibiotics.update(_vsac_set(medication, oid)["codes"])
    expansion = _vsac_set(medication, PHARYNGITIS)["expansion"]

    def named(codes: dict[str, str], pattern: str) -> dict[str, str]:
        rx = re.compile(pattern, re.IGNORECASE)
        return {c: n for c, n in codes.items() if rx.search(n)}

    ace_ingredients = sorted(
        n.lower()
        for n in _vsac_set(allergy, ACE_OR_ARB_INGREDIENT)["codes"].values()
        if n.lower().endswith("pril")
    )
    if not ace_ingredients:
        raise VocabularyError("no ACE inhibitor among the ACE/ARB/ARNI ingredients")
    ace = named(
        _vsac_set(medication, ACE_OR_ARB)["codes"],
        r"\b(" + "|".join(map(re.escape, ace_ingredients)) + r")\b",
    )
    penicillin_sets = [PHARYNGITIS, URI]
    built = {
        "penicillin": (expansion, penicillin_sets, named(antibiotics, r"cillin")),
        "amoxicillin": (expansion, penicillin_sets, named(antibiotics, r"\bamoxicillin\b")),
        "ampicillin": (expansion, penicillin_sets, named(antibiotics, r"\bampicillin\b")),
        "penicillin-v": (expansion, penicillin_sets, named(antibiotics, r"\bpenicillin V\b")),
        "metformin": (
            _vsac_set(medication, HYPOGLYCEMICS)["expansion"],
            [HYPOGLYCEMICS],
            named(_vsac_set(medication, HYPOGLYCEMICS)["codes"], r"\bmetformin\b"),
        ),
        "ace-inhibitor": (
            _vsac_set(medication, ACE_OR_ARB)["expansion"],
            [ACE_OR_ARB, ACE_OR_ARB_INGREDIENT],
            ace,
        ),
        "lisinopril": (
            _vsac_set(medication, ACE_OR_ARB)["expansion"],
            [ACE_OR_ARB],
            named(ace, r"\blisinopril\b"),
        ),
    }
    for key, (_, _, codes) in built.items():
        if not codes:
            raise VocabularyError(f"{key}: no product found")
    names = {oid: s["name"] for oid, s in medication.items()} | {
        oid: s["name"] for oid, s in allergy.items()
    }
    return {
        key: (
            exp,
            [f"{names[o]} ({o})" for o in oids],
            dict(sorted(c.items(), key=lambda kv: int(kv[0]))),
        )
        for key, (exp, oids, c) in built.items()
    }


def vsac_value_set(
    key: str, expansion: str, sets: list[str], kept: dict[str, str], commit: str
) -> dict[str, Any]:
    title = key.replace("-", " ")
    return {
        "resourceType": "ValueSet",
        "id": f"med-safety-{key}-products",
        "meta": {"source": f"{VSAC_REPOSITORY}/tree/{commit}/{VSAC_PATH}"},
        "url": f"{BASE}{key}-products",
        "version": f"vsac-{expansion}",
        "name": "".join(p.capitalize() for p in key.split("-")) + "Products",
        "title": f"{title.capitalize()} products (RxNorm)",
        "status": "active",
        "experimental": False,
        "publisher": "Horismos",
        "description": (
            f"The RxNorm drugs and packs containing {title} among the VSAC value set expansions "
            f"{'; '.join(sets)}, {expansion}, as transcribed in the repository "
            f"canvas-medical/canvas-plugins ({VSAC_PATH}, commit {commit}). Prescribable generic "
            "drugs only: branded drugs are not in these expansions. Built by "
            "scripts/med_safety_valuesets.py. Uses RxNorm data of the US National Library of "
            "Medicine, which does not endorse this product."
        ),
        "compose": {
            "include": [
                {"system": RXNORM, "concept": [{"code": c, "display": d} for c, d in kept.items()]}
            ]
        },
    }


def value_set(drug: str, version: str | None, kept: dict[str, str], commit: str) -> dict[str, Any]:
    source = f"{REPOSITORY}/blob/{commit}/input/vocabulary/valueset-{drug}.xml"
    return {
        "resourceType": "ValueSet",
        "id": f"med-safety-{drug}-products",
        "meta": {"source": source},
        "url": f"{BASE}{drug}-products",
        "version": f"pddi-{version or 'unversioned'}",
        "name": f"{drug.capitalize()}Products",
        "title": f"{drug.capitalize()} products taken systemically (RxNorm)",
        "status": "active",
        "experimental": False,
        "publisher": "Horismos",
        "description": (
            f"The RxNorm clinical and branded drugs and packs of {drug} that are taken by mouth, "
            "injection, nose or rectum, as the HL7 Potential Drug-Drug Interaction (PDDI) CDS "
            f"implementation guide lists them (ValueSet valueset-{drug}, version "
            f"{version or 'none given'}, less valueset-{drug}-exclude; repository HL7/PDDI-CDS, "
            f"commit {commit}): concepts whose RxNorm name states a strength, less topical, "
            "ophthalmic, otic and transdermal products. Built by scripts/med_safety_valuesets.py. "
            "Uses RxNorm data of the US National Library of Medicine, which does not endorse "
            "this product."
        ),
        "compose": {
            "include": [
                {
                    "system": RXNORM,
                    "concept": [{"code": c, "display": d} for c, d in kept.items()],
                }
            ]
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vocabulary", type=Path, help="the guide's input/vocabulary folder")
    parser.add_argument("--source-commit", required=True, help="the commit it was read at")
    parser.add_argument("vsac", type=Path, help="the canvas-plugins value set module folder")
    parser.add_argument("--vsac-commit", required=True, help="the commit it was read at")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    try:
        built = {drug: products(args.vocabulary, drug) for drug in DRUGS}
        vsac = vsac_products(args.vsac)
    except VocabularyError as exc:
        print(f"med_safety_valuesets: {exc}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for drug, (version, kept) in built.items():
        path = args.out / f"med-safety-{drug}-products.json"
        resource = value_set(drug, version, kept, args.source_commit)
        path.write_text(json.dumps(resource, indent=2, ensure_ascii=False) + "\n", "utf-8")
        print(f"wrote {len(kept)} {drug} products to {path}")
    for key, (expansion, sets, codes) in vsac.items():
        path = args.out / f"med-safety-{key}-products.json"
        resource = vsac_value_set(key, expansion, sets, codes, args.vsac_commit)
        path.write_text(json.dumps(resource, indent=2, ensure_ascii=False) + "\n", "utf-8")
        print(f"wrote {len(codes)} {key} products to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

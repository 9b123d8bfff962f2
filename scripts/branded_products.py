"""Writes the supplement of a drug ValueSet that adds the branded products of its clinical drugs.

    python scripts/branded_products.py VALUESET DRUG_DATA OUT

RxNorm names a branded drug (SBD) as the clinical drug (SCD) it is a trade name of, followed by
"[Brand]" (RxNorm Technical Documentation, "Normalized names"): "acetaminophen 300 MG /
hydrocodone bitartrate 5 MG Oral Tablet [Vicodin]" is a trade name of "acetaminophen 300 MG /
hydrocodone bitartrate 5 MG Oral Tablet". A value set that lists the clinical drug but not its
brand (the CDC guide's opioid analgesics list Vicodin's clinical drug, not Vicodin) leaves a
branded order outside it. This keeps every drug of DRUG_DATA (the opioid toolkit's drug table:
RxNorm codes and names from the guide's OMTK data) not in VALUESET whose name without its
"[Brand]" is the name of a drug VALUESET lists, and writes them as a ValueSet of the same
canonical, version "<the value set's version or expansion day>+brands", naming both sources.
Deterministic: tests/opioid_cds/test_valuesets.py checks the committed file against it.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
_BRANDED = re.compile(r"^(?P<clinical>.+) \[[^\]]+\]$")


def branded(valueset: dict[str, Any], drugs: dict[str, Any]) -> dict[str, Any]:
    """The supplement of ``valueset`` with the branded products ``drugs`` names."""
    members = {c["code"] for c in valueset["expansion"]["contains"] if c.get("system") == RXNORM}
    names = drugs["drugs"]
    clinical = {names[c]["name"].lower(): c for c in members if c in names}
    kept: list[dict[str, str]] = []
    for code, drug in sorted(names.items(), key=lambda kv: int(kv[0])):
        found = _BRANDED.match(drug["name"])
        if code in members or found is None:
            continue
        of = clinical.get(found["clinical"].lower())
        if of is not None:
            kept.append({"system": RXNORM, "code": code, "display": drug["name"]})
    day = valueset.get("version") or valueset["expansion"]["timestamp"][:10]
    source = drugs["source"]
    return {
        "resourceType": "ValueSet",
        "id": f"{valueset['id']}-brands",
        "url": valueset["url"],
        "version": f"{day}+brands",
        "name": f"{valueset.get('name', valueset['id'])}Brands",
        "title": f"{valueset.get('title', valueset['id'])}: branded products",
        "status": "active",
        "description": (
            "the branded product (RxNorm SBD) of a clinical drug the value set lists, by RxNorm's "
            "naming: the SBD's name is the clinical drug's followed by [Brand]"
        ),
        "meta": {
            "source": (
                f"derived by scripts/branded_products.py from {valueset['url']} (expansion "
                f"{valueset['expansion']['timestamp']}) and {source['drugData']} "
                f"(RxNorm {source['rxnormExtract']})"
            )
        },
        "expansion": {
            "timestamp": valueset["expansion"]["timestamp"],
            "total": len(kept),
            "contains": kept,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("valueset", type=Path)
    parser.add_argument("drug_data", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    valueset = json.loads(args.valueset.read_text(encoding="utf-8"))
    drugs = json.loads(args.drug_data.read_text(encoding="utf-8"))
    out = branded(valueset, drugs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

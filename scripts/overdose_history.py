"""Writes the ValueSet of the conditions that record an overdose (recommendation 8's risk factor).

    python scripts/overdose_history.py OPIOID_MISUSE_DISORDERS OUT

The CDC 2022 guideline (recommendation 8) names a history of overdose among the factors that
increase the risk of a fatal overdose; the guide's logic reads none. This keeps the concepts of
the guide's value set opioid-misuse-disorders whose display says poisoning or overdose (opioid
poisonings, by SNOMED CT and ICD-10-CM) and adds SNOMED CT 55680006 "Drug overdose", the code
Synthea and EHR problem lists write for an overdose of any drug. Deterministic:
tests/opioid_cds/test_valuesets.py checks the committed file against it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

URL = "https://horismos.dev/opioid-cds/ValueSet/overdose-history"
SNOMED = "http://snomed.info/sct"
DRUG_OVERDOSE = {"system": SNOMED, "code": "55680006", "display": "Drug overdose"}
_WORDS = ("poisoning", "overdose")


def overdose_history(misuse: dict[str, Any]) -> dict[str, Any]:
    """The overdose concepts of ``misuse`` (opioid-misuse-disorders), with Drug overdose."""
    kept = [
        {"system": c["system"], "code": c["code"], "display": c["display"]}
        for c in misuse["expansion"]["contains"]
        if any(w in (c.get("display") or "").lower() for w in _WORDS)
    ]
    kept.append(DRUG_OVERDOSE)
    kept.sort(key=lambda c: (c["system"], c["code"]))
    return {
        "resourceType": "ValueSet",
        "id": "overdose-history",
        "url": URL,
        "version": "1.0.0",
        "name": "OverdoseHistory",
        "title": "Conditions that record an overdose",
        "status": "active",
        "publisher": "Horismos",
        "description": (
            "A history of overdose, which the CDC 2022 guideline (recommendation 8) names among "
            "the factors that increase the risk of a fatal overdose: the poisoning and overdose "
            "concepts of opioid-misuse-disorders, and SNOMED CT 55680006 Drug overdose."
        ),
        "meta": {
            "source": (
                f"derived by scripts/overdose_history.py from {misuse['url']} (expansion "
                f"{misuse['expansion']['timestamp']}); SNOMED CT 55680006 added"
            )
        },
        "expansion": {
            "timestamp": misuse["expansion"]["timestamp"],
            "total": len(kept),
            "contains": kept,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("misuse", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    misuse = json.loads(args.misuse.read_text(encoding="utf-8"))
    args.out.write_text(json.dumps(overdose_history(misuse), indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

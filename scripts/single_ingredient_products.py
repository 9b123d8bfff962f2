"""Writes the ValueSet of the single-ingredient products among other product ValueSets.

    python scripts/single_ingredient_products.py --url URL --name NAME --title TITLE OUT IN...

A suggestion that swaps one drug for another (``horis:alternative``) must not replace a
combination product, whose other ingredients the swap would drop (hydrocodone/ibuprofen is not
"ibuprofen"). RxNorm names a multi-ingredient clinical or branded drug, and a pack, with its
ingredients joined by " / " (RxNorm Technical Documentation, "Normalized names"); this keeps
the concepts of the input ValueSets whose RxNorm name has no " / ", and names every input
(canonical, version and ``meta.source``) as its source. Deterministic: the same inputs give the
same file, which tests/cds/test_med_safety_content.py checks against the committed one.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"


def single_ingredient(
    sources: list[dict[str, Any]], *, url: str, name: str, title: str
) -> dict[str, Any]:
    """The ValueSet of the single-ingredient RxNorm concepts of ``sources``."""
    kept: dict[str, str] = {}
    cited: list[str] = []
    for vs in sources:
        source = (vs.get("meta") or {}).get("source") or vs["url"]
        cited.append(f"{vs['url']}|{vs.get('version')} ({source})")
        for include in (vs.get("compose") or {}).get("include") or []:
            if include.get("system") != RXNORM:
                continue
            for concept in include.get("concept") or []:
                display = concept.get("display") or ""
                if display and " / " not in display:
                    kept.setdefault(concept["code"], display)
    return {
        "resourceType": "ValueSet",
        "id": url.rsplit("/", 1)[-1],
        "url": url,
        "version": "1.0.0",
        "name": name,
        "title": title,
        "status": "active",
        "experimental": False,
        "publisher": "Horismos",
        "description": (
            "The single-ingredient products (RxNorm name without ' / ') of: "
            + "; ".join(cited)
            + ". Written by scripts/single_ingredient_products.py."
        ),
        "compose": {
            "include": [
                {
                    "system": RXNORM,
                    "concept": [
                        {"code": code, "display": kept[code]}
                        for code in sorted(kept, key=lambda c: (int(c) if c.isdigit() else 0, c))
                    ],
                }
            ]
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--title", required=True)
    parser.add_argument("out", type=Path)
    parser.add_argument("inputs", type=Path, nargs="+")
    args = parser.parse_args(argv)
    sources = [json.loads(p.read_text(encoding="utf-8")) for p in args.inputs]
    vs = single_ingredient(sources, url=args.url, name=args.name, title=args.title)
    args.out.write_text(json.dumps(vs, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Writes a ValueSet of codes known to lie outside a service's drug lists.

    python scripts/outside_scope.py --url URL --name NAME --title TITLE --purpose TEXT \
        OUT --from IN... [--except OWN...]

A medication-safety check reads a draft order whose drug it cannot place as *unread*: the order
is not called safe, and its card says so. That is right for a drug it might have a rule about
(a branded NSAID it does not list) and noise for one it knows it has none about: an opioid
order would show "medication safety not checked" on every prescription. This writes, from
named published value sets (``--from``), the codes that are none of the service's own
(``--except``: the value sets its classes read), for the property that reads the drug to declare
``horis:knownOutside``. Each input is cited by canonical URL, version or expansion date and
file. Deterministic: the same inputs give the same file, which
tests/cds/test_med_safety_content.py checks against the committed one.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def concepts(vs: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(system, code, display) of every concept a ValueSet lists (compose and expansion)."""
    for include in (vs.get("compose") or {}).get("include") or []:
        for c in include.get("concept") or []:
            yield include.get("system", ""), c["code"], c.get("display", "")
    for c in (vs.get("expansion") or {}).get("contains") or []:
        yield c.get("system", ""), c["code"], c.get("display", "")


def _cite(vs: dict[str, Any], path: Path) -> str:
    version = vs.get("version") or (vs.get("expansion") or {}).get("timestamp") or vs.get("date")
    return f"{vs['url']} ({version}; {path.as_posix()})"


def outside(
    sources: list[tuple[Path, dict[str, Any]]],
    own: list[tuple[Path, dict[str, Any]]],
    *,
    url: str,
    name: str,
    title: str,
    purpose: str,
) -> dict[str, Any]:
    """The ValueSet of the concepts of ``sources`` that none of ``own`` lists."""
    taken = {(s, c) for _p, vs in own for s, c, _d in concepts(vs)}
    kept: dict[str, dict[str, str]] = {}
    for _path, vs in sources:
        for system, code, display in concepts(vs):
            if (system, code) not in taken:
                kept.setdefault(system, {}).setdefault(code, display)
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
            f"{purpose} The concepts of: "
            + "; ".join(_cite(vs, p) for p, vs in sources)
            + ", less those of: "
            + "; ".join(_cite(vs, p) for p, vs in own)
            + ". Written by scripts/outside_scope.py."
        ),
        "compose": {
            "include": [
                {
                    "system": system,
                    "concept": [
                        {"code": code, "display": kept[system][code]}
                        for code in sorted(kept[system], key=lambda c: (len(c), c))
                    ],
                }
                for system in sorted(kept)
            ]
        },
    }


def _read(paths: list[str]) -> list[tuple[Path, dict[str, Any]]]:
    return [(Path(p), json.loads(Path(p).read_text())) for p in paths]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--url", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--title", required=True)
    parser.add_argument("--purpose", required=True)
    parser.add_argument("--from", dest="sources", nargs="+", required=True)
    parser.add_argument("--except", dest="own", nargs="*", default=[])
    args = parser.parse_args(argv)
    vs = outside(
        _read(args.sources),
        _read(args.own),
        url=args.url,
        name=args.name,
        title=args.title,
        purpose=args.purpose,
    )
    Path(args.out).write_text(json.dumps(vs, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

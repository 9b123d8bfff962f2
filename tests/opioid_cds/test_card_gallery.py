"""One card of each bundled service as a clinician sees it, the same in docs/cards.md and README:
the block between ``<!-- card gallery -->`` and ``<!-- /card gallery -->`` in each file is what
this test renders from the bundled deployments (the triage and med-safety scenarios of
``tests/cds/card_scenarios.py``, the first of the guide's examples and our cases that gets a
decided card from each opioid service, else its scenario there). A card that changes fails this
test until the docs are regenerated: ``WRITE_CARD_GALLERY=1`` with this test writes both blocks.

Dates in the docs are written as one fixed day (the cards show the day the data was taken)."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds.card_markdown import check_card, check_summary
from tests.cds.card_scenarios import MED_SAFETY, SCENARIOS, TRIAGE
from tests.support.fhir_server import FhirServer
from tests.support.opioid_examples import (
    CASES_DIR,
    EXAMPLES_DIR,
    call_service,
    deployed_services,
    load_examples,
)

pytestmark = pytest.mark.fhirserver

ROOT = Path(__file__).resolve().parents[2]
FILES = (ROOT / "docs" / "cards.md", ROOT / "README.md")
BEGIN, END = "<!-- card gallery -->", "<!-- /card gallery -->"
#: the scenario of each example deployment the gallery shows
EXAMPLE_CARDS = (
    (TRIAGE, "Triage acuity: Immediate"),
    (MED_SAFETY, "Contraindicated medication order"),
)
#: the combined service the gallery shows last, on one example of the guide's
COMBINED, COMBINED_EXAMPLE = "opioidcds-order-sign", "rec-08-on-benzodiazepine"
_DAY = re.compile(
    r"\b\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}( \d{2}:\d{2} [A-Z]+)?"
)


def _fixed_day(text: str) -> str:
    return _DAY.sub(lambda m: "1 Jun 2025" + (" 12:00 UTC" if m.group(2) else ""), text)


def _entry(card: dict[str, Any]) -> str:
    check_card(card["detail"])
    check_summary(card["summary"])
    quoted = "\n".join(f"> {line}".rstrip() for line in _fixed_day(card["detail"]).splitlines())
    source = card["source"]
    return (
        f"**{source['label']}** · {card['indicator']} · [source]({source['url']})\n\n"
        f"> **{_fixed_day(card['summary'])}**\n>\n{quoted}\n"
    )


def _gallery(client: TestClient, fhir_server: FhirServer) -> str:
    entries: list[str] = []
    for service, summary in EXAMPLE_CARDS:
        make, _words = SCENARIOS[(service, summary)]
        cards = client.post(f"/cds-services/{service}", json=make()).json()["cards"]
        entries.append(_entry(next(c for c in cards if c["summary"] == summary)))
    served = deployed_services()
    today = datetime.now(UTC).date()
    examples = [*load_examples(EXAMPLES_DIR), *load_examples(CASES_DIR)]
    for service in sorted(s for s in served if s.startswith("opioidcds-")):
        for example in (e for e in examples if e.service == service and e.expected):
            response = call_service(
                client, fhir_server, example, service_id=service, mode="prefetch", today=today
            )
            cards = response.json()["cards"]
            decided = [c for c in cards if "not completed" not in c["summary"]]
            if decided:
                entries.append(_entry(decided[0]))
                break
        else:  # no example of the guide's for it: the scenario of tests/cds/card_scenarios.py
            key = next(k for k in SCENARIOS if k[0] == service and "not completed" not in k[1])
            cards = client.post(f"/cds-services/{service}", json=SCENARIOS[key][0]()).json()
            entries.append(_entry(cards["cards"][0]))
    # the combined order-sign service: one card for the order recommendation 8's example signs
    [rec08] = [e for e in examples if e.name == COMBINED_EXAMPLE]
    response = call_service(
        client, fhir_server, rec08, service_id=COMBINED, mode="prefetch", today=today
    )
    [card] = response.json()["cards"]
    entries.append(_entry(card))
    return "\n".join(entries)


def _block(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


@pytest.mark.timeout(300)
def test_the_docs_show_one_card_of_each_bundled_service_as_it_is_rendered(
    client: TestClient, fhir_server: FhirServer
) -> None:
    gallery = _gallery(client, fhir_server)
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        if os.environ.get("WRITE_CARD_GALLERY") == "1":
            start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
            path.write_text(text[:start] + "\n" + gallery + "\n" + text[end:], encoding="utf-8")
            continue
        assert _block(text) == gallery.strip("\n"), f"{path.name}: regenerate the card gallery"

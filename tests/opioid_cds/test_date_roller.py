"""The test date roller moves a guide example's data to the test day as the guide's tooling does."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from tests.support.date_roller import ROLLER_URL, roll

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "opioid-cds" / "examples"


def stamped(day: str, **fields: Any) -> dict[str, Any]:
    stamp = {"url": ROLLER_URL, "extension": [{"url": "dateLastUpdated", "valueDateTime": day}]}
    return {"extension": [stamp], **fields}


REQUEST: dict[str, Any] = {
    "hook": "order-sign",
    "hookInstance": "2023-05-01",  # outside context and prefetch: never a date to move
    "context": {
        "patientId": "p1",
        "draftOrders": {
            "resourceType": "Bundle",
            "entry": [
                {
                    "resource": stamped(
                        "2023-05-01",
                        resourceType="MedicationRequest",
                        id="d1",
                        authoredOn="2023-05-01",
                        dispenseRequest={
                            "validityPeriod": {
                                "start": "2023-05-01T00:00:00-06:00",
                                "end": "2023-08-01T00:00:00-06:00",
                            }
                        },
                    )
                }
            ],
        },
    },
    "prefetch": {
        "item1": stamped(
            "2023-04-01",
            resourceType="Patient",
            id="p1",
            birthDate="2003-04-01",
            contained=[{"resourceType": "Organization", "id": "o", "text": {"div": "2020-01"}}],
        ),
        "item2": stamped(
            "2023-05-01", resourceType="Encounter", id="e1", period={"start": "2023-04-30"}
        ),
        "item4": None,
    },
    "item3": {"resourceType": "Observation", "id": "o1", "effectiveDateTime": "2023-04-21"},
}


def test_each_resource_moves_by_its_own_stamp_and_unstamped_ones_by_the_most_common() -> None:
    rolled = roll(REQUEST, date(2026, 3, 1))

    draft = rolled["context"]["draftOrders"]["entry"][0]["resource"]
    assert draft["authoredOn"] == "2026-03-01"
    assert draft["dispenseRequest"]["validityPeriod"] == {
        "start": "2026-03-01T00:00:00-06:00",
        "end": "2026-06-01T00:00:00-06:00",
    }
    patient = rolled["prefetch"]["item1"]
    assert patient["birthDate"] == "2006-03-01"  # 2023-04-01 → 2026-03-01: 1065 days later
    assert patient["contained"][0]["text"]["div"] == "2020-01"  # a partial date stays
    assert rolled["prefetch"]["item2"]["period"] == {"start": "2026-02-28"}
    # the stray item3 is back in prefetch and, unstamped, moves with the most common stamp
    # (2023-05-01, twice): by the same 1035 days as the draft order
    assert rolled["prefetch"]["item3"]["effectiveDateTime"] == "2026-02-19"
    assert rolled["prefetch"]["item4"] is None
    assert "item3" not in rolled
    assert rolled["hookInstance"] == "2023-05-01"
    assert REQUEST["context"]["draftOrders"]["entry"][0]["resource"]["authoredOn"] == "2023-05-01"


def test_a_request_without_stamps_is_unchanged() -> None:
    plain = {
        "hook": "patient-view",
        "context": {"patientId": "p"},
        "prefetch": {"p": {"resourceType": "Patient", "id": "p", "birthDate": "1990-01-01"}},
    }
    assert roll(plain, date(2026, 3, 1)) == plain


def test_relative_days_of_a_guide_example_survive_the_roll() -> None:
    """rec-07 "seven of past ten days": the stored 7-day order was authored 8 days before the
    draft; after rolling it still is, whatever the day."""
    example = json.loads(
        (EXAMPLES / "OpioidCDSREC07--rec-07-seven-of-past-ten-days.json").read_text()
    )
    for day in (date(2026, 1, 1), date(2028, 2, 29)):
        rolled = roll(example["request"], day)
        draft = rolled["context"]["draftOrders"]["entry"][0]["resource"]
        stored = [
            r
            for r in rolled["prefetch"].values()
            if isinstance(r, dict) and r.get("resourceType") == "MedicationRequest"
        ]
        assert date.fromisoformat(draft["authoredOn"]) == day
        assert [(day - date.fromisoformat(r["authoredOn"])).days for r in stored] == [8]

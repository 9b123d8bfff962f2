"""The effect log on both backends: one row per write, each state write one transaction."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event

from app.store.effects import EffectLog, EffectRow, effect_reports
from tests.support.runs import claimed_run

CHANGE = {"resourceType": "Encounter", "element": "priority", "value": "x"}


@pytest.fixture
def row(engine: Engine) -> EffectRow:
    run_id = claimed_run(engine)
    return EffectRow(
        run_id=run_id,
        effect_id="tool:Encounter/e1.priority",
        tool="urn:tool",
        target="http://fhir.test/Encounter/e1",
        expected="v1",
    )


@pytest.fixture
def commits(engine: Engine) -> Iterator[list[object]]:
    seen: list[object] = []

    def count(conn: object) -> None:
        seen.append(conn)

    event.listen(engine, "commit", count)
    yield seen
    event.remove(engine, "commit", count)


def test_a_write_that_sends_nothing_is_one_row_in_its_final_state(
    engine: Engine, row: EffectRow, commits: list[object]
) -> None:
    EffectLog(engine).unsent(row, "refused", {"reason": "no scope", "change": CHANGE})

    assert len(commits) == 1
    [effect] = effect_reports(engine, row.run_id)
    assert (effect["state"], effect["attempts"], effect["detail"]) == ("refused", 0, "no scope")
    assert (effect["resourceType"], effect["element"]) == ("Encounter", "priority")


def test_a_sent_write_is_attempted_then_settled_in_one_transaction_each(
    engine: Engine, row: EffectRow, commits: list[object]
) -> None:
    log = EffectLog(engine)
    log.attempt(row, {"request": {"method": "PUT"}, "change": CHANGE})
    assert len(commits) == 1
    assert [(e["state"], e["attempts"]) for e in effect_reports(engine, row.run_id)] == [
        ("attempted", 1)
    ]
    commits.clear()  # reading the reports is a transaction of its own

    log.set(row.run_id, row.effect_id, "accepted", {"newVersion": "v2", "change": CHANGE})

    assert len(commits) == 1
    [effect] = effect_reports(engine, row.run_id)
    assert (effect["state"], effect["attempts"], effect["newVersion"]) == ("accepted", 1, "v2")
    assert log.persisted() == [effect]


def test_a_retry_that_sends_nothing_never_hides_a_write_that_went_out(
    engine: Engine, row: EffectRow
) -> None:
    log = EffectLog(engine)
    log.attempt(row, {"request": {"method": "PUT"}, "change": CHANGE})
    log.set(row.run_id, row.effect_id, "unknown", {"error": "no answer", "change": CHANGE})

    log.unsent(row, "failed", {"error": "reading Encounter/e1 failed", "change": CHANGE})

    [effect] = effect_reports(engine, row.run_id)
    assert (effect["state"], effect["detail"]) == ("unknown", "no answer")
    assert log.persisted() == [effect]  # what the run's cards report, without reading back


def test_a_second_attempt_counts_and_a_retried_refusal_stays_one_row(
    engine: Engine, row: EffectRow
) -> None:
    log = EffectLog(engine)
    log.unsent(row, "refused", {"reason": "no scope", "change": CHANGE})
    log.unsent(row, "refused", {"reason": "no scope", "change": CHANGE})
    assert [(e["state"], e["attempts"]) for e in effect_reports(engine, row.run_id)] == [
        ("refused", 0)
    ]

    log.attempt(row, {"request": {"method": "PUT"}, "change": CHANGE})
    log.attempt(row, {"request": {"method": "PUT"}, "change": CHANGE})

    assert [(e["state"], e["attempts"]) for e in effect_reports(engine, row.run_id)] == [
        ("attempted", 2)
    ]
    assert log.persisted() == effect_reports(engine, row.run_id)


def test_settling_an_effect_that_was_never_recorded_is_an_error(
    engine: Engine, row: EffectRow
) -> None:
    log = EffectLog(engine)
    with pytest.raises(LookupError):
        log.set(row.run_id, "nothing", "accepted", {})
    assert log.persisted() == []

"""The fast digest of parsed JSON (``app.digest.json_digest``) is the canonical digest, byte for
byte, whatever the document holds: the digests are stored and compared (a retried hook call's
body, every resource a run read), so a different byte would read as a different document."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.digest import canonical_digest, json_digest

_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [9.9e-05, 1e-05, 2.5e-07, -1.5e-05, 0.0001, 1e16, 1e22, -0.0, 0.0, 100.6, 1 / 3]
)
_ints = st.integers(min_value=-(2**70), max_value=2**70)
_text = st.lists(
    st.sampled_from(
        [
            "a",
            "Z",
            "é",
            "😀",
            "\x00",
            "\x1f",
            "\x7f",
            '"',
            "\\",
            "/",
            "e-",
            "0.0000",
            "null",
            ":",
            "\n",
        ]
    ),
    max_size=4,
).map("".join)
_json: Any = st.recursive(
    st.none() | st.booleans() | _ints | _floats | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=1500, deadline=None)
@given(document=_json)
def test_the_fast_digest_is_the_canonical_digest(document: Any) -> None:
    assert json_digest(document) == canonical_digest(document)


def test_parsed_requests_take_the_fast_path_and_agree() -> None:
    """The bodies the service is sent (plain ASCII FHIR JSON) agree, and are not the slow path's
    by accident: orjson's text is what was hashed."""
    import hashlib

    import orjson

    body = json.loads(
        '{"hook":"patient-view","context":{"patientId":"p1"},"prefetch":{"obs":{"resourceType":'
        '"Observation","id":"o1","valueQuantity":{"value":100.6,"unit":"[degF]"},'
        '"meta":{"profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-vital-signs"]}}}}'
    )
    fast = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
    assert json_digest(body) == canonical_digest(body) == fast


def test_what_orjson_writes_otherwise_is_digested_as_json_writes_it() -> None:
    for value in (9.9e-05, 2.5e-07, math.nan, math.inf, "é", "\x7f", 2**64):
        document = {"value": value, "list": [value]}
        assert json_digest(document) == canonical_digest(document), value


def test_values_that_are_not_json_are_digested_as_json_writes_them() -> None:
    from dataclasses import dataclass
    from datetime import UTC, datetime
    from decimal import Decimal

    @dataclass
    class Point:
        x: int

    for value in (datetime(2026, 1, 2, 3, 4, tzinfo=UTC), Decimal("1.5"), Point(1)):
        document = {"value": value}
        assert json_digest(document) == canonical_digest(document), value

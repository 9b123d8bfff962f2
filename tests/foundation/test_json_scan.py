"""The byte scan in front of the storability walk (``app.json_input``): it may only clear a
document the walk would clear, and it clears the bodies EHRs send."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.json_input import MAX_JSON_DEPTH, JsonRefused, _fine, _fine_bytes, loads

FIXTURES = Path(__file__).resolve().parents[2] / "examples"

_text = st.sampled_from(["a", "\x00", "\ud800", "\udfff", "é", '"]', "\\", "\\u0000", "{[", "😀"])
_json: Any = st.recursive(
    st.none() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(value=_json, ascii_only=st.booleans(), depth=st.sampled_from([1, 2, 3, 5, 100]))
def test_the_scan_never_clears_what_the_walk_refuses(
    value: Any, ascii_only: bool, depth: int
) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    decoded = json.loads(raw)
    if _fine_bytes(raw, depth):
        assert _fine(decoded, depth)


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"context": {"note": "a\\u0000b"}}', "context.note"),
        (b'{"context": {"note": "\\ud83d"}}', "context.note"),
        (b'{"context": {"note": "\xed\xa0\xbd"}}', "context.note"),
        (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "[0]" * MAX_JSON_DEPTH),
    ],
)
def test_what_the_scan_cannot_clear_is_refused_by_name(raw: bytes, where: str) -> None:
    with pytest.raises(JsonRefused) as refused:
        loads(raw)
    assert refused.value.where == where


def test_the_scan_clears_real_requests_without_a_walk() -> None:
    bodies = sorted(FIXTURES.rglob("*.json"))
    assert bodies
    for path in bodies:
        raw = path.read_bytes()
        assert _fine_bytes(raw, MAX_JSON_DEPTH), path
        # and a body exactly at the depth limit is cleared, one deeper is not
    deep = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert _fine_bytes(deep, MAX_JSON_DEPTH)
    assert not _fine_bytes(b"[" + deep + b"]", MAX_JSON_DEPTH)


def test_objects_and_lists_nest_alike() -> None:
    def nested(depth: int) -> bytes:
        value: Any = "x"
        for level in range(depth):
            value = {"k": value} if level % 2 else [value]
        return json.dumps(value).encode()

    assert _fine_bytes(nested(MAX_JSON_DEPTH), MAX_JSON_DEPTH)
    assert not _fine_bytes(nested(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)
    with pytest.raises(JsonRefused):
        loads(nested(MAX_JSON_DEPTH + 1))


def test_a_body_in_utf16_is_walked_not_cleared_by_the_scan() -> None:
    """json.loads reads UTF-16 and UTF-32 bodies too; the scan reads bytes as UTF-8, so such a
    body goes to the walk, which refuses what it holds."""
    body = '{"context": {"note": "a\\u0000b"}}'.encode("utf-16")
    assert not _fine_bytes(body, MAX_JSON_DEPTH)
    with pytest.raises(JsonRefused):
        loads(body)

"""One canonical JSON digest, so the same document hashes the same wherever it is recorded."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

#: ``json.dumps(…, sort_keys=True, separators=(",", ":"), default=str)``, its encoder built
#: once (``json.dumps`` builds a new one per call when given any option)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode

#: where orjson's compact, sorted text of parsed JSON may differ from ``_CANONICAL``'s: a value
#: that is a float below 1e-4 (``0.000099`` or ``2.5e-7`` for ``9.9e-05`` and ``2.5e-07``) or
#: was not finite (``null`` for ``NaN``). Each is found by its literal bytes, then looked at: inside
#: an object or a list a value follows a colon, a comma or an opening bracket (the same bytes
#: inside a string only send the document to the slow path)
_HINTS = (b"0.0000", b"e-", b"null")
_BEFORE_VALUE = frozenset(b":,[")
_IN_NUMBER = frozenset(b"0123456789.-")


def _may_differ(text: bytes) -> bool:
    for hint in _HINTS:
        at = text.find(hint)
        while at >= 0:
            start = at
            while start > 0 and text[start - 1] in _IN_NUMBER:
                start -= 1  # back to where the number (or the bytes that look like one) begins
            if start > 0 and text[start - 1] in _BEFORE_VALUE and (hint != b"e-" or start < at):
                return True
            at = text.find(hint, at + 1)
    return False


#: a date, time or dataclass, which orjson writes its own way, goes to ``_not_json`` as any other
#: value orjson cannot write does: the slow path. (An ``Enum`` member orjson writes as its value,
#: ``json`` as ``str()`` of it: parsed JSON holds none, and the callers pass parsed JSON only.)
#: The equality rests on orjson's number format: the version pinned in requirements/ is the one
#: ``tests/foundation/test_json_digest.py`` holds to it
_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _not_json(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def canonical_digest(document: Any) -> str:
    """Hex sha256 of ``document`` as sorted, compact JSON (values JSON cannot hold as text)."""
    return hashlib.sha256(_CANONICAL(document).encode()).hexdigest()


def json_digest(document: Any) -> str:
    """:func:`canonical_digest` of a document ``json.loads`` produced (dicts, lists, strings,
    numbers, booleans, null): the same digest, from orjson's encoder (ten times faster) when its
    text is certainly the same bytes, else from ``json``'s. orjson writes non-ASCII text and the
    DEL character unescaped, small floats in another form and non-finite ones as null, and
    refuses integers beyond 64 bits: each sends the document to ``json``."""
    try:
        text = orjson.dumps(document, option=_OPTIONS, default=_not_json)
    except TypeError:
        return canonical_digest(document)
    if text[:1] not in (b"{", b"[") or not text.isascii() or b"\x7f" in text:
        return canonical_digest(document)  # a bare value, or text orjson writes its own way
    if _may_differ(text):
        return canonical_digest(document)
    return hashlib.sha256(text).hexdigest()

"""JSON from outside (request bodies, FHIR answers, JWT parts), decoded so that it can be stored.

Whatever the service decodes it also walks (validation, digests, hydration) and may store
(JSONB on PostgreSQL). Three things in otherwise valid JSON break that far from where they came
in, as a 500 or as a "retry later" that never succeeds:

- nesting deeper than any FHIR resource needs (``RecursionError`` in a recursive walk);
- a NUL character (PostgreSQL stores it neither in text nor in JSONB, and its error message
  would quote the surrounding patient text into the log);
- an unpaired UTF-16 surrogate (``"\\ud800"``: not encodable as UTF-8, refused by PostgreSQL).

:func:`loads` refuses them at the door with :class:`JsonRefused`, whose ``where`` is the JSON
path of the first offending value, so the caller can answer a 4xx naming it. The walk is
iterative: it cannot itself run out of stack. A body received as bytes is first scanned as
bytes (:func:`_fine_bytes`, in C: byte searches and replaces): only one the scan cannot clear
is walked.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Deepest nesting accepted. FHIR resources nest a few tens of levels at most (Bundle → entry →
#: resource → contained → extension …); a Python recursion limit is 1,000.
MAX_JSON_DEPTH = 100


class JsonRefused(ValueError):
    """Valid JSON the service will not take in; ``where`` is the path of the offending value."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.message = message
        self.where = where


def _join(path: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else part


def _storable(text: str) -> str | None:
    """Why ``text`` cannot be stored, or None."""
    if "\x00" in text:
        return "contains a NUL character (U+0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired UTF-16 surrogate"
    return None


def _fine(value: Any, max_depth: int) -> bool:
    """Whether nothing in ``value`` is nested too deep or unstorable: the same walk as
    :func:`check` without building a path for every value (a request body has hundreds);
    only a refused document is walked again for the path of what is refused."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item or (not item.isascii() and _storable(item) is not None):
                return False
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= max_depth:
            return False
        if isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key or (not key.isascii() and _storable(key) is not None):
                    return False
                stack.append((child, depth + 1))
        else:
            stack.extend((child, depth + 1) for child in item)
    return True


#: what may spell a NUL or a lone surrogate in JSON bytes: a ``\u0000`` escape, a ``\uD8xx`` …
#: ``\uDFxx`` escape, or a surrogate encoded in UTF-8 (which ``json.loads`` decodes with
#: ``surrogatepass``). Raw control characters are not JSON. A match only sends the document
#: to the walk, which decides. Each is searched only when its first bytes occur at all.
_SUSPECT_ESCAPE = re.compile(rb"\\u0000|\\u[dD][89a-fA-F]")
_SUSPECT_UTF8 = re.compile(rb"\xed[\xa0-\xbf]")
#: a backslash and the character it escapes (``\uXXXX`` leaves plain hex digits behind)
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: an object's braces as a list's brackets: nesting is the same whatever the container
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")


def _fine_bytes(raw: bytes, max_depth: int) -> bool:
    """Whether the JSON document ``raw`` (already decoded once: it is valid JSON) certainly
    holds no unstorable string and nests at most ``max_depth`` containers. Its escapes removed,
    every quote delimits a string, so the text between every other pair of quotes is the
    document's structure; of it the brackets are kept (braces as brackets), and each pass
    removes the innermost containers, as many passes as it nests. False says only "walk it"."""
    if b"\x00" in raw:
        return False  # UTF-16 or UTF-32 (json.loads reads them too), whose bytes this scan is not
    if b"\\u" in raw and _SUSPECT_ESCAPE.search(raw) is not None:
        return False
    if b"\xed" in raw and _SUSPECT_UTF8.search(raw) is not None:
        return False
    text = _ESCAPE.sub(b"", raw) if b"\\" in raw else raw
    brackets = b"".join(text.split(b'"')[0::2]).translate(_AS_BRACKETS, _NOT_BRACKETS)
    for _ in range(max_depth):
        if not brackets:
            return True
        brackets = brackets.replace(b"[]", b"")
    return not brackets


def check(value: Any, *, where: str = "", max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JsonRefused` for the first value nested deeper than ``max_depth`` or
    holding a string (key or value) that cannot be stored; ``where`` prefixes the paths."""
    if _fine(value, max_depth):
        return
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = _storable(item)
            if problem is not None:
                raise JsonRefused(f"{path or 'the document'} {problem}", path)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= max_depth:
            raise JsonRefused(
                f"{path or 'the document'} is nested more than {max_depth} levels deep", path
            )
        if isinstance(item, dict):
            for key, child in item.items():
                problem = _storable(key)
                if problem is not None:
                    raise JsonRefused(f"a key in {path or 'the document'} {problem}", path)
                stack.append((child, _join(path, key), depth + 1))
        else:
            stack.extend((child, _join(path, i), depth + 1) for i, child in enumerate(item))


def loads(raw: str | bytes, *, where: str = "", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode ``raw`` and :func:`check` it. Raises ``ValueError`` for text that is not JSON and
    :class:`JsonRefused` (a ``ValueError`` too) for JSON the service will not take in."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonRefused(
            f"{where or 'the document'} is nested more than {max_depth} levels deep", where
        ) from None
    if isinstance(raw, bytes) and _fine_bytes(raw, max_depth):
        return value
    check(value, where=where, max_depth=max_depth)
    return value

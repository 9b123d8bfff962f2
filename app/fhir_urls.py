"""What a FHIR server's URL may hold: the one rule the hook's ``fhirServer`` check and the
FHIR client's paging share (a ``next`` link must stay under the server it was read from)."""

from __future__ import annotations

from urllib.parse import unquote


def path_escapes(path: str) -> bool:
    """Whether a URL path holds a segment a server may resolve to another place: ``.`` or
    ``..`` (also percent-encoded, ``%2e%2e``), or an encoded ``/`` or ``\\`` inside a segment.
    Such a path can pass a prefix check and still reach outside the prefix."""
    for segment in path.split("/"):
        decoded = unquote(segment)
        if decoded in (".", "..") or "/" in decoded or "\\" in decoded:
            return True
    return False

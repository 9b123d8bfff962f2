"""One canonical JSON digest, so the same document hashes the same wherever it is recorded."""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: ``json.dumps(…, sort_keys=True, separators=(",", ":"), default=str)``, its encoder built
#: once (``json.dumps`` builds a new one per call when given any option)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode


def canonical_digest(document: Any) -> str:
    """Hex sha256 of ``document`` as sorted, compact JSON (values JSON cannot hold as text)."""
    return hashlib.sha256(_CANONICAL(document).encode()).hexdigest()

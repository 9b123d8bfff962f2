"""One canonical JSON digest, so the same document hashes the same wherever it is recorded."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_digest(document: Any) -> str:
    """Hex sha256 of ``document`` as sorted, compact JSON (values JSON cannot hold as text)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()

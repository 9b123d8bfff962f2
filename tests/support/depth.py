"""How many examples a property test draws: the number a test names is what ``make test`` runs
(the examples its bugs needed); ``make test-deep`` (``HORISMOS_TEST_DEEP=1``) runs ten times as
many, for a scheduled run that has the time."""

from __future__ import annotations

import os

DEEP = os.environ.get("HORISMOS_TEST_DEEP", "").strip().lower() in {"1", "true", "yes"}
DEEP_FACTOR = 10


def examples(n: int) -> int:
    """``n`` examples, or ``DEEP_FACTOR`` times as many in a deep run."""
    return n * DEEP_FACTOR if DEEP else n

"""The installed HL7 Terminology package (``make terminology``), loaded once for these tests."""

from __future__ import annotations

import pytest

from app.terminology import Terminology, load_terminology


@pytest.fixture(scope="session")
def terminology() -> Terminology:
    return load_terminology()

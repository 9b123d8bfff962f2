"""Settings as an operator writes them in the environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.settings import Settings, TrustedIssuer


def test_defaults_need_no_configuration() -> None:
    settings = Settings()
    assert settings.database_url == "sqlite:///./horismos.db"
    assert settings.ontology_paths == []
    assert settings.bridge_model is None
    assert settings.trusted_issuers == []
    assert settings.fhir_timeout_seconds == 5


def test_environment_variables_with_the_prefix_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    issuers = [
        {"iss": "https://ehr.example", "jwks_url": "https://ehr.example/jwks"},
        {"iss": "https://other.example", "jwks": {"keys": []}, "allowed_jku": ["https://k"]},
    ]
    monkeypatch.setenv("HORISMOS_DATABASE_URL", "postgresql://u@db:5432/h")
    monkeypatch.setenv("HORISMOS_TRUSTED_ISSUERS", json.dumps(issuers))
    monkeypatch.setenv("HORISMOS_PUBLIC_BASE_URL", "https://cds.example/")
    monkeypatch.setenv("HORISMOS_CORS_ORIGINS", "https://a.example, https://b.example")
    monkeypatch.setenv("HORISMOS_ONTOLOGY_PATHS", '["a.ttl", "b.ttl"]')
    monkeypatch.setenv("HORISMOS_ANTHROPIC_API_KEY", "sk-secret")
    settings = Settings()
    assert settings.database_url == "postgresql://u@db:5432/h"
    assert settings.trusted_issuers[0] == TrustedIssuer(
        iss="https://ehr.example", jwks_url="https://ehr.example/jwks"
    )
    assert settings.trusted_issuers[1].allowed_jku == ["https://k"]
    assert settings.public_base_url == "https://cds.example"
    assert settings.cors_origins == ["https://a.example", "https://b.example"]
    assert settings.ontology_paths == [Path("a.ttl"), Path("b.ttl")]
    assert settings.anthropic_api_key is not None
    assert "sk-secret" not in repr(settings)


def test_a_malformed_issuer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORISMOS_TRUSTED_ISSUERS", '[{"jwks_url": "https://x"}]')
    with pytest.raises(ValidationError, match="iss"):
        Settings()

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


def test_mcp_servers_are_read_as_json_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    servers = {
        "tickets": {"url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer t"}},
        "calc": {"command": ["calc-mcp", "--stdio"], "env": {"K": "v"}, "cwd": "/srv"},
    }
    monkeypatch.setenv("HORISMOS_MCP_SERVERS", json.dumps(servers))

    settings = Settings()

    assert settings.mcp_servers["tickets"].headers == {"Authorization": "Bearer t"}
    assert settings.mcp_servers["calc"].command == ["calc-mcp", "--stdio"]
    assert "Bearer" not in repr(settings.mcp_servers)  # headers may carry a secret


@pytest.mark.parametrize(
    ("servers", "says"),
    [
        ({"a": {}}, 'exactly one of "url" and "command"'),
        ({"a": {"url": "https://x/mcp", "command": ["x"]}}, 'exactly one of "url" and "command"'),
        ({"a": {"url": "ftp://x/mcp"}}, "absolute http(s) URL"),
        ({"a": {"command": []}}, "must name the program"),
        ({"a": {"command": ["x"], "headers": {"h": "v"}}}, '"headers" apply to a "url"'),
        ({"a": {"url": "https://x/mcp", "cwd": "/"}}, 'apply to a "command" server only'),
        ({"a/b": {"url": "https://x/mcp"}}, "cannot be the NAME of mcp://NAME/tool"),
        ({"a": {"url": "https://x/mcp", "token": "t"}}, "Extra inputs are not permitted"),
    ],
)
def test_an_mcp_server_that_cannot_be_used_is_refused(
    servers: dict[str, object], says: str
) -> None:
    with pytest.raises(ValidationError) as info:
        Settings(mcp_servers=servers)
    assert says in str(info.value)

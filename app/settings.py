"""Service configuration: one ``Settings`` read once from ``HORISMOS_*`` environment variables.

Tests and embedders build ``Settings(...)`` directly and pass it to ``create_app``; only the
process entry points call ``get_settings()``. docs/configuration.md documents every field.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///./horismos.db"
#: A shorter link secret could be guessed offline from one signed link.
MIN_LINK_SECRET_LENGTH = 32


class TrustedIssuer(BaseModel):
    """A CDS client allowed to call the service: its JWT ``iss`` and where its keys come from.

    ``jwks`` is an inline JWK Set; ``jwks_url`` is fetched; ``allowed_jku`` lists the ``jku``
    header values this issuer may point at (anything else is rejected).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    iss: str
    jwks_url: str | None = None
    jwks: dict[str, Any] | None = None
    allowed_jku: list[str] = Field(default_factory=list)


class McpServer(BaseModel):
    """One MCP server a ``mcp://NAME/tool`` binding may name: ``url`` (streamable HTTP, with
    optional ``headers`` such as an Authorization) or ``command`` (a stdio server the service
    starts, with optional ``env`` and ``cwd``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    command: list[str] | None = None
    env: dict[str, str] | None = Field(default=None, repr=False)
    cwd: str | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.url is None) == (self.command is None):
            raise ValueError('an MCP server needs exactly one of "url" and "command"')
        if self.url is not None:
            parsed = urlsplit(self.url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError(f'"url" must be an absolute http(s) URL, got {self.url!r}')
            if self.env is not None or self.cwd is not None:
                raise ValueError('"env" and "cwd" apply to a "command" server only')
        if self.command is not None:
            if not self.command or not self.command[0]:
                raise ValueError('"command" must name the program to run')
            if self.headers:
                raise ValueError('"headers" apply to a "url" server only')
        return self


_MCP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _split_list(value: object) -> object:
    """Accept a JSON list or a comma-separated string for list settings given as text."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """Everything the service reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="HORISMOS_", extra="ignore", frozen=True)

    database_url: str = DEFAULT_DATABASE_URL
    #: How long opening a database connection may take, in seconds.
    database_connect_timeout_seconds: float = Field(default=5.0, gt=0)
    #: How long one statement (or a wait for a row lock) may take on PostgreSQL, in seconds.
    database_statement_timeout_seconds: float = Field(default=15.0, gt=0)
    #: How long a request waits for a free pooled connection, in seconds.
    database_pool_timeout_seconds: float = Field(default=5.0, gt=0)
    #: Turtle files loaded as one ontology; empty means the bundled ``ontologies/*.ttl``.
    ontology_paths: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    #: Folders of FHIR definitions (ActivityDefinition, PlanDefinition, Questionnaire JSON)
    #: that ``$apply`` and a plan's ``definitionCanonical`` find; empty: none.
    definition_paths: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    #: The folder holding the installed FHIR terminology packages; unset means this
    #: installation's ``terminology/packages`` (where ``make terminology`` puts them).
    terminology_packages: Path | None = None
    #: A FHIR terminology server's base URL: value-set membership the deployment's own files do
    #: not settle is asked there. Unset means the embedded terminology (package and files only).
    terminology_url: str | None = None
    #: The bearer token sent to ``terminology_url``, if it needs one.
    terminology_token: SecretStr | None = None
    #: How long one terminology call may take, in seconds (never past the hook's deadline).
    terminology_timeout_seconds: float = Field(default=2.0, gt=0)
    #: ``mock:FILE.json`` or ``claude:MODEL``; unset means no LLM Bridge (fallbacks apply).
    bridge_model: str | None = None
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    trusted_issuers: list[TrustedIssuer] = Field(default_factory=list)
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: The externally visible base URL (behind a proxy), used in links the service hands out.
    public_base_url: str | None = None
    #: Deadline for all FHIR traffic of one hook call, in seconds.
    fhir_timeout_seconds: float = Field(default=5.0, gt=0)
    #: URL prefixes a hook call's ``fhirServer`` must start with; empty accepts any (open mode).
    allowed_fhir_servers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: Largest request body the CDS routes read, in bytes (larger: 413).
    max_request_bytes: int = Field(default=5_000_000, gt=0)
    #: Largest FHIR answer one prefetch key may read, all its pages together, in bytes; a search
    #: that reaches it is read as *truncated* (an incomplete input), not as the whole answer.
    max_fhir_response_bytes: int = Field(default=20_000_000, gt=0)
    #: Most searchset pages one prefetch key follows; a search with more is *truncated*.
    max_fhir_pages: int = Field(default=10, gt=0)
    #: The longest one hook call may take, end to end, before it is answered 503 (the run
    #: itself carries on and stores its answer for a retry of the same hookInstance).
    hook_deadline_seconds: float = Field(default=10.0, gt=0)
    #: How long an order-sign answer computed ahead, at the order-select call for the same
    #: patient and draft orders, may answer the order-sign call (``app.cds.ahead``), in
    #: seconds; 0: nothing is computed ahead.
    answer_ahead_seconds: float = Field(default=300.0, ge=0)
    #: How long a claimed run's lease lasts; its process renews it while the run works, and a
    #: retry may take the run over once it has expired (the process died).
    run_lease_seconds: float = Field(default=15.0, ge=1)
    #: How often pending commit effects are reconciled; 0 disables the background loop.
    reconcile_interval_seconds: float = Field(default=60.0, ge=0)
    #: Signs the card's link to a run's record (HMAC-SHA256) so a browser can open that one
    #: record without a client JWT until the link expires; unset: plain links.
    link_secret: SecretStr | None = None
    #: How long a signed card link stays valid, in seconds.
    link_ttl_seconds: int = Field(default=86_400, gt=0)
    #: How long runs are kept after their last activity (``90d``, ``P90D``); the periodic
    #: task purges older ones. Unset: nothing is purged automatically.
    retention_period: str | None = None
    #: The longest a client JWT may live (``exp`` after ``iat`` and after now), in seconds.
    max_token_lifetime_seconds: int = Field(default=300, gt=0)
    #: MCP servers by the name ``mcp://NAME/tool`` bindings use (a JSON object).
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict)

    #: names that hold the approver role for rule changes (``horismos change approve``); over
    #: HTTP the role is the client JWT's ``horismos/changes.approve`` scope
    change_approvers: list[str] = Field(default_factory=list)
    #: what the sandboxed replay of a change may use: address space (MB) and CPU seconds
    change_sandbox_memory_mb: int = Field(default=3072, ge=256)
    change_sandbox_cpu_seconds: int = Field(default=300, ge=5)
    #: The IANA time zone cards and decision pages show times in (``Europe/Paris``).
    timezone: str = "UTC"

    @field_validator(
        "ontology_paths", "definition_paths", "cors_origins", "allowed_fhir_servers", mode="before"
    )
    @classmethod
    def _lists_from_text(cls, value: object) -> object:
        return _split_list(value)

    @field_validator("mcp_servers")
    @classmethod
    def _mcp_names_are_hosts(cls, value: dict[str, McpServer]) -> dict[str, McpServer]:
        bad = [name for name in value if not _MCP_NAME.match(name)]
        if bad:
            raise ValueError(
                f"HORISMOS_MCP_SERVERS: {bad} cannot be the NAME of mcp://NAME/tool "
                "(letters, digits, '.', '_', '-')"
            )
        return value

    @field_validator("public_base_url")
    @classmethod
    def _public_base_url_is_absolute(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None  # an empty variable means unset
        parsed = urlsplit(value.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query:
            raise ValueError(
                "HORISMOS_PUBLIC_BASE_URL must be an absolute http(s) URL without a query, "
                f"e.g. https://cds.example.org; got {value!r}"
            )
        return value.strip().rstrip("/")

    @model_validator(mode="after")
    def _audience_needs_a_public_base_url(self) -> Settings:
        # Without it the JWT's aud would be compared with a URL built from the request's Host
        # (and X-Forwarded-*) headers, which the caller chooses: any audience would pass.
        if self.trusted_issuers and not self.public_base_url:
            raise ValueError(
                "HORISMOS_TRUSTED_ISSUERS is set but HORISMOS_PUBLIC_BASE_URL is not: client "
                "JWTs are checked against the service's own URL, which the service must be told "
                "(never taken from the request's Host header)"
            )
        return self

    @field_validator("retention_period")
    @classmethod
    def _retention_is_a_duration(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from app.store.retention import parse_retention

        try:
            parse_retention(value)
        except ValueError as exc:
            raise ValueError(f"HORISMOS_RETENTION_PERIOD: {exc}") from None
        return value.strip()

    @field_validator("timezone")
    @classmethod
    def _timezone_is_known(cls, value: str) -> str:
        name = value.strip() or "UTC"
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"HORISMOS_TIMEZONE: {value!r} is not an IANA time zone this system knows "
                "(e.g. Europe/Paris, America/New_York, UTC)"
            ) from None
        return name

    @property
    def zone(self) -> ZoneInfo:
        """The time zone times are shown in (``timezone``)."""
        return ZoneInfo(self.timezone)

    @field_validator("link_secret")
    @classmethod
    def _link_secret_strong_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None  # an empty variable means unset
        if len(value.get_secret_value()) < MIN_LINK_SECRET_LENGTH:
            raise ValueError(
                f"HORISMOS_LINK_SECRET must be at least {MIN_LINK_SECRET_LENGTH} characters"
            )
        return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once."""
    return Settings()

"""SMART on FHIR resource scopes (v1 and v2), and whether a granted set permits a write.

Grammar (SMART App Launch 1.0 and 2.x)::

    scope       = level "/" type "." permissions [ "?" query ]
    level       = "patient" | "user" | "system"
    type        = FHIR resource type | "*"
    permissions = "read" | "write" | "*"                (v1)
                | [ "c" ] [ "r" ] [ "u" ] [ "d" ] [ "s" ] (v2: at least one, in this order)

v1 ``read`` means v2 ``rs``, ``write`` means ``cud``, ``*`` means ``cruds``. A v2 scope with a
``?query`` only grants resources matching the query; the adapter cannot evaluate that against a
target, so such a grant never satisfies a requirement (fail closed). Scopes that are not resource
scopes (``openid``, ``launch/patient``, ``offline_access``…) are ignored, as are malformed ones.

A required scope (``horis:scope`` on a tool) is satisfied by a granted scope with the *same*
level — ``patient/``, ``user/`` and ``system/`` are different access contexts, not a hierarchy —
whose type is the required type or ``*``, and whose permissions include every permission the
operation needs that the required scope names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from app.ontology.tools import AdapterCommit

Level = Literal["patient", "user", "system"]
Permission = Literal["c", "r", "u", "d", "s"]

_V2_ORDER = "cruds"
_V1 = {"read": frozenset("rs"), "write": frozenset("cud"), "*": frozenset(_V2_ORDER)}
_SCOPE = re.compile(
    r"^(?P<level>patient|user|system)/(?P<type>\*|[A-Z][A-Za-z]+)"
    r"\.(?P<perms>read|write|\*|c?r?u?d?s?)(?:\?(?P<query>.+))?$"
)
#: What each operation needs from a scope.
OPERATION_PERMISSIONS: dict[str, frozenset[str]] = {
    "create": frozenset("c"),
    "read": frozenset("r"),
    "update": frozenset("u"),
    "delete": frozenset("d"),
    "search": frozenset("s"),
}


@dataclass(frozen=True, kw_only=True)
class ResourceScope:
    """One parsed resource scope."""

    level: Level
    resource_type: str  # a resource type or "*"
    permissions: frozenset[str]  # subset of "cruds"
    query: str | None = None
    version: Literal[1, 2] = 2

    def covers(self, other: ResourceScope) -> bool:
        """Whether this grant allows everything ``other`` allows (same level, no query)."""
        return (
            self.query is None
            and self.level == other.level
            and self.resource_type in ("*", other.resource_type)
            and other.permissions <= self.permissions
        )


def parse_scope(text: str) -> ResourceScope | None:
    """The resource scope ``text`` denotes, or None when it is no (well-formed) resource scope
    (read once per distinct text of a usual length: every hook call's grant repeats the same
    few; a long one, which a client could vary to fill the cache, is read each time)."""
    return _scope(text) if len(text) <= _CACHED_SCOPE_LENGTH else _scope.__wrapped__(text)


#: Scopes up to this length are read once.
_CACHED_SCOPE_LENGTH = 256


@lru_cache(maxsize=1024)
def _scope(text: str) -> ResourceScope | None:
    match = _SCOPE.match(text.strip())
    if match is None or not match.group("perms"):
        return None
    perms = match.group("perms")
    if perms in _V1:
        if match.group("query") is not None:
            return None  # v1 has no query form
        permissions, version = _V1[perms], 1
    else:
        permissions, version = frozenset(perms), 2
    level: Level = match.group("level")  # type: ignore[assignment]
    return ResourceScope(
        level=level,
        resource_type=match.group("type"),
        permissions=permissions,
        query=match.group("query"),
        version=version,  # type: ignore[arg-type]
    )


def parse_granted(scope: str | None) -> tuple[ResourceScope, ...]:
    """The resource scopes in a space-separated ``fhirAuthorization.scope`` string."""
    parsed = (parse_scope(part) for part in (scope or "").split())
    return tuple(s for s in parsed if s is not None)


def required_for(declared: str, operation: str) -> ResourceScope:
    """What a commit needs: the declared scope narrowed to the operation's permissions.

    Raises ``ValueError`` when ``declared`` is no resource scope or does not include the
    operation at all (an ontology mistake: the tool could never commit).
    """
    scope = parse_scope(declared)
    if scope is None:
        raise ValueError(f"{declared!r} is not a SMART resource scope")
    if scope.resource_type == "*" or scope.query is not None:
        raise ValueError(f"{declared!r} must name one resource type and no query")
    needed = OPERATION_PERMISSIONS[operation]
    if not needed <= scope.permissions:
        raise ValueError(f"{declared!r} does not permit {operation}")
    return ResourceScope(
        level=scope.level, resource_type=scope.resource_type, permissions=needed, version=2
    )


def permits(granted: str | None, declared: str, operation: str) -> bool:
    """Whether the granted scope string allows ``operation`` under the ``declared`` scope."""
    required = required_for(declared, operation)
    return any(grant.covers(required) for grant in parse_granted(granted))


def may_write(granted: str | None, commit: AdapterCommit) -> bool:
    """Whether the granted scope string allows the write ``commit`` declares: its ``horis:scope``
    for a create, or for a change (an update or a delete)."""
    operation = "create" if commit.operation == "create" else "update"
    return permits(granted, commit.scope, operation)

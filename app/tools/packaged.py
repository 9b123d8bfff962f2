"""Tools shipped as installed packages, through the ``horismos.tools`` entry-point group.

A deployment ships its ``python:NAME`` and ``rust:NAME`` tools as an ordinary Python package
that declares one entry point per tool::

    [project.entry-points."horismos.tools"]
    mme_per_day = "horismos_opioid.tools:mme_per_day"

The entry point's name is the name a binding uses (``python:mme_per_day``, ``rust:mme_per_day``);
its object must be callable (a plain function taking the arguments as keyword arguments, or a
``@tool_aware`` one taking the whole ``ToolCall``). Nothing is imported until the host starts:
:func:`discover` loads every entry point of the group once and reports what it found, including
entry points that would not load, so a binding to a broken package is a load error that names
the package and why, and an unrelated broken package is listed rather than silently ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

log = logging.getLogger("horismos.tools")

GROUP = "horismos.tools"


@dataclass(frozen=True, kw_only=True)
class PackagedTool:
    """One entry point of the group: what a binding names and where it comes from."""

    name: str
    target: str  # "module:attribute"
    distribution: str | None  # "horismos-opioid 0.3.0", when the metadata says
    error: str | None = None  # why it did not load; None when it is registered

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": self.name,
            "target": self.target,
            "package": self.distribution,
        }
        if self.error is not None:
            body["error"] = self.error
        return body


@dataclass(frozen=True, kw_only=True)
class PackagedTools:
    """Every tool the installed packages offer: the callables by name, and the listing."""

    #: the loaded callables, and a stand-in that fails with the cause for each entry point that
    #: did not load (left out of equality and hashing: the listing determines them)
    registry: Mapping[str, Callable[..., Any]] = field(
        default_factory=dict, compare=False, hash=False
    )
    listing: tuple[PackagedTool, ...] = ()

    @property
    def broken(self) -> dict[str, PackagedTool]:
        """Entry points that did not load, by name."""
        return {t.name: t for t in self.listing if t.error is not None}

    def problems_for(self, bindings: Mapping[str, str]) -> list[tuple[str, str]]:
        """``(tool IRI, message)`` for every binding (tool IRI → binding) that names a broken
        entry point: the deployment asked for it, so it must not start without it."""
        broken = self.broken
        out: list[tuple[str, str]] = []
        for iri, binding in bindings.items():
            scheme, _, name = binding.partition(":")
            if scheme in ("python", "rust") and name in broken:
                entry = broken[name]
                out.append((iri, f"{binding} comes from {_origin(entry)}, which {entry.error}"))
        return out


def _origin(tool: PackagedTool) -> str:
    where = f"entry point {tool.name} = {tool.target}"
    return f"{where} of {tool.distribution}" if tool.distribution else where


def _distribution(entry: EntryPoint) -> str | None:
    dist = getattr(entry, "dist", None)
    if dist is None:
        return None
    return f"{dist.metadata['Name']} {dist.version}"


def discover(group: str = GROUP) -> PackagedTools:
    """Load every entry point of ``group``. Never raises: failures are in the listing.

    Two packages offering the same name register neither: which one a binding meant is not
    something to guess."""
    by_name: dict[str, list[EntryPoint]] = {}
    ordered = sorted(
        entry_points(group=group), key=lambda e: (e.name, e.value, _distribution(e) or "")
    )
    for entry in ordered:
        by_name.setdefault(entry.name, []).append(entry)
    registry: dict[str, Callable[..., Any]] = {}
    listing: list[PackagedTool] = []
    for name, entries in by_name.items():
        for index, entry in enumerate(entries):
            tool = PackagedTool(name=name, target=entry.value, distribution=_distribution(entry))
            error: str | None = None
            if len(entries) > 1:
                others = [_origin(t) for i, t in enumerate(_listed(entries)) if i != index]
                error = f"shares its name with {', '.join(others)}"
            else:
                try:
                    loaded = entry.load()
                except Exception as exc:  # any import failure of a third-party package
                    error = f"does not load ({type(exc).__name__}: {exc})"
                else:
                    if callable(loaded):
                        registry[name] = loaded
                    else:
                        error = f"is not callable (it is a {type(loaded).__name__})"
            if error is not None:
                registry[name] = _Unusable(f"{_origin(tool)} {error}")
                tool = PackagedTool(
                    name=name, target=entry.value, distribution=tool.distribution, error=error
                )
                log.error("tool %s %s", _origin(tool), error)
            listing.append(tool)
    if registry:
        log.info("registered tools from packages: %s", ", ".join(sorted(registry)))
    return PackagedTools(registry=registry, listing=tuple(listing))


class _Unusable:
    """Stands in for an entry point that did not load, so the ontology loader accepts a binding
    to it and the host refuses it with the real cause (:meth:`PackagedTools.problems_for`); if
    it is ever called anyway, the call fails with that cause."""

    def __init__(self, cause: str) -> None:
        self.cause = cause

    def __call__(self, **_: Any) -> Any:
        from app.tools.errors import ToolLoadError

        raise ToolLoadError(self.cause)


def _listed(entries: list[EntryPoint]) -> list[PackagedTool]:
    return [
        PackagedTool(name=e.name, target=e.value, distribution=_distribution(e)) for e in entries
    ]

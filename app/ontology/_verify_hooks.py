"""Verification of each CDS service against its hook: the hook, prefetch, and what is read.

- ``horis:hook`` is a hook of the CDS Hooks registry (``app.ontology.hooks``), or the service
  says ``horis:customHook true`` (and then names no registry hook);
- every ``{{token}}`` of a prefetch template is a prefetch token of that hook (its id-valued
  context fields) or a CDS Hooks 2.0 user token of a hook that has ``userId``; a custom hook's
  ``{{context.*}}`` tokens are not checked (its context is its own);
- every template is a read (``Type/id``) or a search (``Type?name=value&…``) of an R4B resource
  type. Search parameter names are not checked: the R4B models carry no search parameters;
- every ``{{context.X}}`` / ``{{prefetch.K…}}`` of a resource the workflow creates
  (``horis:Create``'s template) is a context field of the hook / a prefetch key of the service;
- every FHIR mapping of the focus class is fed: its ``horis:fromContext`` key is a context
  field of the hook, or a template reads its resource type; so is every ``horis:text`` source;
- a ``horis:answeredAhead`` service is on order-sign, its workflow and subflows call only
  ``horis:pure`` tools, ask no language model and never wait, and its deployment has no time
  check finer than a day (``horis:maxAge``, a window such as ``PT36H``).

A template whose token the hook cannot fill is skipped at run time as "no such data", and a
mapping no template feeds reads nothing: both would fail silently, every call.
"""

from __future__ import annotations

import re

from app.ontology._fhir_model import closest, closest_resource_type, is_resource_type
from app.ontology._typecheck import TypeChecker
from app.ontology.durations import parse_window
from app.ontology.hooks import HOOKS, USER_TOKENS, ContextField
from app.ontology.model import Ontology
from app.ontology.names import local_name
from app.ontology.outside import acts_outside
from app.ontology.services import CdsServiceDef, CombinedServiceDef, PrefetchTemplate
from app.ontology.workflows import (
    ActionStep,
)

_TOKEN = re.compile(r"\{\{(.*?)\}\}")
_NAME = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*$")
_QUERY = re.compile(r"^([A-Za-z]+)(?:/([^/?]+)|\?(.*))?$")


class HookChecker(TypeChecker):
    """The service-against-hook checks; ``run_hooks`` runs them all."""

    def run_hooks(self) -> None:
        for s in self.o.services.values():
            fields = self._hook(s)
            for t in s.prefetch:
                self._template(s, t, fields)
            self._fed(s, fields)
            self._writes(s, fields)
            if s.answered_ahead:
                self._ahead(s)
        for c in self.o.combined.values():  # its services' hooks are checked where they are
            self._hook(c)

    def _hook(self, s: CdsServiceDef | CombinedServiceDef) -> tuple[ContextField, ...] | None:
        """The hook's context fields; None for a custom (or unknown) hook."""
        fields = HOOKS.get(s.hook)
        if s.custom_hook:
            if fields is not None:
                self.add(
                    "hook",
                    s.iri,
                    f"{s.hook!r} is a hook of the CDS Hooks registry: remove horis:customHook",
                    "horis:customHook",
                )
            return None
        if fields is None:
            hint = closest(s.hook, HOOKS)
            self.add(
                "hook",
                s.iri,
                f"{s.hook!r} is not a hook of the CDS Hooks registry ("
                + ", ".join(HOOKS)
                + "), so no EHR would call it"
                + (f": did you mean {hint!r}?" if hint else "")
                + "; a hook of your own needs horis:customHook true",
                "horis:hook",
                suggestion=hint,
            )
        return fields

    # --- templates -------------------------------------------------------------------------

    def _template(
        self, s: CdsServiceDef, t: PrefetchTemplate, fields: tuple[ContextField, ...] | None
    ) -> None:
        where = f"horis:prefetch[{t.key}]"
        for raw in _TOKEN.findall(t.query):
            self._token(s, raw, fields, where)
        rest = _TOKEN.sub("x", t.query)
        found = _QUERY.match(rest)
        if found is None or "{{" in rest or "}}" in rest:
            self.add(
                "prefetch",
                s.iri,
                f"{t.query!r} is not a FHIR read (Type/{{{{context.patientId}}}}) or search "
                "(Type?name=value&…)",
                where,
            )
            return
        rtype, _rid, search = found.groups()
        if not is_resource_type(rtype):
            hint = closest_resource_type(rtype)
            self.add(
                "prefetch",
                s.iri,
                f"{rtype!r} is not a FHIR R4B resource type"
                + (f": did you mean {hint!r}?" if hint else ""),
                where,
                suggestion=hint,
            )
        for param in (search or "").split("&") if search else ():
            name, eq, _value = param.partition("=")
            if not (name and eq):
                self.add(
                    "prefetch",
                    s.iri,
                    f"search parameter {param!r} of {t.query!r} is not name=value",
                    where,
                )

    def _token(
        self,
        s: CdsServiceDef,
        raw: str,
        fields: tuple[ContextField, ...] | None,
        where: str,
    ) -> None:
        match = _NAME.match(raw)
        name = match.group(1) if match else raw
        tokens = [f"context.{f.name}" for f in fields or () if f.token]
        has_user = fields is None or any(f.name == "userId" for f in fields)
        valid = [*tokens, *(USER_TOKENS if has_user else ())]
        if match is not None:
            if name in USER_TOKENS and has_user:
                return
            if name.startswith("context.") and (fields is None and s.custom_hook):
                return
            if name in tokens:
                return
        if fields is None and not s.custom_hook:
            return  # the unknown hook is reported once, on horis:hook
        hint = closest(name, valid) or closest(f"context.{name}", valid)
        if name in USER_TOKENS:
            why = f"{s.hook} has no context.userId, from which {{{{{name}}}}} is derived"
        elif name.startswith("context.") and fields is not None:
            field = next((f for f in fields if f"context.{f.name}" == name), None)
            why = (
                f"context.{field.name} of {s.hook} is a collection, not a prefetch token"
                if field is not None
                else f"{s.hook} has no context field {name.removeprefix('context.')!r}"
            )
        else:
            why = "it is not a CDS Hooks prefetch token"
        self.add(
            "prefetch",
            s.iri,
            f"{{{{{raw}}}}} cannot be filled ({why}), so this key would always be empty"
            + (f": did you mean {{{{{hint}}}}}?" if hint else "")
            + f"; {s.hook} gives "
            + (", ".join(f"{{{{{v}}}}}" for v in valid) or "no tokens"),
            where,
            suggestion=f"{{{{{hint}}}}}" if hint else None,
        )

    def _writes(self, s: CdsServiceDef, fields: tuple[ContextField, ...] | None) -> None:
        """Every ``{{context.X}}`` and ``{{prefetch.K…}}`` in the body template of a resource
        the service's workflow creates names a context field of the hook and a prefetch key of
        the service: otherwise the resource would be written with an empty reference."""
        w = self.o.workflows.get(s.workflow)
        if w is None:
            return
        context = {f.name for f in fields or ()}
        keys = {t.key for t in s.prefetch}
        for step in w.steps.values():
            tool = self.o.tools.get(step.tool or "") if isinstance(step, ActionStep) else None
            if tool is None or tool.commits is None or not tool.commits.template:
                continue
            where = f"{local_name(tool.iri)} horis:template"
            for raw in _TOKEN.findall(tool.commits.template):
                for name in (n.strip() for n in raw.split("??")):
                    head, _, rest = name.partition(".")
                    field = rest.split(".", 1)[0]
                    if head == "context" and fields is not None and field not in context:
                        hint = closest(field, context)
                        why = f"{s.hook} has no context field {field!r}"
                    elif head == "prefetch" and field not in keys:
                        hint = closest(field, keys)
                        why = f"{local_name(s.iri)} has no prefetch key {field!r}"
                    else:
                        continue
                    self.add(
                        "prefetch",
                        s.iri,
                        f"{{{{{name}}}}} in the resource {step.name} creates cannot be filled "
                        f"({why}), so it would be written without it"
                        + (f": did you mean {head}.{hint}?" if hint else ""),
                        where,
                        suggestion=f"{head}.{hint}" if hint else None,
                    )

    def _ahead(self, s: CdsServiceDef) -> None:
        """``horis:answeredAhead``: an order-sign service, computed at order-select for a
        signature that may never come, so its workflow (and every subflow) acts on nothing
        outside: only ``horis:pure`` tools, no language model (text would leave the process
        for nothing), no wait (nobody resumes a run computed ahead)."""
        if s.hook != "order-sign":
            self.add(
                "service",
                s.iri,
                f"horis:answeredAhead is for order-sign services (answered ahead at "
                f"order-select); {local_name(s.iri)} is on {s.hook}",
                "horis:answeredAhead",
            )
            return
        for check in _finer_than_a_day(self.o):
            self.add(
                "service",
                s.iri,
                f"{local_name(s.iri)} is horis:answeredAhead, but {check}: an answer computed "
                "ahead is reused for the rest of its UTC day, so its verdicts on time may "
                "change only from one day to the next",
                "horis:answeredAhead",
            )
        for workflow, step, why in acts_outside(self.o, s.workflow):
            self.add(
                "service",
                s.iri,
                f"{local_name(s.iri)} is horis:answeredAhead, but {step.name} in "
                f"{local_name(workflow)} {why}: a run computed ahead must act on nothing "
                "outside",
                "horis:answeredAhead",
            )

    # --- what the templates and the context feed -------------------------------------------

    def _fed(self, s: CdsServiceDef, fields: tuple[ContextField, ...] | None) -> None:
        w = self.o.workflows.get(s.workflow)
        if w is None or w.focus is None:
            return
        fetched = {_type_of(t.query) for t in s.prefetch}
        context = {f.name for f in fields or ()}
        for p in self.o.properties_of(w.focus):
            for i, m in enumerate(p.from_fhir):
                at = f"{local_name(p.iri)} horis:fromFhir[{i + 1}]"
                if m.context_key is not None:
                    if fields is not None and m.context_key not in context:
                        hint = closest(m.context_key, context)
                        self.add(
                            "prefetch",
                            s.iri,
                            f"{at} reads context.{m.context_key}, which {s.hook} does not have"
                            + (f": did you mean {hint!r}?" if hint else "")
                            + f"; its context is {', '.join(sorted(context))}",
                            "horis:hook",
                            suggestion=hint,
                        )
                elif m.resource_type not in fetched and is_resource_type(m.resource_type):
                    self.add(
                        "prefetch",
                        s.iri,
                        f"{at} reads {m.resource_type} resources, but no prefetch template of "
                        f"this service reads {m.resource_type}, so {p.name} is never read: add "
                        f"one (e.g. {m.resource_type}?patient={{{{context.patientId}}}})",
                    )
        for i, t in enumerate(s.text):
            if t.resource_type not in fetched and is_resource_type(t.resource_type):
                self.add(
                    "prefetch",
                    s.iri,
                    f"horis:text reads {t.resource_type}, but no prefetch template of this "
                    f"service reads {t.resource_type}, so the run would have no text",
                    f"horis:text[{i + 1}]",
                )


def _finer_than_a_day(o: Ontology) -> list[str]:
    """The time checks of ``o`` whose verdict can change within a UTC day: a reading's
    ``horis:maxAge``, a window of a part of a day (``PT36H``)."""
    found = [
        f"{local_name(p.iri)} reads with horis:maxAge"
        for p in o.properties.values()
        if any(m.max_age is not None for m in p.from_fhir)
    ]
    conditions = [(r.name, c) for r in o.rules for c in r.when]
    for w in o.workflows.values():
        for step in w.steps.values():
            conditions.extend((step.name or w.name, c) for _pred, c in step.conditions())
    for where, c in conditions:
        if c.op not in _WINDOWS or not isinstance(c.value, str):
            continue
        duration = parse_window(c.value)
        if duration is not None and duration.seconds % 86400:
            found.append(f"{where} has the window {c.op} {c.value!r}, a part of a day")
    return found


_WINDOWS = ("withinPast", "atMostAgo", "atLeastAgo")


def _type_of(query: str) -> str:
    return re.split(r"[/?]", query.strip(), maxsplit=1)[0]

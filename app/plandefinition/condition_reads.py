"""What an applicability condition reads, and the expression it is evaluated as.

A condition of an authored plan reads the call's subject (``%subject.element``), its encounter
(``%encounter.``) or its practitioner (``%practitioner.``, the hook's user), one of them per
condition, and the ``$apply`` call's parameters as values (``%name``,
``app.plandefinition.condition_values``). :func:`reading` says which resource it is evaluated on
and the expression as evaluated there (``%subject.`` removed, each parameter a literal);
:func:`call_templates` the prefetch each call resource needs. Refused, naming the condition:
another variable, two call resources in one condition, a call resource inside parentheses (a
bare path in a function's argument names the item, not the resource), a comment or a quoted
identifier, ``single()`` (its error on several values would read as false), the clock (its
answer would change on replay), and a parameter on a plan served as a CDS service (a hook call
gives none).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.ontology.hooks import HOOKS
from app.plandefinition.activity import STRING_LITERAL
from app.plandefinition.condition_values import RESERVED, literal
from app.plandefinition.refusals import ApplyRefused

_CLOCK = re.compile(r"\b(now|today|timeOfDay)\s*\(")
#: A FHIRPath external constant: ``%name`` or ``%`any name```
_CONSTANT = re.compile(r"%(?:`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*))")


#: The prefetch template of each call resource a condition reads beside the subject
#: (``%encounter``, ``%practitioner``: the hook's encounter and user).
ENCOUNTER_TEMPLATE = "Encounter/{{context.encounterId}}"
PRACTITIONER_TEMPLATE = "Practitioner/{{userPractitionerId}}"
#: The call's resources a condition may read: the resource type each is, its prefetch key and
#: template (None: the patient, always prefetched), and how a message names it.
CONDITION_RESOURCES: dict[str, tuple[str, str | None, str]] = {
    "subject": ("Patient", None, "the subject"),
    "encounter": ("Encounter", ENCOUNTER_TEMPLATE, "the encounter"),
    "practitioner": ("Practitioner", PRACTITIONER_TEMPLATE, "the practitioner"),
}


@dataclass(frozen=True)
class Reading:
    """What one condition reads: the resource type it is evaluated on, the expression as
    evaluated there (``%subject.`` removed, each parameter a literal), the call resource it
    reads, and each ``$apply`` parameter it reads with the literal it reads."""

    path: str
    resource: str
    parameters: tuple[tuple[str, str], ...] = ()

    @property
    def resource_type(self) -> str:
        return CONDITION_RESOURCES[self.resource][0]


def reading(expression: str, where: str, values: Mapping[str, tuple[str, Any]] | None) -> Reading:
    """What a condition reads (the subject's Patient, the encounter or the practitioner) and
    the expression evaluated on that resource itself: each ``%subject.`` (``%encounter.``,
    ``%practitioner.``) that starts a path at the top level removed, refused where that would
    change its meaning; each other ``%name`` the ``$apply`` parameter of that name, as a literal
    (``values``: the call's parameters; None: a CDS service, whose calls give none)."""
    # string literals masked (same length), so nothing inside one is read or rewritten
    bare = STRING_LITERAL.sub(lambda m: "'" + "_" * (len(m.group(0)) - 2) + "'", expression)

    def refuse(why: str) -> ApplyRefused:
        return ApplyRefused(422, "not-supported", f"{where} {why} ({expression!r})", where)

    if _CLOCK.search(bare):
        raise refuse(
            "reads the clock: its answer would change when the run is replayed; state the "
            "date it compares with"
        )
    if re.search(r"\bsingle\s*\(", bare):
        # the FHIRPath engine answers single() on several items with an error object that a
        # comparison then reads as false: a confident no where the record has two values
        raise refuse("uses single(), whose error on several values would read as false")
    if "/*" in bare or "//" in bare:
        raise refuse("holds a comment, which this host does not compile")
    depth = 0
    #: (start, end, the call resource read, or None and the literal put in its place)
    cuts: list[tuple[int, int, str | None, str]] = []
    parameters: dict[str, str] = {}
    position = 0
    while position < len(bare):
        char = bare[position]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "`":
            raise refuse("holds a quoted identifier, which this host does not compile")
        elif char == "%":
            match = _CONSTANT.match(bare, position)
            name = (match.group(1) or match.group(2)) if match else ""
            if (
                match is None
                or name in RESERVED
                or name.startswith(("vs-", "ext-"))
                or ("`" in match.group(0) and name in CONDITION_RESOURCES)
            ):
                raise refuse(
                    f"reads {('%' + name) if name else 'a variable'}, which a condition here "
                    "does not read: it reads the subject, the encounter or the practitioner "
                    "(as %subject.element outside any parentheses) and the call's parameters"
                )
            if name in CONDITION_RESOURCES:
                if depth > 0 or not bare.startswith(f"%{name}.", position):
                    raise refuse(
                        f"reads %{name} in a way this host does not compile: a condition here "
                        f"reads {CONDITION_RESOURCES[name][2]} as %{name}.element outside any "
                        "parentheses"
                    )
                cuts.append((position, position + len(name) + 2, name, ""))
                position += len(name) + 2
                continue
            if values is None:
                raise refuse(
                    f"reads %{name}, a parameter of $apply: a CDS service is called without "
                    "parameters"
                )
            parameters[name] = literal(name, values)
            cuts.append((position, match.end(), None, parameters[name]))
            position = match.end()
            continue
        position += 1
    named = {name for _s, _e, name, _l in cuts}
    read = [name for name in CONDITION_RESOURCES if name in named]
    if len(read) > 1:
        first, second = (CONDITION_RESOURCES[n][2] for n in read[:2])
        raise refuse(f"reads both {first} and {second}: write one condition for each")
    name = read[0] if read else "subject"
    out, last = [], 0
    for start, end, _name, put in cuts:
        out.append(expression[last:start])
        out.append(put)
        last = end
    out.append(expression[last:])
    return Reading("".join(out), name, tuple(sorted(parameters.items())))


def call_templates(
    templates: list[tuple[str, str]], reads: set[str], hook: str | None, where: str
) -> list[tuple[str, str]]:
    """``templates`` and the prefetch of each call resource the conditions read (the
    encounter, the practitioner), or the refusal saying why a condition could read another
    resource than the call's."""
    for name in sorted(reads - {"subject"}):
        kind, template, _said = CONDITION_RESOURCES[name]
        assert template is not None
        searches = [
            key
            for key, query in templates
            if query != template and re.split(r"[/?]", query, maxsplit=1)[0] == kind
        ]
        if searches:
            # hydration reads every resource of the type the call carries: it could read another
            raise ApplyRefused(
                422,
                "not-supported",
                f"{where} has a condition reading %{name} beside an input that reads "
                f"{kind} resources ({searches[0]}): the condition could read another {name} "
                "than the call's",
                f"{where}.action.input",
            )
        if any(key == name for key, _q in templates):
            continue
        if (
            hook is not None
            and name == "encounter"
            and "encounterId" not in {f.name for f in HOOKS.get(hook, ())}
        ):
            raise ApplyRefused(
                422,
                "not-supported",
                f"{where} has a condition reading %encounter, and its hook {hook} names "
                f"no encounter",
                f"{where}.action.condition",
            )
        templates.append((name, template))
    return templates


__all__ = [
    "CONDITION_RESOURCES",
    "ENCOUNTER_TEMPLATE",
    "PRACTITIONER_TEMPLATE",
    "Reading",
    "call_templates",
    "reading",
]

"""A plan's applicability conditions decided by this host's rules, not by a second engine.

Each plan with FHIRPath applicability conditions is compiled into a deployment of the same
Turtle model every bundled service is declared in (:func:`compile_plan`), loaded and verified
as any deployment is, and run as a hook call for the subject through the hook service itself
(hydration, the interpreter, the proof), recorded in the run store like a served service's
``$apply`` (``origin`` apply; ``app.plandefinition.recorded``), its compiled Turtle kept for
replay:

- each condition is a boolean property of the patient read from the Patient resource by its
  FHIRPath expression (``%subject.`` removed: the expression is evaluated on the subject), or
  from the call's Encounter (``%encounter.``) or Practitioner (``%practitioner.``, the hook's
  user), the compiled service declaring their prefetch, so a resource without the element it
  reads leaves the condition **unknown**, never false; each ``$apply`` parameter it reads
  (``%name``) is written into it as a literal of the call's value
  (``app.plandefinition.condition_reads``, ``app.plandefinition.condition_values``), so the
  compiled deployment kept for replay says which value decided;
- each action with conditions has an ``applies`` property: true when every condition is true,
  false when one is false (two rules each);
- the workflow decides ``plan`` once every ``applies`` is assigned; a run that cannot (an
  unknown condition) ends undecided and names the inputs that kept it from deciding.

A ``start`` or ``stop`` condition says when the system carrying the plan out starts or stops an
action, after ``$apply``: it is not decided here but carried onto the RequestGroup's action as
written (``app.plandefinition.authored``), and refused on a plan served as a CDS service (a card
has no place for it).

What is refused, with the condition named: an expression not in FHIRPath, one reading what
``app.plandefinition.condition_reads`` does not compile (another variable, two call resources
in one condition, the clock …), and a compiled deployment that does not verify (an element R4
does not define, for instance).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rdflib import Literal

from app.deployments import Deployment, load_deployments
from app.ontology.request_kinds import FHIRPATH
from app.plandefinition.apply import APPLY_USER
from app.plandefinition.condition_reads import call_templates, reading
from app.plandefinition.refusals import ApplyRefused
from app.tools.packaged import PackagedTools

#: The IRI an authored plan's compiled deployment has, before the digest of its text.
COMPILED_PLAN = "https://horismos.dev/compiled-plan/"
_FOLDER: list[Path] = []  # this process's own folder of compiled plans, made when first needed


def _folder() -> Path:
    """Where this process writes compiled plans, one file per distinct plan text (its digest):
    a folder of its own (``mkdtemp``: private to the service's user), so no other process can
    put a file where a compiled plan is looked for."""
    if not _FOLDER or not _FOLDER[0].is_dir():  # first use, or removed by a /tmp cleaner
        _FOLDER[:] = [Path(tempfile.mkdtemp(prefix="horismos-plans-"))]
    return _FOLDER[0]


@dataclass(frozen=True)
class Decided:
    """Which conditioned actions apply (by their path in the plan, ``"0"``, ``"1.2"``: True,
    False, or None when undecided) and the run's decision or what kept it from deciding."""

    applies: dict[str, bool | None] = field(default_factory=dict)
    extension: dict[str, Any] | None = None


#: Condition kinds that say when an action starts or stops once the plan is carried out:
#: carried onto the RequestGroup, not decided by ``$apply``
TIMING_KINDS = ("start", "stop")


def applicability(action: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """(index, condition) of ``action``'s conditions that ``$apply`` decides: every one but a
    start or stop condition (a kind R4 does not define is refused when compiled)."""
    return [
        (j, c)
        for j, c in enumerate(action.get("condition") or ())
        if c.get("kind") not in TIMING_KINDS
    ]


def timing(action: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``action``'s start and stop conditions, as written."""
    return [c for c in action.get("condition") or () if c.get("kind") in TIMING_KINDS]


def _conditioned(actions: Any, prefix: str = "") -> list[tuple[str, str, Mapping[str, Any]]]:
    """(path, element, action) of every action at any depth with applicability conditions."""
    out = []
    for i, action in enumerate(actions or ()):
        path = f"{prefix}{i}"
        where = f"action[{path.replace('.', '].action[')}]"
        if applicability(action):
            out.append((path, where, action))
        out.extend(_conditioned(action.get("action"), f"{path}."))
    return out


def fhirpath_of(condition: Mapping[str, Any], at: str) -> str:
    """The condition's expression (``at``: the condition's element), or the refusal naming it
    when it is not FHIRPath: this host evaluates FHIRPath and its own rules, not CQL."""
    expression = condition.get("expression") or {}
    if expression.get("language") != FHIRPATH or not expression.get("expression"):
        raise ApplyRefused(
            422,
            "not-supported",
            f"{at} is not a FHIRPath expression ({expression.get('language')}: "
            f"{expression.get('expression')!r}): this host evaluates FHIRPath and its "
            "own rules, not CQL",
            f"{at}.expression",
        )
    return str(expression["expression"])


def refuse_timing(actions: Any, where: str = "PlanDefinition") -> None:
    """Refuse a start or stop condition on a plan served as a CDS service, naming it."""
    for i, action in enumerate(actions or ()):
        here = f"{where}.action[{i}]"
        for j, condition in enumerate(action.get("condition") or ()):
            if condition.get("kind") in TIMING_KINDS:
                at = f"{here}.condition[{j}]"
                raise ApplyRefused(
                    422,
                    "not-supported",
                    f"{at} is a {condition['kind']} condition: a CDS card shows its action now "
                    "and has no place for when it starts or stops; apply the plan with $apply, "
                    "which carries it onto the RequestGroup",
                    f"{at}.kind",
                )
        refuse_timing(action.get("action"), here)


def has_conditions(plan: Mapping[str, Any]) -> bool:
    return bool(_conditioned(plan.get("action")))


def turtle_literal(text: str) -> str:
    """``text`` as a Turtle string literal (rdflib's own escaping)."""
    return str(Literal(text).n3())


@dataclass(frozen=True)
class Served:
    """How a compiled plan is served as a CDS service: its id, its hook, its card
    declarations (Turtle ``horis:card`` nodes, ``:Decided`` and ``:Undecided`` their
    terminals, ``:applies_<path>`` the properties they may test)."""

    service_id: str
    hook: str
    title: str
    description: str
    #: the deployment's IRI
    iri: str
    cards: tuple[str, ...] = ()
    #: the page documenting the plan (its ``relatedArtifact`` of type documentation): the
    #: cards' source link
    documentation: str | None = None
    #: Turtle appended as it is (what every served plan offers beside its cards)
    extra: str = ""
    #: prefetch templates beside ``patient`` (key, query)
    prefetch: tuple[tuple[str, str], ...] = ()
    #: Turtle ``horis:systemAction`` nodes: the requests sent without the clinician
    system_actions: tuple[str, ...] = ()


def compile_plan(
    plan: Mapping[str, Any],
    where: str,
    served: Served | None = None,
    *,
    values: Mapping[str, tuple[str, Any]] | None = None,
) -> tuple[str, str]:
    """The Turtle deployment deciding ``plan``'s applicability conditions, and its service id
    (``served``: the service it is, else a ``patient-view`` service of its own to run on; a
    served plan's start and stop conditions are refused before, by
    ``app.plandefinition.services.compiled_service``). ``values``: the ``$apply`` call's
    parameters (``app.plandefinition.condition_values.typed_entries``) its conditions read as
    ``%name``; none given reads each as absent; a served plan's conditions read none."""
    conditioned = _conditioned(plan.get("action"))
    properties: list[str] = []
    given = None if served is not None else (values or {})
    #: the call resources the conditions read (the subject, the encounter, the practitioner)
    reads: set[str] = set()
    for path, element, action in conditioned:
        name = path.replace(".", "_")
        title = str(action.get("title") or action.get("description") or f"action {path}")
        conditions = []
        for j, condition in applicability(action):
            at = f"{where}.{element}.condition[{j}]"
            if condition.get("kind") != "applicability":
                raise ApplyRefused(
                    422,
                    "invalid",
                    f"{at} is of kind {condition.get('kind')!r}: R4 defines applicability, "
                    "start and stop",
                    f"{at}.kind",
                )
            written = fhirpath_of(condition, at)
            read = reading(written, f"{at}.expression", given)
            reads.add(read.resource)
            conditions.append(f":condition_{name}_{j}")
            said = f"{title}: {written}"
            if read.parameters:  # the values the call gave: which ones decided
                said += " (" + ", ".join(f"%{n} = {v[1:-1]}" for n, v in read.parameters) + ")"
            properties.append(
                f""":condition_{name}_{j} a horis:Property ;
    rdfs:label {turtle_literal(said)} ;
    horis:domain :Patient ; horis:range xsd:boolean ; horis:cardinality "0..1" ;
    horis:absentMeans horis:Unknown ;
    horis:fromFhir [ horis:resourceType {turtle_literal(read.resource_type)} ;
                     horis:fhirPath {turtle_literal(read.path)} ] ."""
            )
        whens = " ".join(f"[ horis:property {c} ; horis:is true ]" for c in conditions)
        properties.append(
            f""":applies_{name} a horis:Property ; rdfs:label {turtle_literal(f"{title} applies")} ;
    horis:domain :Patient ; horis:range xsd:boolean ; horis:cardinality "0..1" ;
    horis:assignedBy horis:RulesOnly .
:Applies_{name} a horis:Rule ; horis:about :Patient ; horis:when ( {whens} ) ;
    horis:then [ horis:property :applies_{name} ; horis:value true ] ."""
        )
        for j, c in enumerate(conditions):
            properties.append(
                f""":NotApplies_{name}_{j} a horis:Rule ; horis:about :Patient ;
    horis:when ( [ horis:property {c} ; horis:is false ] ) ;
    horis:then [ horis:property :applies_{name} ; horis:value false ] ."""
            )
    # what the run must decide: every conditioned action for $apply; for a service, whose
    # cards are its top-level actions, those only (an undecided child shows on no card)
    deciding = [p for p, _e, _a in conditioned if served is None or "." not in p]
    assigned = " ".join(
        f"[ horis:property :applies_{p.replace('.', '_')} ; horis:isAssigned true ]"
        for p in deciding
    )
    if not deciding:  # nothing to decide: the plan applies to the patient read
        properties.append(
            """:patientRead a horis:Property ; rdfs:label "the patient's record read" ;
    horis:domain :Patient ; horis:range xsd:boolean ; horis:cardinality "0..1" ;
    horis:absentMeans horis:Unknown ;
    horis:fromFhir [ horis:resourceType "Patient" ; horis:fhirPath "id.exists()" ] ."""
        )
        assigned = "[ horis:property :patientRead ; horis:is true ]"
    body = "\n".join(properties)
    hook = served.hook if served else "patient-view"
    shown = turtle_literal(served.title) if served else None
    description = turtle_literal(
        served.description if served else "The applicability conditions of a PlanDefinition."
    )
    joined = " ,\n               ".join(served.cards) if served else ""
    cards = f" ;\n    horis:card {joined}" if joined else ""
    if served and served.system_actions:
        cards += " ;\n    horis:systemAction " + " ,\n               ".join(served.system_actions)
    if served and served.documentation:
        cards = f" ;\n    horis:documentation {turtle_literal(served.documentation)}{cards}"
    extra = served.extra if served else ""
    templates = call_templates(
        list(served.prefetch if served else ()), reads, served.hook if served else None, where
    )
    prefetch = "".join(
        f" ,\n        [ horis:key {turtle_literal(key)} ; horis:query {turtle_literal(query)} ]"
        for key, query in templates
    )
    label = turtle_literal(str(plan.get("url") or plan.get("id") or "an authored PlanDefinition"))
    version = turtle_literal(str(plan.get("version") or "0"))

    def write(service: str, iri: str) -> str:
        return f"""# Compiled from the PlanDefinition {label}: its applicability conditions, decided
# by rules. Generated: edit the PlanDefinition, not this file.
@prefix :      <{iri}#> .
@prefix horis: <https://horismos.dev/ns#> .
@prefix rdfs:  <http://www.w3.org/2000/01/rdf-schema#> .
@prefix owl:   <http://www.w3.org/2002/07/owl#> .
@prefix xsd:   <http://www.w3.org/2001/XMLSchema#> .

<{iri}> a owl:Ontology ; rdfs:label {label} ; owl:versionInfo {version} .

:Patient a horis:Class ; rdfs:label "Patient" .
:PlanOutcome a horis:Class ; rdfs:label "plan applied" ; horis:oneOf ( :Applied ) .
:Applied a :PlanOutcome ; rdfs:label "every condition decided" .

{body}

:plan a horis:Property ; rdfs:label "plan applicability" ;
    horis:domain :Patient ; horis:range :PlanOutcome ; horis:cardinality "0..1" ;
    horis:assignedBy horis:RulesOnly .
:PlanDecided a horis:Rule ; horis:about :Patient ; horis:when ( {assigned} ) ;
    horis:then [ horis:property :plan ; horis:value :Applied ] .

:Plan a horis:Workflow ; rdfs:label {label} ; horis:startsAt :Decide ; horis:decides :plan ;
    horis:focus :Patient ; horis:version {version} .
:Decide a horis:ReasoningStep ; horis:goal [ horis:property :plan ; horis:isAssigned true ] ;
    horis:onIncomplete :Undecided ; horis:onUnreachable :Undecided ; horis:next :Decided .
:Decided a horis:Step ; horis:terminal true .
:Undecided a horis:Step ; horis:terminal true .

:Service a horis:CdsService ; horis:id {turtle_literal(service)} ;
    horis:hook {turtle_literal(hook)} ;
    horis:title {shown or label} ; horis:description {description} ;
    horis:workflow :Plan ;
    horis:prefetch [ horis:key "patient" ;
                     horis:query "Patient/{{{{context.patientId}}}}" ]{prefetch}{cards} .
{extra}"""

    if served is not None:
        return write(served.service_id, served.iri), served.service_id
    # an authored plan's deployment is named by a digest of its whole compiled text (written
    # with blank names): one IRI always holds one text, whatever wrote it
    digest = hashlib.sha256(write("plan-", COMPILED_PLAN).encode()).hexdigest()[:16]
    service = f"plan-{digest}"
    return write(service, f"{COMPILED_PLAN}{digest}"), service


def plan_file(text: str) -> Path:
    """The file holding the compiled plan ``text``, written once (by its digest) in this
    process's own folder."""
    path = _folder() / f"{hashlib.sha256(text.encode()).hexdigest()}.ttl"
    if not path.exists():
        partial = path.with_suffix(f".{uuid.uuid4().hex}.part")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)  # atomic: a concurrent call reads a whole file or none
    return path


def _deployment(text: str, packaged: PackagedTools, where: str) -> Deployment:
    deployment: Deployment
    [deployment] = list(load_deployments([plan_file(text)], packaged))
    if not deployment.serving:
        problem = deployment.problems[0] if deployment.problems else None
        said = f"{problem.node} {problem.message}" if problem else "unknown problem"
        # name the plan's condition the compiled property came from (condition_<path>_<j>)
        found = re.search(r"condition_([0-9_]+)_([0-9]+)\b", said)
        element = f"{where}.action"
        if found:
            steps = found.group(1).split("_")
            element = f"{where}.action[{'].action['.join(steps)}].condition[{found.group(2)}]"
        raise ApplyRefused(
            422,
            "invalid",
            f"{element} does not compile into rules that verify: "
            f"{problem.message if problem else 'unknown problem'}",
            element,
        )
    return deployment


def verify_conditions(plan: Mapping[str, Any], packaged: PackagedTools, where: str) -> None:
    """Compile ``plan``'s conditions and verify the deployment they make, or refuse naming the
    condition that does not compile."""
    if has_conditions(plan):
        text, _service = compile_plan(plan, where)
        _deployment(text, packaged, where)


class PlanRuns(Protocol):
    """Runs the hook request deciding a compiled plan's conditions through the hook service,
    recorded in the run store (``app.plandefinition.recorded``), and gives back the stored
    run's outcome document (its ``runId``, ``terminal``, ``decision`` or ``undecided``,
    ``proof``, and the facts under ``replay``). ``text`` is the compiled Turtle, kept for
    replay under the deployment's IRI."""

    def __call__(
        self, deployment: Deployment, service_id: str, request: dict[str, Any], text: str
    ) -> Mapping[str, Any]: ...


def decide(
    plan: Mapping[str, Any],
    *,
    subject: str,
    patient: Mapping[str, Any] | None,
    practitioner: str | None,
    runs: PlanRuns,
    packaged: PackagedTools,
    where: str,
    encounter: str | None = None,
    found: Mapping[str, Mapping[str, Any]] | None = None,
    values: Mapping[str, tuple[str, Any]] | None = None,
) -> Decided:
    """Run ``plan``'s conditions for ``subject`` (``Patient/id``), ``patient`` its resource
    from the ``data`` Bundle, as a hook call would, recorded as one (``runs``); ``encounter``
    (``Encounter/id``) and ``practitioner`` (``Practitioner/id``) for conditions reading them,
    their resources in ``found`` (the call's resources by reference: one not given, or not in
    the data, leaves the conditions reading it unknown, named, never false); ``values`` the
    call's parameters the conditions read as ``%name``."""
    text, service = compile_plan(plan, where, values=values)
    deployment = _deployment(text, packaged, where)
    kind, _, patient_id = subject.partition("/")
    if kind != "Patient":
        raise ApplyRefused(
            422, "not-supported", "a plan's conditions are decided for a Patient subject", "subject"
        )
    if patient is None:
        raise ApplyRefused(
            422,
            "not-found",
            f"the plan's conditions read the subject, and the data Bundle does not hold {subject}",
            "data",
        )
    # a hook's user is a Practitioner or PractitionerRole; another practitioner parameter is
    # not a user, and the conditions do not read it
    user = APPLY_USER
    if practitioner and practitioner.split("/", 1)[0] in ("Practitioner", "PractitionerRole"):
        user = practitioner
    context = {"patientId": patient_id, "userId": user}
    prefetch: dict[str, Any] = {"patient": dict(patient)}
    declared = deployment.ontology.services.values() if deployment.ontology else ()
    keys = {t.key for s in declared for t in s.prefetch}
    resources = found or {}
    if "encounter" in keys:
        # a condition reads the encounter: what the call knows of it
        if encounter is not None:  # an Encounter reference (checked when the call was read)
            context["encounterId"] = encounter.removeprefix("Encounter/")
        given = resources.get(encounter) if encounter else None
        prefetch["encounter"] = dict(given) if given is not None else None
    if "practitioner" in keys:
        # a condition reads the practitioner: the call's, when it is a Practitioner
        mine = user != APPLY_USER and user.startswith("Practitioner/")
        given = resources.get(user) if mine else None
        prefetch["practitioner"] = dict(given) if given is not None else None
    request = {
        "hook": "patient-view",
        "hookInstance": str(uuid.uuid4()),
        "context": context,
        "prefetch": prefetch,
    }
    outcome = runs(deployment, service, request, text)
    facts = (outcome.get("replay") or {}).get("facts") or ()
    held = {
        str(name).removeprefix("applies_"): value
        for _subject, name, value in facts
        if str(name).startswith("applies_")
    }
    applies = {
        path: held.get(path.replace(".", "_")) for path, _e, _a in _conditioned(plan.get("action"))
    }
    decision: dict[str, Any] = {"terminal": outcome.get("terminal"), "runId": outcome["runId"]}
    for key in ("decision", "undecided", "proof"):
        if outcome.get(key) is not None:
            decision[key] = outcome[key]
    return Decided(
        applies={k: v if isinstance(v, bool) else None for k, v in applies.items()},
        extension=decision,
    )


__all__ = [
    "TIMING_KINDS",
    "Decided",
    "PlanRuns",
    "Served",
    "applicability",
    "compile_plan",
    "decide",
    "fhirpath_of",
    "has_conditions",
    "plan_file",
    "refuse_timing",
    "timing",
    "verify_conditions",
]

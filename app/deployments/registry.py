"""The deployments a process serves, each loaded, verified and versioned on its own.

:func:`load_deployments` finds the deployments among the configured files
(:mod:`app.ontology.deployments`), then loads and verifies each one with its imports, against
the tools this installation offers. One that does not load or verify is ``refused``: it is not
served — its services are absent from discovery and answer 503 with its problems — while every
other deployment serves. Of two deployments declaring the same service id, the one whose id
sorts later is refused for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from app.errors import BadRequest, NotFound, Unavailable
from app.fhir_validate import prepare as prepare_shapes
from app.ontology import OntologyError, Problem, load_ontology, verify
from app.ontology.deployments import DeploymentSource, find_deployments
from app.ontology.loader import vocabulary_path
from app.ontology.model import CdsServiceDef, Ontology, OntologyPart, WorkflowDef, local_name
from app.ontology.services import CombinedServiceDef
from app.tools.packaged import PackagedTools

DeploymentStatus = Literal["serving", "refused"]


def problem_json(problem: Problem) -> dict[str, Any]:
    """A problem as the verification report shows it."""
    out: dict[str, Any] = {"code": problem.code, "node": problem.node, "message": problem.message}
    if problem.path:
        out["path"] = problem.path
    if problem.file:
        out["file"] = problem.file
    return out


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """One deployment as this process serves it (or refuses to)."""

    id: str
    iri: str
    version: str
    digest: str | None
    status: DeploymentStatus
    files: tuple[str, ...]
    imports: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    #: IRIs of the workflows its own files declare
    workflows: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    ontology: Ontology | None = field(default=None, repr=False, compare=False)
    #: the change this version came from; None: the files on disk (the release)
    change_id: str | None = None
    #: the activation count of the deployment when this version was seen active
    generation: int = 0
    #: what it imports (``owl:imports``), each with its own version and digest
    imported: tuple[OntologyPart, ...] = ()

    def imports_json(self) -> list[dict[str, Any]]:
        """What a run records of the ontologies the deployment imports."""
        return [{"iri": p.iri, "version": p.version, "digest": p.digest} for p in self.imported]

    @property
    def serving(self) -> bool:
        return self.status == "serving" and self.ontology is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "iri": self.iri,
            "version": self.version,
            "digest": self.digest,
            "status": self.status,
            "services": list(self.services),
            "files": list(self.files),
            "imports": list(self.imports),
            "imported": self.imports_json(),
            "change": self.change_id,
            "generation": self.generation,
        }
        if self.problems:
            out["problems"] = [problem_json(p) for p in self.problems]
        return out


class Deployments:
    """Every deployment of the process, by id, IRI and service id."""

    def __init__(self, items: Iterable[Deployment]) -> None:
        self._items = {d.id: d for d in sorted(items, key=lambda d: d.id)}
        self._by_service: dict[str, str] = {}
        for d in self._items.values():
            for service in d.services:
                self._by_service.setdefault(service, d.id)
        #: :meth:`combined`, once asked (the deployments never change after this)
        self._combined: list[tuple[CombinedServiceDef, Deployment]] | None = None

    def __iter__(self) -> Any:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    @property
    def serving(self) -> list[Deployment]:
        return [d for d in self._items.values() if d.serving]

    def find(self, name: str) -> Deployment | None:
        """A deployment by id or IRI."""
        found = self._items.get(name)
        if found is not None:
            return found
        return next((d for d in self._items.values() if d.iri == name), None)

    def for_service(self, service_id: str) -> Deployment | None:
        """The deployment declaring the CDS service ``service_id`` (serving or refused)."""
        name = self._by_service.get(service_id)
        return self._items[name] if name is not None else None

    def services(self) -> list[tuple[CdsServiceDef, Deployment]]:
        """The services of every serving deployment, by service id."""
        out = [
            (service, d)
            for d in self.serving
            for service in (d.ontology.services.values() if d.ontology else ())
            if service.id in d.services
        ]
        return sorted(out, key=lambda pair: pair[0].id)

    def combined(self) -> list[tuple[CombinedServiceDef, Deployment]]:
        """The combined services of every serving deployment, by service id (found once: every
        hook call asks whether its service is one)."""
        if self._combined is None:
            out = [
                (service, d)
                for d in self.serving
                for service in (d.ontology.combined.values() if d.ontology else ())
                if service.id in d.services
            ]
            self._combined = sorted(out, key=lambda pair: pair[0].id)
        return list(self._combined)

    def combined_members(self, combined: CombinedServiceDef) -> list[CdsServiceDef] | str:
        """The services ``combined`` combines, in its order, or why it cannot serve: a member
        that is not served or not of its hook (a combined service never answers for part of
        what it names)."""
        served = {s.id: s for s, _d in self.services()}
        members: list[CdsServiceDef] = []
        for member in combined.members:
            found = served.get(member)
            if found is None:
                return f"service {member!r} it combines is not served"
            if found.hook != combined.hook:
                return f"service {member!r} it combines answers {found.hook}, not {combined.hook}"
            members.append(found)
        return members

    def with_workflow(self, name: str) -> list[tuple[Deployment, WorkflowDef]]:
        """Serving deployments that declare a workflow named ``name`` (local name or IRI) in
        their own files (not in what they import)."""
        out: list[tuple[Deployment, WorkflowDef]] = []
        for d in self.serving:
            assert d.ontology is not None
            for wf in d.ontology.workflows.values():
                if name in (wf.name, wf.iri) and wf.iri in d.workflows:
                    out.append((d, wf))
        return out

    def replaced(self, deployment: Deployment) -> Deployments:
        """These deployments with ``deployment`` in place of the one with its id."""
        return Deployments([deployment if d.id == deployment.id else d for d in self])


class DeploymentNotServed(Unavailable):
    """Raised when a request needs a deployment that does not verify: it is not served until
    its files are fixed (the body carries its verification report)."""

    code = "deployment-refused"

    def __init__(self, deployment: Deployment) -> None:
        super().__init__(
            f"deployment {deployment.id} {deployment.version} does not verify and is not "
            f"served ({len(deployment.problems)} problem(s))",
            where="deployment",
        )
        self.deployment = deployment

    def extensions(self) -> dict[str, Any]:
        return {"problems": [problem_json(p) for p in self.deployment.problems]}

    def headers(self) -> dict[str, str] | None:
        return None  # a retry does not help until the files are fixed


def run_columns(deployment: Deployment) -> dict[str, Any]:
    """What a run records of the deployment it ran on (``runs`` columns)."""
    return {
        "deployment": deployment.iri,
        "deployment_version": deployment.version,
        "deployment_imports": deployment.imports_json(),
        "ontology_digest": deployment.digest,
    }


def run_deployment_json(deployment: Deployment) -> dict[str, Any]:
    """What a run's JSON says of the deployment it ran on (as ``GET /runs/{id}`` shows it)."""
    return {
        "iri": deployment.iri,
        "version": deployment.version,
        "digest": deployment.digest,
        "imports": deployment.imports_json(),
    }


def served(deployment: Deployment) -> Ontology:
    """The ontology of a deployment that is served, else :class:`DeploymentNotServed`."""
    if deployment.ontology is None or not deployment.serving:
        raise DeploymentNotServed(deployment)
    return deployment.ontology


def for_workflow(deployments: Deployments, name: str) -> tuple[Deployment, WorkflowDef]:
    """The deployment that declares workflow ``name`` (a local name or IRI): 404 when none
    does, 400 when several do (name it by IRI), 503 when only a refused one might."""
    found = deployments.with_workflow(name)
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        where = ", ".join(f"{wf.iri} ({d.id})" for d, wf in found)
        raise BadRequest(
            where="workflow", message=f"workflow {name!r} is ambiguous: {where}; use its IRI"
        )
    for d in deployments:
        if not d.serving and any(name in (iri, local_name(iri)) for iri in d.workflows):
            raise DeploymentNotServed(d)
    raise NotFound(where="workflow", message=f"no served deployment declares workflow {name!r}")


def of_run(deployments: Deployments, deployment_iri: str | None, workflow_iri: str) -> Deployment:
    """The deployment a stored run belongs to: the one it recorded, else (runs stored before
    deployments were recorded) the served one that declares its workflow."""
    if deployment_iri:
        found = deployments.find(deployment_iri)
        if found is not None:
            return found
        raise NotFound(
            where="deployment", message=f"the run's deployment {deployment_iri} is not loaded"
        )
    candidates = deployments.with_workflow(workflow_iri)
    if not candidates:
        raise NotFound(
            where="workflow", message=f"no served deployment declares workflow {workflow_iri}"
        )
    return candidates[0][0]


def _fingerprint(path: Path) -> tuple[str, int, int]:
    resolved = path.resolve()
    stat = resolved.stat()
    return (str(resolved), stat.st_mtime_ns, stat.st_size)


def build_deployment(source: DeploymentSource, packaged: PackagedTools) -> Deployment:
    """Load and verify one deployment with its imports."""
    ontology: Ontology | None = None
    problems: tuple[Problem, ...] = source.problems
    if not problems:
        try:
            ontology, problems = _load_checked(
                tuple(_fingerprint(p) for p in source.paths), packaged
            )
        except OntologyError as exc:
            problems = tuple(exc.problems)
        except OSError as exc:
            problems = (Problem(code="missing", node=source.iri, message=str(exc)),)
    digest = ontology.digest if ontology is not None else None
    version = source.version or (f"sha256:{digest[:12]}" if digest else "unknown")
    return Deployment(
        id=source.id,
        iri=source.iri,
        version=version,
        digest=digest,
        status="refused" if problems or ontology is None else "serving",
        files=tuple(str(p) for p in source.files),
        imports=tuple(str(p) for p in source.imports),
        services=source.services,
        workflows=source.workflows,
        problems=problems,
        ontology=ontology,
        imported=tuple(p for p in ontology.parts if p.iri != source.iri) if ontology else (),
    )


def prepare_reads(ontology: Ontology) -> None:
    """The R4 shapes of what ``ontology``'s mappings read, compiled now (once per process)
    rather than in the first call that validates one."""
    prepare_shapes(m.resource_type for p in ontology.properties.values() for m in p.from_fhir)


@lru_cache(maxsize=64)
def _load_checked(
    files: tuple[tuple[str, int, int], ...], packaged: PackagedTools
) -> tuple[Ontology, tuple[Problem, ...]]:
    # The compiled Ontology is immutable, so apps in one process (tests, several workers of one
    # interpreter) may share it; a changed file has a new fingerprint and is loaded again.
    ontology = load_ontology([Path(name) for name, _, _ in files], registry=packaged.registry)
    prepare_reads(ontology)
    problems = list(verify(ontology))
    bindings = {iri: tool.binding for iri, tool in ontology.tools.items()}
    problems += [
        Problem(code="binding", node=iri, message=message)
        for iri, message in packaged.problems_for(bindings)
    ]
    return ontology, tuple(problems)


def load_deployments(paths: Sequence[Path], packaged: PackagedTools) -> Deployments:
    """Every deployment among ``paths``, each loaded and verified on its own."""
    built = [build_deployment(s, packaged) for s in find_deployments(paths, skip=vocabulary_path())]
    return Deployments(_refuse_shared_services(built))


def _refuse_shared_services(items: list[Deployment]) -> list[Deployment]:
    """A service id served by two deployments is refused in the one whose id sorts later."""
    owner: dict[str, str] = {}
    out: list[Deployment] = []
    for d in sorted(items, key=lambda d: d.id):
        clashes = [s for s in d.services if s in owner]
        for s in d.services:
            owner.setdefault(s, d.id)
        if clashes:
            extra = tuple(
                Problem(
                    code="service",
                    node=d.iri,
                    message=f"CDS service {s!r} is also declared by deployment {owner[s]!r}",
                )
                for s in clashes
            )
            d = replace(d, status="refused", problems=d.problems + extra)
        out.append(d)
    return out


__all__ = [
    "Deployment",
    "DeploymentNotServed",
    "DeploymentStatus",
    "Deployments",
    "build_deployment",
    "for_workflow",
    "load_deployments",
    "of_run",
    "prepare_reads",
    "problem_json",
    "run_columns",
    "run_deployment_json",
    "served",
]

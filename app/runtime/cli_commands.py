"""``horismos run`` and ``horismos replay`` (wired into ``app/cli.py``).

Exit codes: ``run`` — 0 when the run reached a terminal step or suspended, 1 when the input or
the ontology was rejected, 2 when the run failed; ``replay`` — 0 when every replayed run matches
its recording, 1 when some diverged (each divergence is printed), 2 when a run cannot be read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.tools.host import ToolHost

Echo = Callable[[str], None]


def run_files(
    files: Sequence[Path],
    *,
    workflow: str,
    facts: Path | None,
    text: str | None,
    as_json: bool,
    model: str | None,
    save: bool,
    out: Echo,
    err: Echo,
) -> int:
    from app.settings import get_settings
    from app.tools.host import ToolHost

    # the same tools as the server: packaged ones and the sessions of HORISMOS_MCP_SERVERS
    host = ToolHost.from_servers(get_settings().mcp_servers)
    try:
        return _run_files(
            host,
            files,
            workflow=workflow,
            facts=facts,
            text=text,
            as_json=as_json,
            model=model,
            save=save,
            out=out,
            err=err,
        )
    finally:
        host.close()


def _run_files(
    host: ToolHost,
    files: Sequence[Path],
    *,
    workflow: str,
    facts: Path | None,
    text: str | None,
    as_json: bool,
    model: str | None,
    save: bool,
    out: Echo,
    err: Echo,
) -> int:
    from app.deployments import (
        DeploymentNotServed,
        for_workflow,
        load_deployments,
        run_columns,
        served,
    )
    from app.errors import HorismosError
    from app.ontology import OntologyError, default_ontology_paths, load_ontology, verify
    from app.runtime.host import InputRejected
    from app.runtime.runner import Runner
    from app.settings import get_settings

    settings = get_settings()
    row: dict[str, Any] | None = None
    if files:
        try:
            ontology = load_ontology(list(files), registry=host.registry)
        except OntologyError as exc:
            for problem in exc.problems:
                err(f"{problem.node}: {problem.message}")
            return 1
        # the same bar as the server: a run on an ontology that does not verify is refused
        unsound = [str(p) for p in verify(ontology)]
        unsound += [f"{iri}: {message}" for iri, message in host.packaged_problems(ontology)]
        for line in unsound:
            err(line)
        if unsound:
            return 1
    else:  # what serve loads: the deployment that declares the workflow
        paths = [Path(p) for p in settings.ontology_paths] or default_ontology_paths()
        try:
            deployment, _ = for_workflow(load_deployments(paths, host.packaged), workflow)
            ontology = served(deployment)
        except DeploymentNotServed as exc:
            err(exc.message)
            for problem in exc.deployment.problems:
                err(f"  {problem}")
            return 1
        except HorismosError as exc:
            err(exc.message)
            return 1
        row = run_columns(deployment)
    # the MCP bindings are held against the servers the same way as at the server's start
    host.connect()
    refused = [f"{iri}: {message}" for iri, message in host.mcp_problems(ontology)]
    for line in refused:
        err(line)
    if refused:
        return 1
    for name, server in host.status().get("mcp", {}).items():
        if server["state"] != "ready":
            err(f"warning: MCP server {name} is {server['state']}: {server['error']}")
    data: dict[str, Any] = {}
    if facts is not None:
        try:
            data = json.loads(facts.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            err(f"{facts}: {exc}")
            return 1
    if save:  # the database must take the run before it is computed
        from app.store.migrate import NotMigrated, prepare_to_serve

        try:
            prepare_to_serve(settings.database_url)
        except (NotMigrated, ValueError) as exc:
            err(f"--save: {exc}")
            return 1
    if model:
        settings = settings.model_copy(update={"bridge_model": model})
    runner = Runner.from_settings(settings, tools=host)
    try:
        started = runner.start(ontology, workflow, data, text=text)
    except InputRejected as exc:
        err(exc.message)
        for violation in exc.violations:
            err(f"  {violation['code']}: {violation['message']}")
        return 1
    except HorismosError as exc:
        err(exc.message)
        return 1
    outcome = started.outcome
    if save:
        from app.store import make_engine

        engine = make_engine(settings.database_url)
        try:
            with engine.begin() as connection:
                runner.save(connection, ontology, started, row=row)
        finally:
            engine.dispose()
    stored = (
        f"stored in {_shown(settings.database_url)}: GET /runs/{outcome.run_id}, "
        f"horismos replay {outcome.run_id}"
        if save
        else "NOT stored (--save stores it for GET /runs/{id} and horismos replay)"
    )
    if as_json:
        out(json.dumps(outcome.to_json(), indent=2, default=str))
        err(f"run {outcome.run_id}: {stored}")  # stdout stays the outcome document
    else:
        decision = outcome.decision
        said = f"{decision.property} = {decision.value}" if decision else "no decision"
        out(
            f"run {outcome.run_id}: {outcome.workflow} {outcome.version} → {outcome.terminal} "
            f"({outcome.status}; {said})"
        )
        for entry in outcome.trace:
            out(f"  {entry.step:<24} {entry.kind:<15} {entry.edge}")
        out(stored)
    return 2 if outcome.status == "failed" else 0


def _shown(url: str) -> str:
    """A database URL as it may be printed (no password)."""
    from app.store.db import normalize_url

    return normalize_url(url).render_as_string(hide_password=True)


def replay_runs(
    run_ids: Sequence[str],
    *,
    files: Sequence[Path],
    url: str | None,
    rerun_idempotent: bool,
    as_json: bool,
    out: Echo,
    err: Echo,
    rehydrate: bool = False,
) -> int:
    from app.cds.hook_input import HookInput, InputUnusable, rehydrated_recording
    from app.deployments import load_deployments, served
    from app.errors import HorismosError
    from app.ontology import OntologyError, default_ontology_paths, load_ontology
    from app.ontology.model import Ontology
    from app.plandefinition.recorded import run_deployment
    from app.runtime.host import stored_input, stored_recording
    from app.runtime.replay import replay_run
    from app.settings import get_settings
    from app.store import make_engine, repo, session_scope
    from app.tools.host import ToolHost

    settings = get_settings()
    # sessions open on demand: only a re-run idempotent MCP tool needs one
    host = ToolHost.from_servers(settings.mcp_servers)
    given: Ontology | None = None
    if files:
        try:
            given = load_ontology(list(files), registry=host.registry)
        except OntologyError as exc:
            for problem in exc.problems:
                err(f"{problem.node}: {problem.message}")
            host.close()
            return 2
    else:
        paths = [Path(p) for p in settings.ontology_paths] or default_ontology_paths()
        deployments = load_deployments(paths, host.packaged)
    engine = make_engine(url or settings.database_url)
    code = 0
    try:
        for run_id in run_ids:
            try:
                with session_scope(engine) as session:
                    recorded = stored_recording(session, run_id)
                    row = repo.get_run(session, run_id)
                    assert row is not None  # stored_recording found it
                    ontology = given or served(
                        run_deployment(session, deployments, row, host.packaged)
                    )
                    raw = stored_input(session, run_id) if rehydrate else None
                if rehydrate:
                    if raw is None:
                        raise InputUnusable(f"run {run_id} has no stored FHIR input")
                    recorded = rehydrated_recording(ontology, recorded, HookInput.from_bytes(raw))
            except HorismosError as exc:  # no such run, or its deployment is not served
                err(exc.message)
                code = 2
                continue
            except InputUnusable as exc:
                err(f"{run_id}: {exc}")
                code = 2
                continue
            report = replay_run(
                ontology, recorded, tools=host.invoker(), rerun_idempotent=rerun_idempotent
            )
            if as_json:
                out(json.dumps(report.to_json(), default=str))
            elif report.same:
                out(f"{run_id}: same decision, terminal, proof and facts")
            else:
                out(f"{run_id}: DIVERGED" + (f" ({report.error})" if report.error else ""))
                for d in report.divergences:
                    rest = {k: v for k, v in d.items() if k != "what"}
                    out(f"  {d['what']}: {json.dumps(rest, default=str)}")
            if not report.same:
                code = max(code, 1)
    finally:
        engine.dispose()
        host.close()
    return code

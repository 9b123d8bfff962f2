"""The ``horismos`` command.

Each subcommand is one small function that imports its implementation when it runs, so a
command stays fast to start and a broken layer only breaks its own subcommand. Add a command
as a function decorated with ``@app.command()`` (or ``@db.command()`` for database tasks).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from app.population.cli import At, Export, Master, population

app = typer.Typer(
    name="horismos",
    help="Horismos: a neuro-symbolic decision runtime served as a CDS Hooks service.",
    no_args_is_help=True,
    add_completion=False,
)
db = typer.Typer(help="Database schema tasks (Alembic migrations).", no_args_is_help=True)
app.add_typer(db, name="db")
change = typer.Typer(
    help="Change control for deployments: propose, replay, approve, activate, roll back.",
    no_args_is_help=True,
)
app.add_typer(change, name="change")
terminology = typer.Typer(
    help="The embedded terminology (HL7 Terminology package and a deployment's files).",
    no_args_is_help=True,
)
app.add_typer(terminology, name="terminology")
# population runs: their commands live beside them (app/population/cli.py)
app.add_typer(population, name="population")

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]

DEFAULT_OPENAPI_PATH = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port to listen on.")] = 8000,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Server processes sharing the port (one per core; more than one needs "
            "PostgreSQL, see docs/operations.md).",
        ),
    ] = 1,
) -> None:
    """Serve the CDS Hooks service (configuration from HORISMOS_* environment variables).

    An SQLite database (the default ./horismos.db) is migrated first; a PostgreSQL database
    that is not migrated is refused with the command that fixes it, and so is a missing
    terminology package."""
    import uvicorn

    from app.settings import get_settings
    from app.store.migrate import NotMigrated, prepare_to_serve
    from app.terminology import TerminologyNotInstalled, load_terminology

    settings = get_settings()
    try:  # before migrating: a service without its terminology is not started at all
        load_terminology(settings.terminology_packages)
    except TerminologyNotInstalled as exc:
        _echo_err(f"horismos serve: {exc}")
        raise typer.Exit(1) from None
    try:
        typer.echo(prepare_to_serve(settings.database_url))
    except (NotMigrated, ValueError) as exc:  # ValueError: a URL of no supported database
        _echo_err(f"horismos serve: {exc}")
        raise typer.Exit(1) from None
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=host,
        port=port,
        proxy_headers=True,
        workers=workers,
    )


@terminology.command("serve")
def terminology_serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port to listen on.")] = 8080,
    ontology: Annotated[
        list[Path] | None,
        typer.Option(
            help="A deployment's Turtle file(s): its valuesets and conceptmaps are served too."
        ),
    ] = None,
) -> None:
    """Serve the embedded terminology as a FHIR terminology server ($expand, $validate-code,
    $lookup, $subsumes, $translate), from files only."""
    import uvicorn

    from app.compose import terminology_app
    from app.ontology.loader import load_ontology
    from app.settings import get_settings
    from app.terminology import TerminologyNotInstalled, load_terminology
    from app.terminology.embedded import EmbeddedTerminology

    settings = get_settings()
    try:
        package = load_terminology(settings.terminology_packages)
    except TerminologyNotInstalled as exc:
        _echo_err(f"horismos terminology serve: {exc}")
        raise typer.Exit(1) from None
    if ontology:
        embedded = EmbeddedTerminology.of(load_ontology(ontology), package)
    else:
        embedded = EmbeddedTerminology(package)
    uvicorn.run(terminology_app(embedded), host=host, port=port, log_level="warning")


@db.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    url: Annotated[
        str | None, typer.Option(help="Database URL (default: HORISMOS_DATABASE_URL).")
    ] = None,
) -> None:
    """Migrate the database schema to the latest revision."""
    from app.settings import get_settings
    from app.store import make_engine
    from app.store.migrate import current_revision, upgrade

    target = url or get_settings().database_url
    upgrade(target, revision)
    engine = make_engine(target)
    try:
        typer.echo(f"database at revision {current_revision(engine)}")
    finally:
        engine.dispose()


@app.command()
def openapi(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write it.")] = (
        DEFAULT_OPENAPI_PATH
    ),
) -> None:
    """Write the service's OpenAPI document (sorted keys, trailing newline)."""
    from app.main import create_app
    from app.settings import Settings

    document = create_app(Settings()).openapi()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_openapi(document), encoding="utf-8")
    typer.echo(f"wrote {output}")


@app.command("verify")
def verify_ontology(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Turtle files (default: what serve loads: HORISMOS_ONTOLOGY_PATHS, else the "
            "bundled ontologies)."
        ),
    ] = None,
) -> None:
    """Load and verify ontology files: exit 0 when sound, else 1 with one line per problem.

    With no files it verifies what ``horismos serve`` would load: HORISMOS_ONTOLOGY_PATHS,
    else the bundled ontologies.
    """
    from app.ontology.cli_commands import verify_files
    from app.settings import get_settings
    from app.tools.host import ToolHost

    host = ToolHost.discover()
    raise typer.Exit(
        verify_files(
            files or [],
            out=typer.echo,
            err=_echo_err,
            configured=get_settings().ontology_paths,
            registry=host.registry,
            host_problems=lambda o: [f"{iri}: {msg}" for iri, msg in host.packaged_problems(o)],
        )
    )


@app.command("new")
def new_command(
    service: Annotated[str, typer.Argument(help="The CDS service id (/cds-services/<id>).")],
    hook: Annotated[str, typer.Option(help="The CDS hook it answers, e.g. patient-view.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write it (default: SERVICE.ttl)."),
    ] = None,
    custom_hook: Annotated[
        bool, typer.Option(help="The hook is your own, not one of the CDS Hooks registry.")
    ] = False,
    iri: Annotated[
        str | None,
        typer.Option(help="The deployment's IRI (default: https://example.org/cds/SERVICE)."),
    ] = None,
) -> None:
    """Write a first deployment serving SERVICE on HOOK, complete and verified, to edit: it
    warns on a severe systolic blood pressure (docs/first-service.md). Never overwrites a file."""
    from app.deployments.scaffold import new_service

    raise typer.Exit(
        new_service(
            service,
            hook,
            output=output,
            custom_hook=custom_hook,
            iri=iri,
            out=typer.echo,
            err=_echo_err,
        )
    )


@app.command("deployments")
def deployments_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the listing as JSON.")] = False,
) -> None:
    """List the deployments serve would load (id, version, digest, status, services); exit 1
    when one does not verify and would not be served."""
    from app.deployments.cli_commands import list_deployments

    raise typer.Exit(list_deployments(as_json=as_json, out=typer.echo, err=_echo_err))


@app.command("tools")
def tools_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the listing as JSON.")] = False,
) -> None:
    """List the tools this installation offers (packaged tools of the horismos.tools entry-point
    group, the MCP servers of HORISMOS_MCP_SERVERS and their tools) and check the ontology's
    bindings against them. Exit 1 when something cannot be served."""
    from app.tools.cli_commands import list_tools

    raise typer.Exit(list_tools(as_json=as_json, out=typer.echo, err=_echo_err))


@app.command("schema")
def schema(
    files: Annotated[
        list[Path] | None, typer.Argument(help="Turtle files (default: the bundled ontologies).")
    ] = None,
    extracts: Annotated[
        list[str] | None, typer.Option(help="Classes to extract (local names or IRIs).")
    ] = None,
) -> None:
    """Print the JSON Schema a PerceptionStep extracting these classes uses."""
    from app.ontology.cli_commands import schema_for_files

    raise typer.Exit(schema_for_files(files or [], extracts or [], out=typer.echo, err=_echo_err))


@app.command("run")
def run_workflow_command(
    files: Annotated[
        list[Path] | None, typer.Argument(help="Turtle files (default: the bundled ontologies).")
    ] = None,
    workflow: Annotated[str, typer.Option(help="The workflow to run (local name or IRI).")] = "",
    facts: Annotated[
        Path | None, typer.Option(help="Structured input JSON (instances by local name).")
    ] = None,
    text: Annotated[str | None, typer.Option(help="Free text for PerceptionSteps.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome JSON.")] = False,
    model: Annotated[
        str | None, typer.Option(help="Bridge model string (default: HORISMOS_BRIDGE_MODEL).")
    ] = None,
    save: Annotated[
        bool,
        typer.Option(
            help="Store the run in the database (HORISMOS_DATABASE_URL; an SQLite file is "
            "migrated first), so GET /runs/{id} and horismos replay know it. Without it "
            "nothing is stored, and the command says so."
        ),
    ] = False,
) -> None:
    """Run a workflow on structured input and print its outcome."""
    from app.runtime.cli_commands import run_files

    raise typer.Exit(
        run_files(
            files or [],
            workflow=workflow,
            facts=facts,
            text=text,
            as_json=as_json,
            model=model,
            save=save,
            out=typer.echo,
            err=_echo_err,
        )
    )


@app.command("replay")
def replay_command(
    run_ids: Annotated[list[str], typer.Argument(help="Run ids recorded in the database.")],
    ontology: Annotated[
        list[Path] | None, typer.Option(help="Replay against these Turtle files instead.")
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="Database URL (default: HORISMOS_DATABASE_URL).")
    ] = None,
    rerun_idempotent: Annotated[
        bool, typer.Option(help="Call idempotent tools again instead of substituting.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON report per run.")] = False,
    rehydrate: Annotated[
        bool,
        typer.Option(help="Hydrate a hook run's stored FHIR input again instead of its World."),
    ] = False,
) -> None:
    """Replay recorded runs; exit 1 when a decision, terminal, proof or fact diverges."""
    from app.runtime.cli_commands import replay_runs

    raise typer.Exit(
        replay_runs(
            run_ids,
            files=ontology or [],
            url=url,
            rerun_idempotent=rerun_idempotent,
            rehydrate=rehydrate,
            as_json=as_json,
            out=typer.echo,
            err=_echo_err,
        )
    )


@app.command()
def reconcile(
    run: Annotated[
        str | None, typer.Option(help="Only this run's unsettled effects (as CDS feedback does).")
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="Database URL (default: HORISMOS_DATABASE_URL).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per effect.")] = False,
) -> None:
    """Settle commit effects left unknown by re-reading their targets (exit 1: some still are)."""
    from app.compose import reconcile_cli

    raise typer.Exit(reconcile_cli(url=url, run_id=run, as_json=as_json, out=typer.echo))


@app.command()
def purge(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", help="Retention period: 90d, 12h, 2w, P90D, PT12H (no years/months)."
        ),
    ],
    url: Annotated[
        str | None, typer.Option(help="Database URL (default: HORISMOS_DATABASE_URL).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Delete runs whose last activity is older than the period, with their traces, sources,
    effects, cards and feedback; runs with a pending effect, running or waiting are kept."""
    from datetime import UTC, datetime

    from app.settings import get_settings
    from app.store import make_engine
    from app.store.retention import parse_retention
    from app.store.retention import purge as purge_runs

    try:
        period = parse_retention(older_than)
    except ValueError as exc:
        _echo_err(f"--older-than: {exc}")
        raise typer.Exit(2) from None
    engine = make_engine(url or get_settings().database_url)
    try:
        report = purge_runs(engine, older_than=period, now=datetime.now(UTC))
    finally:
        engine.dispose()
    if as_json:
        typer.echo(json.dumps(report.to_json(), sort_keys=True))
        return
    deleted = ", ".join(f"{n} {name}" for name, n in report.deleted.items())
    typer.echo(f"purged runs last active before {report.cutoff.isoformat()}: {deleted}")
    if report.kept:
        typer.echo(f"kept {report.kept} older run(s): a pending effect, or still running/waiting")


@change.command("propose")
def change_propose(
    files: Annotated[list[Path], typer.Argument(help="The new text of the deployment's files.")],
    author: Annotated[str, typer.Option(help="Who wrote the change.")],
    note: Annotated[str, typer.Option(help="Why: the rationale.")] = "",
    deployment: Annotated[
        str | None, typer.Option(help="Target deployment (default: the files' ontology).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Propose files as a change to a deployment; the policy checks it (exit 1: refused)."""
    from app.changes import cli_commands

    raise typer.Exit(
        cli_commands.propose(
            files,
            author=author,
            note=note,
            deployment=deployment,
            as_json=as_json,
            out=typer.echo,
            err=_echo_err,
        )
    )


@change.command("replay")
def change_replay(
    change_id: Annotated[str, typer.Argument(help="The change.")],
    last: Annotated[int, typer.Option(help="How many of the deployment's last runs.")] = 50,
    by: Annotated[str | None, typer.Option("--by", help="Who asks (default: you).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Decide the deployment's last runs again on the change, in a sandbox; lists every
    decision that changes with both proofs."""
    from app.changes import cli_commands

    actor = by or cli_commands.default_actor()
    raise typer.Exit(
        cli_commands.replay(
            change_id, last=last, actor=actor, as_json=as_json, out=typer.echo, err=_echo_err
        )
    )


@change.command("impact")
def change_impact_command(
    change_id: Annotated[str, typer.Argument(help="The change (its id).")],
    ndjson: Export,
    out: Annotated[Path, typer.Option(help="Where the runs and impact.json go.")],
    at: At = None,
    master: Master = None,
    actor: Annotated[str | None, typer.Option(help="Who runs it (default: you).")] = None,
) -> None:
    """The patients of an export whose answer the change would change (patient-view services,
    on Spark), with both answers and proofs; exit 1 when any."""
    from app.changes.cli_commands import default_actor
    from app.population import cli_commands

    raise typer.Exit(
        cli_commands.impact(
            change_id, actor=actor or default_actor(), ndjson=ndjson, out=out, at=at,
            master=master, echo=typer.echo, err=_echo_err,
        )
    )  # fmt: skip


@change.command("approve")
def change_approve(
    change_id: Annotated[str, typer.Argument(help="The change.")],
    reviewer: Annotated[str, typer.Option(help="An approver (HORISMOS_CHANGE_APPROVERS).")],
    as_json: JsonOption = False,
) -> None:
    """Approve a replayed change (never by its author); it then runs in shadow mode."""
    from app.changes import cli_commands

    raise typer.Exit(
        cli_commands.approve(
            change_id, reviewer=reviewer, as_json=as_json, out=typer.echo, err=_echo_err
        )
    )


@change.command("activate")
def change_activate(
    change_id: Annotated[str, typer.Argument(help="The change.")],
    by: Annotated[str | None, typer.Option("--by", help="Who activates (default: you).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Make an approved change its deployment's active version for new hook calls."""
    from app.changes import cli_commands

    actor = by or cli_commands.default_actor()
    raise typer.Exit(
        cli_commands.activate(
            change_id, actor=actor, as_json=as_json, out=typer.echo, err=_echo_err
        )
    )


@change.command("rollback")
def change_rollback(
    deployment: Annotated[str, typer.Argument(help="The deployment (id or IRI).")],
    by: Annotated[str | None, typer.Option("--by", help="Who rolls back (default: you).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Return a deployment to the version before its active change."""
    from app.changes import cli_commands

    actor = by or cli_commands.default_actor()
    raise typer.Exit(
        cli_commands.rollback(
            deployment, actor=actor, as_json=as_json, out=typer.echo, err=_echo_err
        )
    )


@change.command("draft")
def change_draft(
    from_feedback: Annotated[
        str, typer.Option("--from-feedback", help="The CDS service whose feedback to read.")
    ],
    as_json: JsonOption = False,
) -> None:
    """Ask the configured Bridge to draft a change from clinicians' override reasons; it goes
    through the same policy, replay and human approval."""
    from app.changes import cli_commands

    raise typer.Exit(
        cli_commands.draft(from_feedback, as_json=as_json, out=typer.echo, err=_echo_err)
    )


@change.command("show")
def change_show(
    change_id: Annotated[str, typer.Argument(help="The change.")], as_json: JsonOption = False
) -> None:
    """A change: its state, history, policy, replay and shadow agreement."""
    from app.changes import cli_commands

    raise typer.Exit(cli_commands.show(change_id, as_json=as_json, out=typer.echo, err=_echo_err))


@change.command("list")
def change_list(
    deployment: Annotated[str | None, typer.Option(help="Only this deployment's.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Changes, newest first."""
    from app.changes import cli_commands

    raise typer.Exit(cli_commands.list_changes(deployment, as_json=as_json, out=typer.echo))


def _echo_err(message: str) -> None:
    typer.echo(message, err=True)


def render_openapi(document: dict[str, object]) -> str:
    """The committed form of the OpenAPI document, byte for byte."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    app()

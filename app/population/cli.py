"""``horismos population``: population runs on Apache Spark and the Bulk Data export they read.
Each command imports its implementation when it runs (``app.population.cli_commands``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

#: the options every population command over an export takes (``horismos change impact`` too)
Export = Annotated[Path, typer.Option(help="A Bulk Data export folder (*.ndjson).")]
At = Annotated[str | None, typer.Option(help="The instant decided at (default: now).")]
Master = Annotated[
    str | None, typer.Option(help="Spark master URL (default: local[*], this machine).")
]

population = typer.Typer(
    help="Population runs on Apache Spark: a service's decisions over a Bulk Data export.",
    no_args_is_help=True,
)


def _err(message: str) -> None:
    typer.echo(message, err=True)


@population.command("run")
def population_run_command(
    service_id: Annotated[str, typer.Argument(help="The CDS service (a patient-view service).")],
    ndjson: Export,
    out: Annotated[Path, typer.Option(help="Where decisions/ (Parquet) and summary.json go.")],
    at: At = None,
    master: Master = None,
) -> None:
    """Decide SERVICE_ID for every patient of the export, as a hook call with that patient's
    data as prefetch would; nothing is written to an EHR or to the run store."""
    from app.population import cli_commands
    from app.settings import get_settings

    paths = [Path(p) for p in get_settings().ontology_paths]
    raise typer.Exit(
        cli_commands.run(
            service_id, ndjson=ndjson, out=out, at=at, master=master, ontology_paths=paths,
            echo=typer.echo, err=_err,
        )
    )  # fmt: skip


@population.command("diff")
def population_diff_command(
    first: Annotated[Path, typer.Argument(help="The OUT folder of one population run.")],
    second: Annotated[Path, typer.Argument(help="The OUT folder of another.")],
    master: Master = None,
) -> None:
    """The patients whose decision or cards differ between two runs (exit 1 when any does)."""
    from app.population import cli_commands

    raise typer.Exit(cli_commands.diff(first, second, master=master, echo=typer.echo, err=_err))


@population.command("export")
def population_export_command(
    base: Annotated[str, typer.Argument(help="The FHIR server's base URL.")],
    out: Annotated[Path, typer.Option(help="The folder the NDJSON files are written to.")],
    group: Annotated[str | None, typer.Option(help="Export this Group's patients.")] = None,
    type_: Annotated[
        str | None, typer.Option("--type", help="Resource types, comma-separated.")
    ] = None,
    client_id: Annotated[str | None, typer.Option(help="SMART Backend Services client id.")] = None,
    key: Annotated[
        Path | None, typer.Option(help="The client's private key, a JWK (JSON) with its kid.")
    ] = None,
    token_url: Annotated[str | None, typer.Option(help="The token endpoint.")] = None,
) -> None:
    """Bulk Data $export from BASE into OUT (kick-off, polling, downloads; resumable)."""
    from app.population import cli_commands

    raise typer.Exit(
        cli_commands.export(
            base, out=out, group=group, types=type_, client_id=client_id, key=key,
            token_url=token_url, echo=typer.echo, err=_err,
        )
    )  # fmt: skip

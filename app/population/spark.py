"""Population runs on Apache Spark: one service's decision for every patient of a Bulk Data
export, and the patients whose answer differs between two runs.

``population_run`` reads the export's NDJSON lines on Spark, keys each resource by the patient
it belongs to (``app.population.bulk.patient_of``), groups them by patient and, per partition,
decides each patient with :class:`~app.population.decide.PatientDecider` — the live hook path
with the patient's data as prefetch. Resources no patient owns (Medications a request names)
are shipped to every executor once, and so are the deployment, loaded and verified once on the
driver, and the terminology snapshot the driver reads code systems with: each Python worker
unpickles them once (milliseconds) rather than parsing and verifying the Turtle again (seconds),
and every executor decides with the driver's deployment, and with the driver's terminology when
the driver has one installed (else with its own, as a live call would). It writes
``OUT/decisions/`` (Parquet, one row per patient, ``COLUMNS``) and ``OUT/summary.json``;
nothing is written to an EHR and nothing is stored in the run store.

A line that is not a resource, or a resource no patient owns and no one references, is counted
in the summary; a patient whose data cannot be read is a row with its ``error``; neither stops
the population.

Local mode by default (``local[*]``: every core of this machine); ``master`` names a cluster
(``spark://host:7077``, ``yarn``…) whose executors have Horismos installed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from app.fhir.systems import installed_terminology
from app.population.bulk import SHARED_TYPES, parse_line, patient_of
from app.population.decide import COLUMNS, PatientDecider, comparable

#: what a diff does not compare: per-run values, and the proof (shown beside each change: a
#: changed rule moves it even where the answer stays)
_PER_RUN = ("input_digest", "proof", "deployment_version")


def _session(master: str | None, app_name: str) -> Any:
    from pyspark.sql import SparkSession

    # the executors' Python is this one, the one Horismos is installed in (unless told)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    builder = (
        SparkSession.builder.master(master or "local[*]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@cache
def _deployments(paths: tuple[str, ...], service_id: str) -> Any:
    """The deployment serving ``service_id`` (its files and what they import), loaded and
    verified once per process, the driver's (the executors are shipped it); every deployment
    when none declares it (the decider then says so)."""
    from app.deployments import load_deployments
    from app.ontology.deployments import find_deployments
    from app.tools.host import ToolHost

    files = [Path(p) for p in paths]
    found = [s for s in find_deployments(files) if service_id in s.services]
    return load_deployments(found[0].paths if found else files, ToolHost().packaged)


def _decider(compiled: tuple[Any, Any], service_id: str, at: str) -> PatientDecider:
    """An executor's decider, on the deployment and terminology the driver shipped."""
    from app.runtime.runner import Runner
    from app.tools.host import ToolHost

    deployments, terminology = compiled
    return PatientDecider(
        deployments=deployments,
        service_id=service_id,
        at=datetime.fromisoformat(at),
        runner=Runner(invoker=ToolHost().invoker),
        terminology=terminology,
    )


def _settled(compiled: tuple[Any, Any]) -> None:
    """What a worker builds for itself besides the deployment it is shipped, built now and then
    left out of the garbage collector's full passes with it, once per worker process (as the
    service does at its start): the R4 shapes of what the deployments read and their rule
    indexes (per process, not pickled with them) and the UCUM registry."""
    from app.deployments.registry import prepare_reads
    from app.heap import freeze_startup_heap
    from app.ucum import warm
    from app.world.world import ontology_index

    deployments, _terminology = compiled
    warm()
    for deployment in deployments.serving:  # a refused one is never run
        if deployment.ontology is not None:
            prepare_reads(deployment.ontology)
            ontology_index(deployment.ontology)
    freeze_startup_heap()


def _decide_partition(
    rows: Iterable[tuple[str, Iterable[dict[str, Any]]]],
    *,
    compiled: tuple[Any, Any],
    service_id: str,
    at: str,
    shared: dict[str, dict[str, Any]],
) -> Iterator[dict[str, Any]]:
    _settled(compiled)  # done by _ready on a worker made ready: nothing left to build then
    decider = _decider(compiled, service_id, at)
    try:
        for patient, resources in rows:
            yield decider.decide(patient, list(resources), shared)
    finally:
        decider.close()


def _ready(compiled: tuple[Any, Any], service_id: str, at: str) -> None:
    """A Python worker made ready to decide: the decider's modules imported, the shipped
    deployment read, its shapes, rule indexes and units built and the whole settled out of the
    collector's full passes (what its first patient would otherwise pay)."""
    _decider(compiled, service_id, at).close()
    _settled(compiled)


def population_run(
    service_id: str,
    ndjson: Path,
    out: Path,
    *,
    ontology_paths: list[Path],
    at: datetime | None = None,
    master: str | None = None,
    partitions: int | None = None,
    timings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Decide ``service_id`` for every patient of the export in ``ndjson``; write the rows and
    the summary under ``out`` and return the summary. Refuses (``ServiceRefused``) a service
    whose hook a population cannot build before Spark starts. ``timings``, when given, gets
    ``sessionStart``: the seconds this run's Spark session took to start, and
    ``workersReady``: the seconds its Python workers took to be ready to decide (one per
    core: the decider's modules imported, the shipped deployment read) — the start-up a
    benchmark reports apart, paid once per run whatever the population's size."""
    from pyspark.sql.types import StringType, StructField, StructType

    from app.runtime.runner import Runner

    at = at or datetime.now(UTC)
    paths = tuple(str(p.resolve()) for p in ontology_paths)
    deployments = _deployments(paths, service_id)
    PatientDecider(  # refuse now, not once per executor
        deployments=deployments, service_id=service_id, at=at, runner=Runner()
    ).close()
    starting = time.perf_counter()
    spark = _session(master, f"horismos population {service_id}")
    if timings is not None:
        timings["sessionStart"] = time.perf_counter() - starting
    try:
        stamp = at.isoformat()
        compiled = spark.sparkContext.broadcast((deployments, installed_terminology()))
        warming = time.perf_counter()
        cores = spark.sparkContext.defaultParallelism
        # every worker ready before the first line is read (workers are reused across tasks)
        spark.sparkContext.parallelize(range(cores), cores).foreach(
            lambda _: _ready(compiled.value, service_id, stamp)
        )
        if timings is not None:
            timings["workersReady"] = time.perf_counter() - warming
        files = sorted(str(p) for p in Path(ndjson).glob("*.ndjson"))
        lines = spark.sparkContext.textFile(",".join(files), minPartitions=partitions or 2)
        parsed = lines.filter(lambda line: bool(line.strip())).map(parse_line).cache()
        unreadable = parsed.filter(lambda p: p[0] is None).map(lambda p: p[1]).collect()
        resources = parsed.filter(lambda p: p[0] is not None).map(lambda p: p[0])
        shared = dict(
            resources.filter(lambda r: r["resourceType"] in SHARED_TYPES)
            .map(lambda r: (f"{r['resourceType']}/{r.get('id')}", r))
            .collect()
        )
        keyed = resources.filter(lambda r: r["resourceType"] not in SHARED_TYPES).map(
            lambda r: (patient_of(r), r)
        )
        orphans = keyed.filter(lambda kv: kv[0] is None).count()
        by_patient = keyed.filter(lambda kv: kv[0] is not None).groupByKey(partitions)
        shipped = spark.sparkContext.broadcast(shared)
        rows = by_patient.mapPartitions(
            lambda part: _decide_partition(
                part,
                compiled=compiled.value,
                service_id=service_id,
                at=stamp,
                shared=shipped.value,
            )
        )
        schema = StructType([StructField(c, StringType(), True) for c in COLUMNS])
        frame = spark.createDataFrame(rows.map(lambda r: tuple(r[c] for c in COLUMNS)), schema)
        frame.write.mode("overwrite").parquet(str(out / "decisions"))
        # the summary from what was written (columns read alone), not from the rows held in
        # memory: each patient is decided once, and no copy of the cards is cached to count them
        written = spark.read.parquet(str(out / "decisions"))
        counted = written.select("decision", "undecided", "error").collect()
        summary = _summary(service_id, at, counted, unreadable, orphans)
    finally:
        spark.stop()
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _summary(
    service_id: str, at: datetime, rows: list[Any], unreadable: list[str], orphans: int
) -> dict[str, Any]:
    decisions: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    undecided = 0
    for row in rows:
        if row["error"] is not None:
            errors[row["error"]] += 1
        elif row["decision"] is not None:
            decisions[str(json.loads(row["decision"]).get("value"))] += 1
        elif row["undecided"] is not None:
            undecided += 1
        else:
            decisions["(no decision: nothing to decide)"] += 1
    return {
        "service": service_id,
        "at": at.isoformat(),
        "patients": len(rows),
        "decisions": dict(sorted(decisions.items())),
        "undecided": undecided,
        "errors": dict(sorted(errors.items())),
        "unreadableLines": len(unreadable),
        "resourcesOfNoPatient": orphans,
    }


def population_diff(first: Path, second: Path, *, master: str | None = None) -> dict[str, Any]:
    """The patients whose decision or cards differ between two population runs (per-run values
    left out: card uuids and links are not in the rows; the input digest is ignored), with both
    answers; patients in one run only are listed too."""
    spark = _session(master, "horismos population diff")
    try:
        a = spark.read.parquet(str(first / "decisions")).collect()
        b = spark.read.parquet(str(second / "decisions")).collect()
    finally:
        spark.stop()
    key = ("patient_id", "service_id")

    def index(rows: list[Any]) -> dict[tuple[str, str], dict[str, Any]]:
        return {tuple(r[k] for k in key): r.asDict() for r in rows}

    left, right = index(a), index(b)
    changed = []
    for k in sorted(set(left) | set(right)):
        x, y = left.get(k), right.get(k)
        if x is not None and y is not None and _same(x, y):
            continue
        changed.append({"patient": k[0], "service": k[1], "before": x, "after": y})
    return {"compared": len(set(left) | set(right)), "changed": changed}


def _same(x: dict[str, Any], y: dict[str, Any]) -> bool:
    def view(row: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in row.items() if k not in _PER_RUN}
        out["cards"] = comparable(json.loads(row["cards"])) if row.get("cards") else None
        return out

    return view(x) == view(y)


__all__ = ["population_diff", "population_run"]

"""Deployments: sets of Turtle files, each with its IRI and version, loaded, verified and served
on its own (``registry``)."""

from app.deployments.registry import (
    Deployment,
    DeploymentNotServed,
    Deployments,
    DeploymentStatus,
    build_deployment,
    for_workflow,
    load_deployments,
    of_run,
    problem_json,
    run_columns,
    run_deployment_json,
    served,
)

__all__ = [
    "Deployment",
    "DeploymentNotServed",
    "DeploymentStatus",
    "Deployments",
    "build_deployment",
    "for_workflow",
    "load_deployments",
    "of_run",
    "problem_json",
    "run_columns",
    "run_deployment_json",
    "served",
]

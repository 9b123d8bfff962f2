"""A change's replay, run in a resource-limited subprocess.

The candidate is content nobody has vetted yet: the replay that judges it runs in a child
process (``python -m app.changes.sandbox``) that sets its resource limits before it reads the
job (``setrlimit``: address space, CPU seconds, open files, size of files it writes; a limit a
process sets on itself cannot be raised back), under a wall-clock timeout, with no database and
no settings: the parent reads the runs and both versions' files and hands them over on stdin;
the child answers one JSON report on stdout. It builds the base and the candidate version from
their files exactly as a deployment on disk is built, hydrates each run's stored FHIR input
again under each, and replays the run on each (recorded Bridge answers and outside effects
substituted, pure tools re-run).

Limits are not a jail: the child runs as the same user and could reach the network; the
candidate it runs is Turtle and value sets (data), and the tools it can call are the ones this
installation already offers.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: What the child may use (``HORISMOS_CHANGE_SANDBOX_*`` settings give these).
DEFAULT_MEMORY_MB = 3072
DEFAULT_CPU_SECONDS = 300


@dataclass(frozen=True, kw_only=True)
class Limits:
    memory_mb: int = DEFAULT_MEMORY_MB
    cpu_seconds: int = DEFAULT_CPU_SECONDS
    open_files: int = 256
    file_size_mb: int = 512

    def args(self) -> list[str]:
        return [str(self.memory_mb), str(self.cpu_seconds), str(self.open_files)]

    @classmethod
    def from_args(cls, args: Sequence[str]) -> Limits:
        memory, cpu, files = (int(a) for a in args)
        return cls(memory_mb=memory, cpu_seconds=cpu, open_files=files)

    def apply(self) -> None:
        """Set the limits on this process (the child, first thing)."""
        import resource

        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (self.memory_mb * mb, self.memory_mb * mb))
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))
        size = self.file_size_mb * mb
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class SandboxFailed(RuntimeError):
    """The sandboxed replay did not produce a report (it crashed, ran out of a limit, or took
    longer than allowed)."""


def run_job(job: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    """Run a replay job in the sandbox; its report, or :class:`SandboxFailed`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app.changes.sandbox", *limits.args()],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            env=env,
            timeout=limits.cpu_seconds * 2,
            check=False,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise SandboxFailed(f"the replay took longer than {limits.cpu_seconds * 2} s") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise SandboxFailed(f"the replay stopped (exit {done.returncode}): {tail}")
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        raise SandboxFailed("the replay's report is not JSON") from None
    return report


def job_of(
    base: Mapping[str, Any], candidate: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A replay job: both versions' material and the runs (recording and stored input)."""
    return {"base": dict(base), "candidate": dict(candidate), "runs": list(runs)}


def encode_input(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _replay(job: Mapping[str, Any]) -> dict[str, Any]:
    from app.cds.hook_input import HookInput, InputUnusable
    from app.changes.compare import decide_again, differs
    from app.deployments import Deployment
    from app.deployments.material import Material, build
    from app.runtime.replay import RecordedRun
    from app.tools.host import ToolHost

    tools = ToolHost.discover()
    like = Deployment(id="sandbox", iri="", version="", digest=None, status="refused", files=())
    versions = {
        name: build(Material.from_json(job[name]), tools.packaged, like=like)
        for name in ("base", "candidate")
    }
    for name, version in versions.items():
        if version.ontology is None or not version.serving:
            problems = "; ".join(str(p) for p in version.problems[:3])
            return {"error": f"the {name} version does not verify: {problems}"}
    base, candidate = versions["base"].ontology, versions["candidate"].ontology
    assert base is not None and candidate is not None
    changed: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    same = 0
    for run in job["runs"]:
        run_id = str(run["runId"])
        try:
            stored = HookInput.from_bytes(base64.b64decode(run["input"]))
        except InputUnusable as exc:
            errors.append({"runId": run_id, "error": str(exc)})
            continue
        recorded = RecordedRun.from_json(run["recording"])
        before = decide_again(base, recorded, stored, tools=tools.invoker())
        after = decide_again(candidate, recorded, stored, tools=tools.invoker())
        if "error" in before or "error" in after:
            errors.append({"runId": run_id, "error": before.get("error") or after.get("error")})
        elif differs(before, after):
            changed.append({"runId": run_id, "before": before, "after": after})
        else:
            same += 1
    return {
        "replayed": len(job["runs"]),
        "same": same,
        "changed": changed,
        "errors": errors,
        "baseDigest": versions["base"].digest,
        "candidateDigest": versions["candidate"].digest,
    }


def main() -> None:
    Limits.from_args(sys.argv[1:4]).apply()
    job = json.load(sys.stdin)
    json.dump(_replay(job), sys.stdout)


if __name__ == "__main__":
    main()


__all__ = ["Limits", "SandboxFailed", "encode_input", "job_of", "run_job"]

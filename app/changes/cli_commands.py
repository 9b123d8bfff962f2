"""``horismos change …``: the lifecycle of a change from the command line (wired in ``app/cli.py``).

Every command works on the database of ``HORISMOS_DATABASE_URL`` and the deployments ``serve``
loads (``HORISMOS_ONTOLOGY_PATHS``). With ``--json`` each prints one JSON object with at least
``id`` and ``status`` (a refusal adds ``reason``; a replay adds ``changed``). Exit codes: 0 done,
1 refused (the reason is printed), 2 a mistake in the command itself.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.changes.control import ChangeControl, ChangeRefused
from app.changes.envelope import ChangeView

Echo = Callable[[str], None]


def default_actor() -> str:
    """Who runs the command, when it is not named."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"


@contextmanager
def _control() -> Iterator[ChangeControl]:
    from app.changes.sandbox import Limits
    from app.deployments.catalog import Catalog
    from app.main import configured_deployments
    from app.settings import get_settings
    from app.store import make_engine
    from app.tools.host import ToolHost

    settings = get_settings()
    tools = ToolHost.discover()
    engine = make_engine(settings.database_url)
    try:
        yield ChangeControl(
            engine=engine,
            catalog=Catalog(configured_deployments(settings, tools), tools.packaged),
            approvers=frozenset(settings.change_approvers),
            limits=Limits(
                memory_mb=settings.change_sandbox_memory_mb,
                cpu_seconds=settings.change_sandbox_cpu_seconds,
            ),
        )
    finally:
        engine.dispose()


def _show(view: ChangeView, as_json: bool, out: Echo) -> None:
    if as_json:
        out(json.dumps(view.model_dump(mode="json"), indent=2, default=str))
        return
    out(
        f"change {view.id}: {view.status} · {view.deploymentId} {view.baseVersion} → "
        f"{view.candidateVersion or '?'} · by {view.author}"
    )
    if view.replay is not None and "replayed" in view.replay:
        report = view.replay
        out(
            f"  replay of {report['replayed']} run(s): {len(report['changed'])} decision(s) "
            f"change, {report['same']} stay"
        )
        for item in report["changed"]:
            out(f"    {item['runId']}: {_said(item['before'])} → {_said(item['after'])}")
    if view.shadow:
        out(
            f"  shadow: {view.shadow['agree']} of {view.shadow['runs']} live call(s) agreed, "
            f"{view.shadow['disagree']} disagreed"
        )


def _said(side: dict[str, Any]) -> str:
    decision = side.get("decision")
    return f"{decision['property']} = {decision['value']}" if decision else "no decision"


def _step(
    action: Callable[[ChangeControl], ChangeView],
    *,
    change_id: str | None,
    as_json: bool,
    out: Echo,
    err: Echo,
) -> int:
    with _control() as control:
        try:
            view = action(control)
        except ChangeRefused as exc:
            if as_json:
                out(json.dumps(exc.to_json(change_id), indent=2, default=str))
            err(f"refused: {exc.message}")
            return 1
    _show(view, as_json, out)
    return 0


def propose(
    files: Sequence[Path],
    *,
    author: str,
    note: str,
    deployment: str | None,
    as_json: bool,
    out: Echo,
    err: Echo,
) -> int:
    """Propose the files as the new text of the deployment's files of the same name (a value
    set: ``valuesets/NAME.json`` beside them)."""
    from app.changes.envelope import ChangedFile, ChangeEnvelope
    from app.ontology.deployments import read_header

    texts: dict[str, str] = {}
    for path in files:
        try:
            texts[path.name] = path.read_text(encoding="utf-8")
        except OSError as exc:
            err(f"{path}: {exc}")
            return 2
    target = deployment
    if target is None:
        declared = {i for p in files if p.suffix == ".ttl" for i in read_header(p).ontologies}
        if len(declared) != 1:
            err("name the deployment (--deployment): the files declare no one ontology")
            return 2
        target = declared.pop()

    def action(control: ChangeControl) -> ChangeView:
        deployments = control.catalog.refresh(control.engine)
        found = deployments.find(str(target))
        own = [Path(f).name for f in found.files] if found is not None else []
        base = found.digest if found is not None and found.digest else ""
        changed = [
            ChangedFile(
                path=name if name in own or not name.endswith(".json") else f"valuesets/{name}",
                content=text,
            )
            for name, text in texts.items()
        ]
        envelope = ChangeEnvelope(
            deployment=str(target),
            baseDigest=base or "-",
            files=changed,
            author=author,
            rationale=note,
        )
        return control.propose(envelope)

    return _step(action, change_id=None, as_json=as_json, out=out, err=err)


def replay(change_id: str, *, last: int, actor: str, as_json: bool, out: Echo, err: Echo) -> int:
    return _step(
        lambda c: c.replay(change_id, last=last, actor=actor),
        change_id=change_id,
        as_json=as_json,
        out=out,
        err=err,
    )


def approve(change_id: str, *, reviewer: str, as_json: bool, out: Echo, err: Echo) -> int:
    return _step(
        lambda c: c.approve(change_id, reviewer=reviewer),
        change_id=change_id,
        as_json=as_json,
        out=out,
        err=err,
    )


def activate(change_id: str, *, actor: str, as_json: bool, out: Echo, err: Echo) -> int:
    return _step(
        lambda c: c.activate(change_id, actor=actor),
        change_id=change_id,
        as_json=as_json,
        out=out,
        err=err,
    )


def rollback(deployment: str, *, actor: str, as_json: bool, out: Echo, err: Echo) -> int:
    return _step(
        lambda c: c.rollback(deployment, actor=actor),
        change_id=None,
        as_json=as_json,
        out=out,
        err=err,
    )


def draft(service: str, *, as_json: bool, out: Echo, err: Echo) -> int:
    from app.runtime.runner import Runner
    from app.settings import get_settings

    bridge = Runner.from_settings(get_settings()).default_bridge
    return _step(
        lambda c: c.draft(service, bridge=bridge),
        change_id=None,
        as_json=as_json,
        out=out,
        err=err,
    )


def show(change_id: str, *, as_json: bool, out: Echo, err: Echo) -> int:
    return _step(
        lambda c: c.view(change_id), change_id=change_id, as_json=as_json, out=out, err=err
    )


def list_changes(deployment: str | None, *, as_json: bool, out: Echo) -> int:
    with _control() as control:
        views = control.views(deployment)
    if as_json:
        out(json.dumps({"changes": [v.model_dump(mode="json") for v in views]}, default=str))
    for view in views if not as_json else []:
        out(
            f"{view.id}  {view.status:<10} {view.deploymentId:<16} "
            f"{view.candidateVersion or '-':<10} {view.author}"
        )
    return 0

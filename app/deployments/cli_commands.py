"""``horismos deployments``: the deployments ``horismos serve`` would serve, and how.

Each at its active version (the database's ``deployment_state``: a change activated through
change control), else at its release files when the database cannot be read (said on stderr).
Exit code 0 when every deployment verifies, 1 when one is refused (it would not be served).
"""

from __future__ import annotations

import json
from collections.abc import Callable

Echo = Callable[[str], None]


def list_deployments(*, as_json: bool, out: Echo, err: Echo) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from app.deployments.catalog import Catalog
    from app.main import configured_deployments
    from app.settings import get_settings
    from app.store import make_engine
    from app.store.db import describe_error
    from app.tools.host import ToolHost

    settings = get_settings()
    tools = ToolHost.discover()
    release = configured_deployments(settings, tools)
    engine = make_engine(settings.database_url)
    try:
        deployments = Catalog(release, tools.packaged).refresh(engine)
    except SQLAlchemyError as exc:
        err(f"the active versions cannot be read ({describe_error(exc)}); the release files:")
        deployments = release
    finally:
        engine.dispose()
    items = [d.to_json() for d in deployments]
    if as_json:
        out(json.dumps({"deployments": items}, indent=2))
    else:
        for d in deployments:
            digest = (d.digest or "-")[:12]
            services = ", ".join(d.services) or "-"
            out(f"{d.id:<20} {d.version:<12} {digest:<12} {d.status:<8} {services}")
    refused = [d for d in deployments if not d.serving]
    for d in refused:
        err(f"{d.id}: not served, {len(d.problems)} problem(s):")
        for problem in d.problems:
            err(f"  {problem}")
    return 1 if refused else 0

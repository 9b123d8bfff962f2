"""``horismos deployments``: the deployments ``horismos serve`` would serve, and how.

Exit code 0 when every deployment verifies, 1 when one is refused (it would not be served).
"""

from __future__ import annotations

import json
from collections.abc import Callable

Echo = Callable[[str], None]


def list_deployments(*, as_json: bool, out: Echo, err: Echo) -> int:
    from app.main import configured_deployments
    from app.settings import get_settings
    from app.tools.host import ToolHost

    deployments = configured_deployments(get_settings(), ToolHost.discover())
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

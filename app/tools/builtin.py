"""Generic tools that ship with the runtime (bound from Turtle as ``python:app.tools.builtin.X``).

``notify`` records a notification (arguments, tool, run) in an in-process outbox, logs its id and
argument names (never the values: they are patient data), and answers with the declared effect
keys: a notification id for ``xsd:string`` effects, ``true`` for ``xsd:boolean``, the run's clock
for ``xsd:dateTime``, the outbox size for ``xsd:integer``. What the notification means (who is
paged, why) is the ontology's business, not this code's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from app.ontology.model import XSD, local_name
from app.tools.call import ToolCall
from app.tools.errors import ToolError
from app.tools.invoker import tool_aware

log = logging.getLogger("horismos.notify")

#: The most recent notifications, newest last (bounded; a host forwards them elsewhere).
OUTBOX: list[dict[str, Any]] = []
_OUTBOX_LIMIT = 1000
_lock = threading.Lock()


@tool_aware
def notify(call: ToolCall) -> Mapping[str, Any]:
    with _lock:
        ident = f"{call.tool.name}-{call.run_id or 'run'}-{len(OUTBOX) + 1}"
        record = {"id": ident, "tool": call.tool.iri, "run": call.run_id, "args": call.args}
        OUTBOX.append(record)
        del OUTBOX[:-_OUTBOX_LIMIT]
        count = len(OUTBOX)
    # the argument values are patient data: the log names them, the outbox keeps them
    log.info("notification %s (arguments: %s)", ident, ", ".join(sorted(call.args)) or "none")
    out: dict[str, Any] = {}
    for effect in call.tool.effects:
        if effect.now or effect.type is None:
            continue
        key = local_name(effect.property)
        if effect.type == XSD + "string":
            out[key] = ident
        elif effect.type == XSD + "boolean":
            out[key] = True
        elif effect.type == XSD + "dateTime" and call.now is not None:
            out[key] = call.now.isoformat()
        elif effect.type == XSD + "integer":
            out[key] = count
        else:
            raise ToolError(f"notify cannot produce a value of type {effect.type}", kind="contract")
    return out

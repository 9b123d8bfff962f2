"""``horismos new SERVICE --hook HOOK``: a first deployment to edit, complete and sound.

The file comes from a Turtle template shipped with the bundled ontologies
(``ontologies/templates/``): its clinical content (the reading, its code, the threshold, the
cards' wording) is data like any deployment's. It is written only where no file is, and only for
a hook of the CDS Hooks registry unless the hook is declared a custom one; the command then
verifies what it wrote, as ``horismos verify`` would.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from string import Template

from app.ontology.hooks import HOOKS
from app.resources import resource_dir

TEMPLATE = resource_dir("ontologies") / "templates" / "patient-service.ttl.template"

#: A service id is one URL path segment (``/cds-services/{id}``); a hook name the same.
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


class ScaffoldRefused(Exception):
    """Raised when ``horismos new`` will not write: a bad name, an unknown hook, a file in the
    way. The message says what to do instead."""


def scaffold(
    service_id: str, hook: str, *, output: Path, custom_hook: bool, iri: str | None
) -> Path:
    """Write the deployment of the CDS service ``service_id`` on ``hook`` to ``output``."""
    if not _NAME.fullmatch(service_id):
        raise ScaffoldRefused(
            f"service id {service_id!r}: use lower-case letters, digits and hyphens "
            "(it becomes the URL /cds-services/<id>)"
        )
    if not _NAME.fullmatch(hook):
        raise ScaffoldRefused(f"hook {hook!r}: use lower-case letters, digits and hyphens")
    if custom_hook and hook in HOOKS:
        raise ScaffoldRefused(f"{hook} is a CDS Hooks registry hook: drop --custom-hook")
    if not custom_hook and hook not in HOOKS:
        raise ScaffoldRefused(
            f"{hook} is not a hook of the CDS Hooks registry ({', '.join(sorted(HOOKS))}); "
            "pass --custom-hook to declare a hook of your own"
        )
    ontology_iri = iri or f"https://example.org/cds/{service_id}"
    text = Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        service_id=service_id,
        hook=hook,
        file_name=output.name,
        ontology_iri=ontology_iri,
        namespace=f"{ontology_iri}#",
        custom_hook="\n    horis:customHook true ;" if custom_hook else "",
    )
    try:
        with output.open("x", encoding="utf-8") as sink:  # never over an existing file
            sink.write(text)
    except FileExistsError:
        raise ScaffoldRefused(
            f"{output} exists and is left as it is: remove it or pass another --output"
        ) from None
    return output


def new_service(
    service_id: str,
    hook: str,
    *,
    output: Path | None,
    custom_hook: bool,
    iri: str | None,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    """The command: write the file, verify it, say what to run next (exit 0), or why not (1)."""
    from app.ontology.cli_commands import verify_files

    target = output or Path(f"{service_id}.ttl")
    try:
        scaffold(service_id, hook, output=target, custom_hook=custom_hook, iri=iri)
    except ScaffoldRefused as exc:
        err(f"horismos new: {exc}")
        return 1
    out(f"wrote {target}: the CDS service {service_id} on {hook}")
    if verify_files([target], out=out, err=err) != 0:
        return 1
    out(f"next: HORISMOS_ONTOLOGY_PATHS={target} horismos serve   (docs/first-service.md)")
    return 0

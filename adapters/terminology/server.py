"""The embedded terminology served over HTTP as a FHIR terminology server.

``horismos terminology serve --port N`` answers the five operations the HTTP client asks
(``adapters.terminology.http``) from the installed HL7 Terminology package and a deployment's
ValueSet and ConceptMap files, in the R4 shapes: a ``ValueSet`` for ``$expand``, ``Parameters``
for the others, an ``OperationOutcome`` with 404 for a value set, map or code it does not know.
It lets a deployment's own files stand in for a hospital's server, and the client be tested
against a real process.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse

from app.terminology.port import TerminologyPort, TerminologyUnavailable

_FHIR_JSON = "application/fhir+json"


def _answer(body: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status, media_type=_FHIR_JSON)


def _not_found(why: str) -> JSONResponse:
    return _answer(
        {
            "resourceType": "OperationOutcome",
            "issue": [{"severity": "error", "code": "not-found", "diagnostics": why}],
        },
        404,
    )


def _parameters(*parameters: dict[str, Any]) -> JSONResponse:
    return _answer({"resourceType": "Parameters", "parameter": list(parameters)})


def terminology_app(port: TerminologyPort) -> FastAPI:
    """A FastAPI app answering FHIR terminology operations from ``port``."""
    app = FastAPI(title="Horismos terminology", openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/metadata")
    def metadata() -> JSONResponse:
        return _answer(
            {
                "resourceType": "TerminologyCapabilities",
                "status": "active",
                "kind": "instance",
                "expansion": {"paging": False},
            }
        )

    @app.get("/ValueSet/$expand")
    def expand(url: str, valueSetVersion: str | None = None) -> JSONResponse:
        try:
            found = port.expand(url, valueSetVersion)
        except TerminologyUnavailable as exc:
            return _not_found(exc.reason)
        contains = [
            {"system": c.partition("|")[0], "code": c.partition("|")[2]}
            for c in sorted(found.codes)
        ]
        body: dict[str, Any] = {
            "resourceType": "ValueSet",
            "url": found.url,
            "status": "active",
            "expansion": {"total": len(contains), "offset": 0, "contains": contains},
        }
        if found.version is not None:
            body["version"] = found.version
        return _answer(body)

    @app.get("/ValueSet/$validate-code")
    def validate_code(
        url: str,
        system: str,
        code: str,
        valueSetVersion: str | None = None,
    ) -> JSONResponse:
        try:
            result = port.validate_code(url, valueSetVersion, system, code)
        except TerminologyUnavailable as exc:
            return _not_found(exc.reason)
        out: list[dict[str, Any]] = [{"name": "result", "valueBoolean": result}]
        if not result:
            said = f"{system}|{code} is not in {url}"
            out.append({"name": "message", "valueString": said})
            out.append({"name": "issues", "resource": _not_in_value_set(said)})
        return _parameters(*out)

    @app.get("/CodeSystem/$lookup")
    def lookup(system: str, code: str) -> JSONResponse:
        display = port.lookup(system, code)
        if display is None:
            return _not_found(f"{system}|{code} is not known")
        return _parameters(
            {"name": "name", "valueString": system}, {"name": "display", "valueString": display}
        )

    @app.get("/CodeSystem/$subsumes")
    def subsumes(system: str, codeA: str = Query(), codeB: str = Query()) -> JSONResponse:
        outcome = port.subsumes(system, codeA, codeB)
        if outcome is None:
            return _not_found(f"the hierarchy of {system} is not known here")
        return _parameters({"name": "outcome", "valueCode": outcome})

    @app.get("/ConceptMap/$translate")
    def translate(
        url: str,
        system: str,
        code: str,
        conceptMapVersion: str | None = None,
    ) -> JSONResponse:
        try:
            matches = port.translate(url, conceptMapVersion, system, code)
        except TerminologyUnavailable as exc:
            return _not_found(exc.reason)
        out: list[dict[str, Any]] = [{"name": "result", "valueBoolean": bool(matches)}]
        for m in matches:
            target_system, _, target_code = m.target.partition("|")
            parts: list[dict[str, Any]] = [{"name": "equivalence", "valueCode": m.equivalence}]
            if target_code:
                parts.append(
                    {
                        "name": "concept",
                        "valueCoding": {"system": target_system, "code": target_code},
                    }
                )
            out.append({"name": "match", "part": parts})
        return _parameters(*out)

    return app


def _not_in_value_set(text: str) -> dict[str, Any]:
    """The ``issues`` of a ``false`` answer, as the FHIR terminology ecosystem writes them: an
    error of tx-issue-type ``not-in-vs`` (the code was checked and is not a member)."""
    return {
        "resourceType": "OperationOutcome",
        "issue": [
            {
                "severity": "error",
                "code": "code-invalid",
                "details": {
                    "coding": [
                        {
                            "system": "http://hl7.org/fhir/tools/CodeSystem/tx-issue-type",
                            "code": "not-in-vs",
                        }
                    ],
                    "text": text,
                },
            }
        ],
    }

"""The terminology port over a FHIR terminology server (``HORISMOS_TERMINOLOGY_URL``).

Each operation is one ``GET`` of the server's type-level operation with its FHIR R4 in
parameters as query parameters, and reads the answer as the R4 OperationDefinitions give it
(the shapes HAPI FHIR, Ontoserver and Snowstorm answer):

- ``ValueSet/$expand?url=&valueSetVersion=`` → a ``ValueSet`` whose ``expansion.contains``
  (nested ``contains`` included) are the members; a server that pages (``expansion.total``
  above what it sent) is asked again with ``offset``;
- ``ValueSet/$validate-code?url=&valueSetVersion=&system=&code=`` → ``Parameters`` with
  ``result`` (``valueBoolean``) and, when false, a ``message``;
- ``CodeSystem/$lookup?system=&code=`` → ``Parameters`` with ``display``; a 404 or an
  ``OperationOutcome`` saying the code is unknown is None;
- ``CodeSystem/$subsumes?system=&codeA=&codeB=`` → ``Parameters`` with ``outcome``
  (``valueCode``: ``equivalent``, ``subsumes``, ``subsumed-by``, ``not-subsumed``);
- ``ConceptMap/$translate?url=&conceptMapVersion=&system=&code=`` → ``Parameters`` with
  ``result`` and a ``match`` per target (parts ``equivalence`` ``valueCode`` — or R5's
  ``relationship`` — and ``concept`` ``valueCoding``).

A bearer token (``HORISMOS_TERMINOLOGY_TOKEN``) is sent when set. Every call has a timeout (the
smaller of the client's own and the one the caller passes, what is left of the hook's
deadline); a timeout, a refused connection, an error status or an answer of another shape is
:class:`TerminologyUnavailable`, its reason said for a clinician.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final, cast

import httpx

from app.terminology.port import (
    TIMED_OUT,
    Expansion,
    Subsumption,
    TerminologyUnavailable,
    TerminologyUsed,
    Translation,
)

_UNREADABLE: Final = "the terminology service's answer could not be read"
_FHIR_JSON: Final = "application/fhir+json"
_SUBSUMPTIONS: Final = ("equivalent", "subsumes", "subsumed-by", "not-subsumed")
#: pages of one expansion at most (a value set of more members is not read here)
_MAX_PAGES: Final = 20


class HttpTerminology:
    """A FHIR R4 terminology server at ``base_url``."""

    remote = True

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 2.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Accept": _FHIR_JSON}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self._client = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._client.close()

    def used(self) -> TerminologyUsed:
        return TerminologyUsed(kind="server", url=self.base_url)

    # --- transport ------------------------------------------------------------------------

    def _get(
        self,
        path: str,
        params: Mapping[str, str | None],
        timeout: float | None,
        *,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        wait = self.timeout if timeout is None else max(0.0, min(self.timeout, timeout))
        if wait <= 0:
            raise TerminologyUnavailable(TIMED_OUT)
        query = {k: v for k, v in params.items() if v is not None}
        try:
            response = self._client.get(path, params=query, timeout=wait)
        except httpx.TimeoutException as exc:
            raise TerminologyUnavailable(TIMED_OUT) from exc
        except httpx.HTTPError as exc:
            raise TerminologyUnavailable("the terminology service could not be reached") from exc
        if missing_ok and response.status_code in (400, 404, 422):
            return None
        if response.status_code != 200:
            raise TerminologyUnavailable(
                f"the terminology service answered with an error ({response.status_code})"
            )
        try:
            data = response.json()
        except ValueError as exc:
            raise TerminologyUnavailable(_UNREADABLE) from exc
        if not isinstance(data, dict):
            raise TerminologyUnavailable(_UNREADABLE)
        return cast(dict[str, Any], data)

    @staticmethod
    def _parameters(data: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
        if data is None or data.get("resourceType") != "Parameters":
            raise TerminologyUnavailable(_UNREADABLE)
        parameters = data.get("parameter")
        if parameters is None:
            return []
        if not isinstance(parameters, list):
            raise TerminologyUnavailable(_UNREADABLE)
        return [p for p in parameters if isinstance(p, Mapping)]

    # --- operations -----------------------------------------------------------------------

    def expand(self, url: str, version: str | None, *, timeout: float | None = None) -> Expansion:
        codes: set[str] = set()
        offset = 0
        for _page in range(_MAX_PAGES):
            data = self._get(
                "/ValueSet/$expand",
                {"url": url, "valueSetVersion": version, "offset": str(offset) if offset else None},
                timeout,
            )
            assert data is not None
            expansion = data.get("expansion") if data.get("resourceType") == "ValueSet" else None
            if not isinstance(expansion, Mapping):
                raise TerminologyUnavailable(_UNREADABLE)
            page = list(_contains(expansion.get("contains")))
            codes.update(page)
            total = expansion.get("total")
            if total is not None and (not isinstance(total, int) or isinstance(total, bool)):
                raise TerminologyUnavailable(_UNREADABLE)
            offset += len(page)
            if not page or total is None or offset >= total:
                return Expansion(
                    url=url, version=data.get("version") or version, codes=frozenset(codes)
                )
        raise TerminologyUnavailable("the terminology service's expansion is too large to read")

    def validate_code(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> bool:
        params = self._parameters(
            self._get(
                "/ValueSet/$validate-code",
                {"url": url, "valueSetVersion": version, "system": system, "code": code},
                timeout,
            )
        )
        for p in params:
            if p.get("name") == "result" and isinstance(p.get("valueBoolean"), bool):
                if p["valueBoolean"]:
                    return True
                return _not_a_member(params)
        raise TerminologyUnavailable(_UNREADABLE)

    def lookup(self, system: str, code: str, *, timeout: float | None = None) -> str | None:
        data = self._get(
            "/CodeSystem/$lookup", {"system": system, "code": code}, timeout, missing_ok=True
        )
        if data is None or data.get("resourceType") == "OperationOutcome":
            return None
        for p in self._parameters(data):
            if p.get("name") == "display" and isinstance(p.get("valueString"), str):
                return str(p["valueString"])
        return None

    def subsumes(
        self, system: str, code_a: str, code_b: str, *, timeout: float | None = None
    ) -> Subsumption | None:
        data = self._get(
            "/CodeSystem/$subsumes",
            {"system": system, "codeA": code_a, "codeB": code_b},
            timeout,
            missing_ok=True,
        )
        if data is None or data.get("resourceType") == "OperationOutcome":
            return None
        for p in self._parameters(data):
            if p.get("name") == "outcome" and p.get("valueCode") in _SUBSUMPTIONS:
                return cast(Subsumption, p["valueCode"])
        raise TerminologyUnavailable(_UNREADABLE)

    def translate(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> tuple[Translation, ...]:
        params = self._parameters(
            self._get(
                "/ConceptMap/$translate",
                {"url": url, "conceptMapVersion": version, "system": system, "code": code},
                timeout,
            )
        )
        out: list[Translation] = []
        for p in params:
            if p.get("name") != "match":
                continue
            parts = {q.get("name"): q for q in p.get("part") or [] if isinstance(q, Mapping)}
            relation = parts.get("equivalence") or parts.get("relationship") or {}
            concept = (parts.get("concept") or {}).get("valueCoding") or {}
            if not isinstance(concept, Mapping):
                raise TerminologyUnavailable(_UNREADABLE)
            equivalence = relation.get("valueCode")
            if isinstance(equivalence, str) and concept.get("code"):
                out.append(
                    Translation(
                        target=f"{concept.get('system', '')}|{concept['code']}",
                        equivalence=equivalence,
                    )
                )
        return tuple(out)


#: the tx-issue-type codes (``http://hl7.org/fhir/tools/CodeSystem/tx-issue-type``) by which a
#: server says a code it could check is not in the value set; any other reason for ``false``
#: (an unknown code system, edition or value set, a version it does not hold) means it could not
#: answer
_NOT_IN_VALUE_SET = frozenset({"not-in-vs", "this-code-not-in-vs", "invalid-code"})
_ISSUE_TYPES = "http://hl7.org/fhir/tools/CodeSystem/tx-issue-type"


def _not_a_member(params: list[Mapping[str, Any]]) -> bool:
    """``False`` when a ``$validate-code`` answer of ``result: false`` says, in its ``issues``,
    that the code is not in the value set and nothing else went wrong; otherwise the server
    could not answer (HAPI and tx.fhir.org also answer ``false`` for a code system or value set
    they do not hold), raised as ``TerminologyUnavailable`` with the server's message."""
    message = next(
        (str(p["valueString"]) for p in params if p.get("name") == "message"
         and isinstance(p.get("valueString"), str)),
        None,
    )  # fmt: skip
    kinds: set[str] = set()
    for p in params:
        outcome = p.get("resource") if p.get("name") == "issues" else None
        issues = outcome.get("issue") if isinstance(outcome, Mapping) else None
        for issue in issues if isinstance(issues, list) else ():
            if not isinstance(issue, Mapping) or issue.get("severity") not in ("error", "fatal"):
                continue
            details = issue.get("details")
            codings = details.get("coding") if isinstance(details, Mapping) else None
            found = {
                str(c.get("code"))
                for c in (codings if isinstance(codings, list) else ())
                if isinstance(c, Mapping) and c.get("system") == _ISSUE_TYPES
            }
            kinds.update(found or {"unknown"})
    if kinds and kinds <= _NOT_IN_VALUE_SET:
        return False
    said = f": {message}" if message else ""
    raise TerminologyUnavailable(
        "the terminology service did not say the code is outside the value set" + said
    )


def _contains(entries: Any) -> Iterator[str]:
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, Mapping):
            continue
        if e.get("code") and not e.get("abstract"):
            yield f"{e.get('system', '')}|{e['code']}"
        yield from _contains(e.get("contains"))

"""Signed card links: a clinician's browser opens the decision record a card links to without
the CDS client's JWT, for that one run, until the link expires (real database, the ASGI app)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.cds.links import RunLinks
from app.settings import Settings
from tests.cds.test_cds_hardening import BASE, ISS, SPEC_JWT, _token, triage_body

OpenClient = Callable[..., AbstractContextManager[TestClient]]
SECRET = "s3cret-for-card-links-0123456789abcdef"
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
ISSUERS = [{"iss": ISS, "jwks": SPEC_JWT["jwks"]}]


@pytest.fixture
def signing(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url=BASE, trusted_issuers=ISSUERS, link_secret=SECRET) as c:
        yield c


def _card_link(c: TestClient, headers: dict[str, str] | None = None) -> tuple[str, str]:
    """(run id, the card link's path and query as the browser would request them)."""
    resp = c.post("/cds-services/horismos-triage", json=triage_body(), headers=headers or {})
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    run_id = str(answer["extension"]["dev.horismos.run"]["runId"])
    [link] = answer["cards"][0]["links"]
    url = urlsplit(link["url"])
    assert f"{url.scheme}://{url.netloc}" == BASE
    return run_id, f"{url.path}?{url.query}" if url.query else url.path


def _hook_link(c: TestClient) -> tuple[str, str]:
    return _card_link(c, _token("/cds-services/horismos-triage"))


def test_the_card_link_opens_the_record_in_a_browser_without_a_jwt(signing: TestClient) -> None:
    run_id, link = _hook_link(signing)
    query = parse_qs(urlsplit(link).query)
    assert set(query) == {"exp", "sig"}
    assert int(query["exp"][0]) > time.time() + 86_000  # a day by default
    page = signing.get(link, headers=BROWSER)
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert "Decision record" in page.text and run_id in page.text
    as_json = signing.get(link)
    assert as_json.status_code == 200
    assert as_json.json()["terminal"] == "EscalateIncomplete"
    # the plain address still needs the client JWT
    assert signing.get(f"/runs/{run_id}", headers=BROWSER).status_code == 401


def test_a_tampered_or_borrowed_link_is_refused(signing: TestClient) -> None:
    run_id, link = _hook_link(signing)
    other_id, _ = _hook_link(signing)
    query = urlsplit(link).query
    exp, sig = parse_qs(query)["exp"][0], parse_qs(query)["sig"][0]
    flipped = ("A" if sig[0] != "A" else "B") + sig[1:]
    refused = [
        f"/runs/{run_id}?exp={exp}&sig={flipped}",
        f"/runs/{run_id}?exp={int(exp) + 3600}&sig={sig}",  # a later expiry, same signature
        f"/runs/{other_id}?{query}",  # another run with this run's signature
        f"/runs/{run_id}?exp={exp}",
        f"/runs/{run_id}?sig={sig}",
    ]
    for path in refused:
        resp = signing.get(path)
        assert resp.status_code == 401, path
        problem = resp.json()
        assert resp.headers["content-type"] == "application/problem+json"
        assert (problem["status"], problem["code"]) == (401, "login")
        assert "not valid" in problem["detail"]
        assert resp.headers["www-authenticate"].startswith("Bearer")
        page = signing.get(path, headers=BROWSER)
        assert page.status_code == 401
        assert "open the decision again from the EHR" in page.text
        assert "EscalateToNurse" not in page.text


def test_an_expired_link_says_so(signing: TestClient) -> None:
    run_id, _ = _hook_link(signing)
    past = int(time.time()) - 1
    query = RunLinks(secret=SECRET.encode()).query(run_id, exp=past)
    resp = signing.get(f"/runs/{run_id}?{query}")
    assert resp.status_code == 401
    assert resp.json()["detail"] == "this link has expired; open the decision again from the EHR"
    page = signing.get(f"/runs/{run_id}?{query}", headers=BROWSER)
    assert page.status_code == 401
    assert "this link has expired; open the decision again from the EHR" in page.text
    assert page.headers["cache-control"] == "no-store"
    still = RunLinks(secret=SECRET.encode()).query(run_id, exp=past + 120)
    assert signing.get(f"/runs/{run_id}?{still}").status_code == 200


def test_a_link_signed_with_another_secret_is_refused(signing: TestClient) -> None:
    run_id, _ = _hook_link(signing)
    forged = RunLinks(secret=b"another-secret-of-enough-length-0000").query(run_id)
    assert signing.get(f"/runs/{run_id}?{forged}").status_code == 401


def test_the_link_does_not_replay_or_resume_the_run(signing: TestClient) -> None:
    run_id, link = _hook_link(signing)
    query = urlsplit(link).query
    replay = signing.post(f"/runs/{run_id}/replay?{query}")
    assert replay.status_code == 401
    assert "Bearer JWT" in replay.json()["detail"]
    assert signing.post(f"/runs/{run_id}/resume?{query}", json={}).status_code == 401
    # with the client JWT the same replay is allowed: the refusal was about the credential
    ok = signing.post(f"/runs/{run_id}/replay", headers=_token(f"/runs/{run_id}/replay"))
    assert ok.status_code == 200


def test_a_client_jwt_still_reads_the_record(signing: TestClient) -> None:
    run_id, _ = _hook_link(signing)
    resp = signing.get(f"/runs/{run_id}", headers=_token(f"/runs/{run_id}"))
    assert resp.status_code == 200
    assert resp.json()["runId"] == run_id


def test_open_mode_is_unchanged(make_app_client: OpenClient) -> None:
    with make_app_client(public_base_url=BASE) as c:
        run_id, link = _card_link(c)
        assert link == f"/runs/{run_id}"  # no secret: a plain link
        assert c.get(link, headers=BROWSER).status_code == 200
        assert c.get(f"/runs/{run_id}?exp=1&sig=nonsense").status_code == 200


def test_without_a_link_secret_the_start_warns_and_links_stay_plain(
    make_app_client: OpenClient, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="app.cds.auth"),
        make_app_client(public_base_url=BASE, trusted_issuers=ISSUERS) as c,
    ):
        run_id, link = _hook_link(c)
        assert link == f"/runs/{run_id}"
        assert c.get(f"{link}?exp=9999999999&sig=x", headers=BROWSER).status_code == 401
    assert any("HORISMOS_LINK_SECRET" in r.getMessage() for r in caplog.records)


def test_a_card_link_without_a_link_secret_opens_a_page_saying_what_to_configure(
    make_app_client: OpenClient,
) -> None:
    with make_app_client(public_base_url=BASE, trusted_issuers=ISSUERS) as c:
        _run_id, link = _hook_link(c)

        page = c.get(link, headers=BROWSER)
        as_json = c.get(link)

    assert page.status_code == 401
    assert page.headers["content-type"].startswith("text/html")
    assert "needs authorization" in page.text
    assert "set HORISMOS_LINK_SECRET" not in page.text  # it says what to do, in full
    assert "HORISMOS_LINK_SECRET to a random value of at least 32 characters" in page.text
    assert '"status"' not in page.text  # no problem JSON for the clinician
    # a program is still told about the client JWT, as a problem document
    assert as_json.status_code == 401
    assert as_json.headers["content-type"].startswith("application/problem+json")
    assert "Bearer JWT" in as_json.text


def test_an_unsigned_address_with_signed_links_says_to_open_the_card_again(
    signing: TestClient,
) -> None:
    run_id, _link = _hook_link(signing)
    page = signing.get(f"/runs/{run_id}", headers=BROWSER)
    assert page.status_code == 401
    assert "open the decision again from the card in the EHR" in page.text


@pytest.mark.parametrize("secret", ["short", "x" * 31])
def test_a_short_link_secret_is_refused_at_start(secret: str) -> None:
    with pytest.raises(ValidationError, match="at least 32 characters"):
        Settings(link_secret=secret)


def test_an_empty_link_secret_means_unset() -> None:
    assert Settings(link_secret="").link_secret is None

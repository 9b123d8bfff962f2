"""One address, two readers: whether a request's ``Accept`` asks for the HTML page rather than
the JSON, and the headers every page is sent with."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PAGE_HEADERS", "prefers_html"]


#: Sent with every page: nothing but the inline style may load or run, the page holds patient
#: data so no cache keeps it, and the content type is not second-guessed.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Vary": "Accept",
}


def _quality(params: Iterable[str]) -> float:
    for param in params:
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def _accept_q(accept: str, media: str) -> float:
    """The quality ``accept`` gives ``media``: the most specific matching range wins (RFC 9110
    §12.5.1); 0 when nothing matches."""
    kind = media.split("/", 1)[0]
    best: tuple[int, float] = (-1, 0.0)
    for item in accept.split(","):
        parts = item.split(";")
        rng = parts[0].strip().lower()
        if rng == media:
            rank = 2
        elif rng == f"{kind}/*":
            rank = 1
        elif rng == "*/*":
            rank = 0
        else:
            continue
        if rank > best[0]:
            best = (rank, _quality(parts[1:]))
    return best[1]


def prefers_html(accept: str | None) -> bool:
    """True when ``Accept`` ranks ``text/html`` above ``application/json``.

    A browser following a link sends ``text/html,…,*/*;q=0.8``: HTML. An API client sending
    ``application/json``, ``*/*`` or no ``Accept`` at all gets JSON, as before the page existed;
    a tie goes to JSON.
    """
    if not accept:
        return False
    html_q = _accept_q(accept, "text/html")
    return html_q > 0 and html_q > _accept_q(accept, "application/json")

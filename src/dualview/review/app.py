"""The review page: a small Starlette app over a `dualview.review.items.ReviewSet`.

Why Starlette (+ uvicorn): a small, well-kept ASGI toolkit (the base of FastAPI) with routing,
responses, middleware and a test client, and nothing else; the page is a few server-rendered
routes, so FastAPI's schema layer would add weight without use, and the standard library's
``http.server`` would leave request parsing, routing and error handling to us. Pages are
Jinja2 templates with autoescaping on (passages are untrusted text), served with a
Content-Security-Policy that allows only the app's own script and style files, so even a
missed escape could not run an injected script. The only path-like route serves a fixed list
of packaged files by name; items are addressed by their number in the sample.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from dualview.errors import DataError
from dualview.resources import optional_import
from dualview.review.items import ReviewSet
from dualview.review.stats import markdown, summarize
from dualview.review.store import (
    FAILURE_LABELS,
    FAILURE_MODES,
    append_verdict,
    check_reviewer,
    latest_verdicts,
    make_verdict,
)

STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _static_files() -> dict[str, bytes]:
    """The packaged static files by name: the whole set a request can ever reach."""
    folder = resources.files("dualview.review") / "static"
    return {
        entry.name: entry.read_bytes()
        for entry in folder.iterdir()
        if entry.is_file() and Path(entry.name).suffix in STATIC_TYPES
    }


class ReviewApp:
    """Routes over one review set; every verdict is appended to the set's verdict file."""

    def __init__(self, review: ReviewSet, reviewer: str, blind: bool = False) -> None:
        self.review = review
        self.reviewer = check_reviewer(reviewer)
        self.blind = blind
        self.static_files = _static_files()
        self.env = Environment(
            loader=PackageLoader("dualview.review", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )

    # -- helpers --------------------------------------------------------------------------
    def _reviewer(self, request: Request) -> str:
        return check_reviewer(request.query_params.get("reviewer") or self.reviewer)

    def _done(self, reviewer: str) -> dict[str, dict[str, Any]]:
        return {
            v["item"]: v for v in latest_verdicts(self.review.verdicts) if v["reviewer"] == reviewer
        }

    def _next_open(self, reviewer: str, after: int) -> int | None:
        done = self._done(reviewer)
        n = len(self.review.items)
        for step in range(1, n + 1):
            index = (after + step) % n
            if self.review.items[index].id not in done:
                return index
        return None

    def _url(self, index: int | None, reviewer: str) -> str:
        where = "/done" if index is None else f"/item/{index}"
        return f"{where}?reviewer={reviewer}"

    def _html(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        body = self.env.get_template(template + ".jinja").render(**context)
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    def _error(self, status: int, message: str) -> HTMLResponse:
        return self._html("error.html", status=status, message=message)

    # -- routes ---------------------------------------------------------------------------
    async def home(self, request: Request) -> Response:
        try:
            reviewer = self._reviewer(request)
        except ValueError as exc:
            return self._error(400, str(exc))
        return RedirectResponse(self._url(self._next_open(reviewer, -1), reviewer), 303)

    async def item(self, request: Request) -> Response:
        try:
            reviewer = self._reviewer(request)
        except ValueError as exc:
            return self._error(400, str(exc))
        index = request.path_params["index"]
        if not 0 <= index < len(self.review.items):
            return self._error(404, "no such item")
        item = self.review.items[index]
        done = self._done(reviewer)
        return self._html(
            "item.html",
            item=item,
            index=index,
            total=len(self.review.items),
            labelled=sum(i.id in done for i in self.review.items),
            mine=done.get(item.id),
            reviewer=reviewer,
            blind=self.blind,
            modes=[(m, FAILURE_LABELS[m]) for m in FAILURE_MODES],
            source=self.review.source,
        )

    async def done(self, request: Request) -> Response:
        try:
            reviewer = self._reviewer(request)
        except ValueError as exc:
            return self._error(400, str(exc))
        verdicts = [v for v in latest_verdicts(self.review.verdicts) if v["reviewer"] == reviewer]
        return self._html(
            "done.html",
            reviewer=reviewer,
            summary=markdown(summarize(verdicts)) if verdicts else "",
        )

    async def save(self, request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0] != "application/json":
            return JSONResponse({"error": "expected application/json"}, 415)
        try:
            body = await request.json()
            index = _item_number(body["index"])
            if not 0 <= index < len(self.review.items):
                raise ValueError("no such item")
            item = self.review.items[index]
            if body.get("item") != item.id:
                raise ValueError("item id does not match its number (stale page?)")
            verdict = make_verdict(
                item.snapshot(),
                str(body.get("reviewer") or ""),
                str(body.get("verdict") or ""),
                body.get("failure_mode"),
                str(body.get("note") or ""),
            )
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse({"error": str(exc)}, 400, headers=SECURITY_HEADERS)
        verdict["source"] = self.review.source
        try:
            append_verdict(self.review.verdicts, verdict)
        except DataError as exc:  # a full disk: the file is as it was, the page says so
            return JSONResponse({"error": str(exc)}, 507, headers=SECURITY_HEADERS)
        next_url = self._url(self._next_open(verdict["reviewer"], index), verdict["reviewer"])
        return JSONResponse(
            {"saved": verdict["verdict_id"], "next": next_url}, headers=SECURITY_HEADERS
        )

    async def stats(self, request: Request) -> Response:
        return JSONResponse(
            summarize(latest_verdicts(self.review.verdicts)), headers=SECURITY_HEADERS
        )

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        body = self.static_files.get(name)
        if body is None:
            return Response("not found", 404, headers=SECURITY_HEADERS)
        media = STATIC_TYPES[Path(name).suffix]
        return Response(body, media_type=media, headers=SECURITY_HEADERS)

    def asgi(self, allowed_hosts: list[str] | None = None) -> Starlette:
        routes = [
            Route("/", self.home),
            Route("/item/{index:int}", self.item),
            Route("/done", self.done),
            Route("/api/verdict", self.save, methods=["POST"]),
            Route("/api/stats", self.stats),
            Route("/static/{name}", self.static),
        ]
        middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or ["*"])]
        return Starlette(routes=routes, middleware=middleware)


def _item_number(value: Any) -> int:
    """The ``index`` of a posted verdict: an integer (not a float such as ``1e999``, which
    JSON reads as infinity, nor a boolean or a string)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"index: expected the item's number (an integer), not {value!r:.40}")
    return value


def create_app(
    review: ReviewSet, reviewer: str, blind: bool = False, host: str = "127.0.0.1"
) -> Starlette:
    """The ASGI app; on a loopback host only loopback Host headers are answered (no DNS
    rebinding from a web page)."""
    hosts = list(LOCAL_HOSTS) if host in LOCAL_HOSTS else None
    return ReviewApp(review, reviewer, blind).asgi(hosts)


def serve(
    review: ReviewSet,
    reviewer: str,
    host: str = "127.0.0.1",
    port: int = 8765,
    blind: bool = False,
) -> None:
    """Serve the page until interrupted (uvicorn, one process)."""
    uvicorn = optional_import("uvicorn", "dualview review")
    uvicorn.run(
        create_app(review, reviewer, blind, host), host=host, port=port, log_level="warning"
    )

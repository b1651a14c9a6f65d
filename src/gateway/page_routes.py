"""The catalog's pages served by the gateway (docs/gateway.md, "The catalog page"): ``/``,
``/aliases/NAME``, ``/requests`` and the rows it polls (``/requests.json``), and their stylesheet
and scripts (``/static/NAME``). Read-only: every route is a GET and reads through
``gateway.site.Reads``. The requests' pages ask the scheduler how each lifecycle stands:
they are calls to it (``gateway.outside``).

Who reads: the requester ``who`` tells, reading what they may see; or, for a request that
carries no identity at all, anyone, when ``[gateway] public_catalog`` is true
(``Lifecycles.for_anyone``: nothing private), else 401.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import MutableHeaders
from starlette.requests import Request as HttpRequest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from slurm_image.domain.errors import Busy, NotAuthenticated, SlurmImageError
from slurm_image.gateway.http_errors import status_for
from slurm_image.gateway.outside import SCHEDULER
from slurm_image.gateway.pages import render, views
from slurm_image.wire.errors import exit_code_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from slurm_image.gateway.outside import OutsideParts
    from slurm_image.gateway.site import Reads
    from slurm_image.gateway.state import Gateway

SITE = render.Site(static=False)
SECURITY_HEADERS = {
    "content-security-policy": render.SERVED_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
"""Sent with every answer of the gateway, pages or not."""
PRIVATE = "no-store"
"""The ``Cache-Control`` of every answer that sets none: what a page, an API answer or an
error says depends on who asks, so no cache (a browser's, a proxy's) keeps it."""
PUBLIC_ASSET = "no-cache"
"""The stylesheet's, scripts' and icon's: the same for everyone, revalidated at each use so a
new release's are taken at once."""
TITLES = {401: "Who is asking?", 403: "Not allowed", 404: "Not found", 429: "Busy"}


class SecurityHeaders:
    """Put ``SECURITY_HEADERS`` on every answer, and ``Cache-Control: no-store`` on every one
    that says nothing of caching (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if "cache-control" not in headers:
                    headers["cache-control"] = PRIVATE
            await send(message)

        await self.app(scope, receive, with_headers)


def reading(request: HttpRequest) -> Reads:
    """What the asker may read, within their request rate; anyone's reading without an
    identity when the catalog is public."""
    gateway: Gateway = request.app.state.gateway
    asker = gateway.who.anonymous_ok(request)
    if asker is None:
        if not gateway.settings.public_catalog:
            raise NotAuthenticated(
                field="authorization",
                rule="the catalog's pages need an identity here ([gateway] public_catalog is"
                " false): ask through the site's own front end",
            )
        client = request.client
        gateway.admit_anonymous(client.host if client is not None else "unknown")
        return gateway.lifecycles.for_anyone()
    gateway.admit(asker)
    return gateway.acting_for(asker).reading()


def _page(request: HttpRequest, build: Callable[[Reads], str], root: str) -> HTMLResponse:
    """The page ``build`` makes for the asker's reading; a refusal as a page of its own."""
    try:
        return HTMLResponse(build(reading(request)))
    except SlurmImageError as error:
        return _refusal_page(error, root)


def _refusal_page(error: SlurmImageError, root: str) -> HTMLResponse:
    status = status_for(error, exit_code_for(error))
    html = render.render(
        "error.html",
        site=SITE,
        root=root,
        title=TITLES.get(status, "Cannot show this page"),
        field=error.field,
        rule=" ".join(error.rule.split()),
    )
    headers = {"Retry-After": str(error.retry_after_s)} if isinstance(error, Busy) else None
    return HTMLResponse(html, status_code=status, headers=headers)


def _outside(request: HttpRequest) -> OutsideParts:
    gateway: Gateway = request.app.state.gateway
    return gateway.outside


def requests_view(lifecycles: Reads) -> views.RequestsView:
    now = datetime.now(UTC)
    events = lifecycles.history(since=now - views.ENDED_WITHIN - timedelta(minutes=1)).events
    return views.requests_view(lifecycles.queue(), events, now)


def add_pages(app: FastAPI) -> None:
    """The catalog's routes on ``app`` (see the module docstring)."""

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def catalog(request: HttpRequest) -> HTMLResponse:
        machine = views.this_machine()

        def build(lifecycles: Reads) -> str:
            rows = views.catalog_rows(lifecycles.catalog_list(), machine)
            return render.render("catalog.html", site=SITE, root="", rows=rows, machine=machine)

        return _page(request, build, "")

    @app.get("/aliases/{name}", response_class=HTMLResponse, include_in_schema=False)
    def alias(request: HttpRequest, name: str) -> HTMLResponse:
        def build(lifecycles: Reads) -> str:
            entries = lifecycles.catalog_entries(name)
            events = lifecycles.history(name).events
            page = views.alias_page(name, entries, events, views.this_machine())
            return render.render("alias.html", site=SITE, root="../", page=page)

        return _page(request, build, "../")

    @app.get("/requests", response_class=HTMLResponse, include_in_schema=False)
    async def requests(request: HttpRequest) -> HTMLResponse:
        def build(lifecycles: Reads) -> str:
            view = requests_view(lifecycles)
            return render.render("requests.html", site=SITE, root="", view=view)

        try:
            return await _outside(request).call(SCHEDULER, lambda: _page(request, build, ""))
        except SlurmImageError as error:
            return _refusal_page(error, "")

    @app.get("/requests.json", include_in_schema=False)
    async def requests_rows(request: HttpRequest) -> JSONResponse:
        def rows() -> dict[str, Any]:
            return requests_view(reading(request)).as_json()

        return JSONResponse(await _outside(request).call(SCHEDULER, rows))

    @app.get("/static/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        data = render.ASSETS.get(name)
        if data is None:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(
            data, media_type=render.asset_type(name), headers={"cache-control": PUBLIC_ASSET}
        )

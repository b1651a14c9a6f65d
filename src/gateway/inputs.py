"""What a request carries, refused at the door when it is not what the gateway reads
(``domain.untrusted_request``): ``RequestLine`` checks the headers' size, the path and the
query string before any route runs, ``UntrustedJsonRoute`` reads every body through
``request_body``, and ``http_refusal`` answers the framework's own refusals (no such route, a
method the route does not answer) with the product's one error body."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import HTTPException
from fastapi.routing import APIRoute
from starlette.requests import Request

from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.untrusted_request import (
    check_headers,
    check_request_line,
    request_body,
)
from slurm_image.wire import shapes
from slurm_image.wire.exit_codes import EXIT_INVALID

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send


class RefusedBody(HTTPException):
    """A body ``request_body`` refused, carried through the framework's reading of it (which
    lets only an ``HTTPException`` through unchanged)."""

    def __init__(self, error: InvalidRequest) -> None:
        super().__init__(status_code=400)
        self.error = error


class UntrustedJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = request_body(await self.body())
            except InvalidRequest as error:
                raise RefusedBody(error) from None
        return self._json


class UntrustedJsonRoute(APIRoute):
    """A route whose JSON body is read by ``request_body``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def untrusted(request: Request) -> Response:
            return await handler(UntrustedJsonRequest(request.scope, request.receive))

        return untrusted


class RequestLine:
    """Refuse (400) a request whose headers ``check_headers`` refuses, or whose path or query
    string ``check_request_line`` refuses."""

    def __init__(self, app: ASGIApp, refuse: Callable[[InvalidRequest], JSONResponse]) -> None:
        self.app = app
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw_path = scope.get("raw_path") or scope["path"].encode()
            try:
                check_headers(scope.get("headers", []))
                check_request_line(raw_path, scope.get("query_string", b""))
            except InvalidRequest as error:
                await self.refuse(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


FIELD_OF_STATUS = {404: ("path", "names nothing here"), 405: ("method", "is not answered here")}


def http_refusal(error: StarletteHTTPException) -> JSONResponse:
    """The answer to a refusal the framework made itself, in the product's error body."""
    from fastapi.responses import JSONResponse

    field, rule = FIELD_OF_STATUS.get(
        error.status_code, ("request", "is not one this gateway reads")
    )
    return JSONResponse(
        shapes.error_json(field, rule, EXIT_INVALID),
        status_code=error.status_code,
        headers=dict(error.headers or {}),
    )

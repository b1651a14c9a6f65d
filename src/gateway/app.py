"""The gateway's HTTP API (docs/gateway.md, "The API"): versioned JSON under ``/v1/``, a thin
layer that only translates; and the catalog's pages (``gateway.pages``). Every route tells who
asks (``who``), takes that requester's verbs (``Lifecycles.acting_for``) and calls the one the
command line calls for the same command; results travel as ``wire.shapes`` writes them and
errors as ``http_errors`` maps them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request as HttpRequest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from slurm_image.domain.errors import InvalidRequest, SlurmImageError
from slurm_image.domain.listing import DEFAULT_LIMIT, ListQuery
from slurm_image.domain.reference import registry_named
from slurm_image.gateway.encoded import json_answer
from slurm_image.gateway.http_errors import retry_after, status_for
from slurm_image.gateway.inputs import (
    RefusedBody,
    RequestLine,
    UntrustedJsonRoute,
    http_refusal,
)
from slurm_image.gateway.outside import (
    REGISTRY,
    SCHEDULER,
    STORE,
    parts_of_start,
)
from slurm_image.gateway.site import SiteVerbs
from slurm_image.gateway.state import Gateway, log_name
from slurm_image.gateway.streams import HeldStream, log_events, long_poll
from slurm_image.gateway.who import Asker
from slurm_image.wire import shapes
from slurm_image.wire.errors import exit_code_for
from slurm_image.wire.exit_codes import EXIT_INTERNAL, EXIT_INVALID
from slurm_image.wire.requests import (
    MAX_WAIT_S,
    FinishBody,
    GcBody,
    LifecycleBody,
    PublishBody,
    ResolveBody,
    WaitBody,
    registry_credentials,
)

if TYPE_CHECKING:
    pass

API_VERSION = "v1"
MAX_FIELD_NAME = 128
"""The longest field name an error names; a longer one (an unknown field's) is ``body``."""


def error_body(error: BaseException) -> tuple[dict[str, Any], int]:
    """The product's one error body for ``error``, and its HTTP status; anything not the
    product's own is an internal error whose text is not shown."""
    if isinstance(error, SlurmImageError):
        code = exit_code_for(error)
        body = shapes.error_json(error.field, " ".join(error.rule.split()), code)
        return body, status_for(error, code)
    return shapes.error_json(
        "gateway", "internal error (see the gateway's log)", EXIT_INTERNAL
    ), 500


def error_response(error: BaseException) -> JSONResponse:
    """``error_body`` as an answer, with ``Retry-After`` when the error says when to ask
    again."""
    body, status = error_body(error)
    headers = {}
    wait_s = retry_after(error)
    if wait_s is not None:
        headers["Retry-After"] = str(wait_s)
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_response(error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0] if error.errors() else {}
    location = [str(part) for part in first.get("loc", ()) if part not in ("body", "query")]
    field_name = ".".join(location) or "body"
    if len(field_name) > MAX_FIELD_NAME:  # an unknown field's name is the sender's text
        field_name = "body"
    kind = first.get("type", "")
    rule = (
        "is not a known field"
        if kind == "extra_forbidden"
        else "is required"
        if kind == "missing"
        else str(first.get("msg", "is not valid")).removeprefix("Value error, ")
    )
    return JSONResponse(shapes.error_json(field_name, rule, EXIT_INVALID), status_code=400)


class BodyLimit:
    """Refuse a request body over ``max_bytes`` (413), whatever ``Content-Length`` says, before
    any route reads it."""

    def __init__(self, app: ASGIApp, max_bytes: Callable[[], int]) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes()
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _too_large(limit)(scope, receive, send)
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, bounded, send)
        except _BodyTooLarge:
            await _too_large(limit)(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        shapes.error_json("body", f"must be at most {limit} bytes ([gateway] max_body_bytes)", 2),
        status_code=413,
    )


async def asker(request: HttpRequest) -> Asker:
    """Who asks (``who``), within their request rate; a request refused for want of an
    identity is recorded as a refusal. In the thread pool: the user database, munged and the
    store's history may block."""
    return await run_in_threadpool(_asker, request)


def _asker(request: HttpRequest) -> Asker:
    gateway: Gateway = request.app.state.gateway
    try:
        who = gateway.who(request)
    except SlurmImageError as error:
        if error.refusal == "unauthenticated":
            client = request.client
            gateway.record_unauthenticated(error, client.host if client else "localhost")
        raise
    gateway.admit(who)
    return who


Asking = Annotated[Asker, Depends(asker)]


async def verbs(request: HttpRequest, who: Asking) -> SiteVerbs:
    """The verbs of the requester who asks: those built already at once, else built in the
    thread pool."""
    gateway: Gateway = request.app.state.gateway
    known = gateway.built_verbs(who)
    if known is not None:
        return known
    return await run_in_threadpool(gateway.acting_for, who)


Verbs = Annotated[SiteVerbs, Depends(verbs)]


def create_app(gateway: Gateway) -> FastAPI:
    """The gateway's ASGI application over ``gateway`` (see the module docstring)."""
    app = FastAPI(
        title="slurm-image gateway",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.gateway = gateway
    app.router.route_class = UntrustedJsonRoute

    @app.exception_handler(RefusedBody)
    async def _refused_body(_: HttpRequest, error: RefusedBody) -> JSONResponse:
        return error_response(error.error)

    @app.exception_handler(StarletteHTTPException)
    async def _framework_refusal(_: HttpRequest, error: StarletteHTTPException) -> JSONResponse:
        return http_refusal(error)

    @app.exception_handler(SlurmImageError)
    async def _product_error(_: HttpRequest, error: SlurmImageError) -> JSONResponse:
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_: HttpRequest, error: RequestValidationError) -> JSONResponse:
        return _validation_response(error)

    @app.exception_handler(Exception)
    async def _internal(_: HttpRequest, error: Exception) -> JSONResponse:
        logging.getLogger(log_name).error("internal error", exc_info=error)
        return error_response(error)

    outside = gateway.outside

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """Whether the gateway answers (no identity needed; nothing of the store is read)."""
        return {"ok": True}

    @app.get("/v1/about")
    async def about() -> dict[str, Any]:
        """The uid the gateway decodes MUNGE credentials as (no identity needed): a client
        restricts each credential to it (``munge --restrict-uid``)."""
        import os

        return {"uid": os.geteuid()}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics(lifecycles: Verbs) -> PlainTextResponse:
        """The store's figures in Prometheus's text format (as ``slurm-image metrics``), for
        the admins: they count the private aliases and events too; and the gateway's own gauges
        (its open streams, connections, busy threads, and calls under way to each outside
        part)."""
        from anyio import to_thread
        from prometheus_client import CONTENT_TYPE_LATEST

        from slurm_image.wire.metrics_text import exposition, gateway_exposition

        store_metrics = await run_in_threadpool(lifecycles.metrics)
        connections = gateway.connections
        own = {
            "gateway_open_streams": gateway.answers.open,
            "gateway_open_connections": connections.in_use if connections else 0,
            "gateway_busy_threads": to_thread.current_default_thread_limiter().borrowed_tokens
            + outside.busy_threads,
            "gateway_registry_calls": outside.under_way("registry"),
            "gateway_scheduler_calls": outside.under_way("scheduler"),
        }
        text = exposition(store_metrics) + gateway_exposition(store_metrics.store, own)
        return PlainTextResponse(text, media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/resolve")
    async def resolve(body: ResolveBody, lifecycles: Verbs) -> dict[str, Any]:
        resolution = await outside.call(
            REGISTRY,
            lambda: lifecycles.resolve_tag(
                body.reference,
                arch=body.arch,
                timeout_s=body.timeout_s,
                credentials=registry_credentials(body.credentials),
            ),
            registry=registry_named(body.reference),
        )
        return shapes.resolution_json(resolution)

    @app.post("/v1/plans")
    async def plan(body: LifecycleBody, lifecycles: Verbs) -> dict[str, Any]:
        """``--dry-run``: the plan and script, nothing created."""
        planned = await outside.call(
            REGISTRY if body.resolve else STORE,
            lambda: lifecycles.plan(body.operation, body.source, **body.asked()),
            registry=registry_named(body.source),
        )
        return shapes.planned_json(planned)

    @app.post("/v1/lifecycles")
    async def start(body: LifecycleBody, lifecycles: Verbs) -> dict[str, Any]:
        """``import``/``inspect`` without waiting: the answer from the store, the lifecycle
        joined or submitted, or staged (``submit: false``). A client waits with
        ``/v1/lifecycles/wait`` and then ``/finish``, echoing ``request``."""
        asked = body.asked()

        def started() -> dict[str, Any]:
            request = lifecycles.request(body.operation, body.source, **asked)
            outcome = lifecycles.run(
                request,
                submit=body.submit,
                replace=body.replace,
                force=body.force,
                credentials=asked["credentials"],
            )
            return shapes.outcome_json(outcome) | {"request": request.model_dump(mode="json")}

        parts = parts_of_start(body.operation, submit=body.submit)
        return await outside.call(parts, started, registry=registry_named(body.source))

    @app.post("/v1/lifecycles/wait")
    async def wait(body: WaitBody, who: Asking, lifecycles: Verbs) -> dict[str, Any]:
        """One long poll: the statuses once every job is final, or after ``timeout_s`` (at most
        25 s) with ``timed_out``; the client asks again to wait longer."""
        timeout_s = min(body.timeout_s, MAX_WAIT_S)
        ids = body.lifecycle_ids
        result = await long_poll(gateway.answers, outside, who, lifecycles, ids, timeout_s)
        return shapes.wait_json(result)

    @app.get("/v1/lifecycles")
    async def status(
        lifecycles: Verbs, ids: Annotated[list[str], Query(min_length=1, max_length=1000)]
    ) -> dict[str, Any]:
        statuses = await outside.call(SCHEDULER, lambda: lifecycles.status(ids))
        return {"lifecycles": [shapes.status_json(s) for s in statuses]}

    @app.post("/v1/lifecycles/{lifecycle_id}/submit")
    async def submit(lifecycle_id: str, lifecycles: Verbs) -> dict[str, Any]:
        submission = await outside.call(SCHEDULER, lambda: lifecycles.submit(lifecycle_id))
        return shapes.submission_json(submission)

    @app.post("/v1/lifecycles/{lifecycle_id}/finish")
    async def finish(lifecycle_id: str, body: FinishBody, lifecycles: Verbs) -> dict[str, Any]:
        """Publish a lifecycle whose job succeeded, for the request that started or joined it
        (the requester is always the one asking)."""
        from pydantic import ValidationError

        from slurm_image.domain.request import Request

        try:
            request = Request.model_validate(body.request, strict=False)
        except ValidationError as error:
            first = error.errors()[0]
            raise InvalidRequest(
                field="request." + ".".join(str(p) for p in first["loc"]), rule=first["msg"]
            ) from None
        request = request.model_copy(update={"requester": lifecycles.requester})
        outcome = await outside.call(
            SCHEDULER, lambda: lifecycles.finish(lifecycle_id, request, replace=body.replace)
        )
        return shapes.outcome_json(outcome)

    @app.post("/v1/lifecycles/{lifecycle_id}/publish")
    async def publish(lifecycle_id: str, body: PublishBody, lifecycles: Verbs) -> dict[str, Any]:
        record = await outside.call(
            SCHEDULER, lambda: lifecycles.publish(lifecycle_id, replace=body.replace)
        )
        return shapes.alias_record_json(record)

    @app.post("/v1/lifecycles/{lifecycle_id}/cancel")
    async def cancel(lifecycle_id: str, lifecycles: Verbs) -> dict[str, Any]:
        return shapes.status_json(
            await outside.call(SCHEDULER, lambda: lifecycles.cancel(lifecycle_id))
        )

    @app.post("/v1/lifecycles/{lifecycle_id}/cleanup")
    async def cleanup(lifecycle_id: str, lifecycles: Verbs) -> dict[str, Any]:
        cleaned = await outside.call(SCHEDULER, lambda: lifecycles.cleanup(lifecycle_id))
        return {"lifecycle_id": cleaned}

    @app.get("/v1/lifecycles/{lifecycle_id}/logs")
    async def logs(
        lifecycle_id: str, who: Asking, lifecycles: Verbs, follow: bool = False
    ) -> HeldStream:
        """The job's logs as Server-Sent Events: ``log`` events (``{"path", "data_b64"}``) as
        the logs grow, then one ``end`` (or ``error``, with the error body)."""
        release = gateway.answers.take(who)
        try:
            # an unknown lifecycle is a 404, not a stream
            cursor = await run_in_threadpool(lifecycles.log_cursor, lifecycle_id, follow=follow)
        except BaseException:
            release()
            raise
        passes = SCHEDULER if follow else STORE
        events = log_events(
            gateway.answers, outside, passes, cursor, lambda error: error_body(error)[0]
        )
        return HeldStream(events, release, media_type="text/event-stream")

    @app.get("/v1/aliases", response_model=dict[str, Any])
    async def list_aliases(
        lifecycles: Verbs,
        limit: int = DEFAULT_LIMIT,
        after: str | None = None,
        role: str | None = None,
        owner: str | None = None,
        prefix: str | None = None,
    ) -> Response:
        """A page of ``list``'s summaries: at most ``limit`` aliases (1 to 1000) in name order
        after ``after``, of ``role``, ``owner`` and names starting with ``prefix``; ``next``
        is the ``after`` of the next page (null: the last). ``show`` has the full records."""

        def page() -> Response:
            query = ListQuery(limit=limit, after=after, role=role, owner=owner, prefix=prefix)
            return json_answer(shapes.summary_page_json(lifecycles.catalog_page(query)))

        return await run_in_threadpool(page)

    @app.get("/v1/aliases/{name}", response_model=dict[str, Any])
    async def show(
        name: str, lifecycles: Verbs, arch: str | None = None, verify: bool = False
    ) -> Response:
        def shown() -> Response:
            if verify:
                record = lifecycles.resolve(name, verify=True, arch=arch)
                return json_answer(
                    {
                        "verified": shapes.alias_record_json(record),
                        "architectures": list(lifecycles.architectures(name)),
                    }
                )
            return json_answer(shapes.published_json(lifecycles.catalog_show(name, arch=arch)))

        return await run_in_threadpool(shown)

    @app.get("/v1/aliases/{name}/path")
    def stable_path(name: str, lifecycles: Verbs, arch: str | None = None) -> dict[str, Any]:
        """``path NAME``: the alias's stable path for ``arch`` (else the gateway host's) and
        the digest-pinned artifact it names now."""
        return lifecycles.stable_path(name, arch=arch).as_dict()

    @app.delete("/v1/aliases/{name}")
    def unregister(name: str, lifecycles: Verbs) -> dict[str, Any]:
        return {"name": lifecycles.unregister(name)}

    @app.get("/v1/outdated")
    async def outdated(
        lifecycles: Verbs,
        names: Annotated[list[str] | None, Query(max_length=10000)] = None,
        timeout_s: Annotated[float, Query(gt=0, le=3600)] = 60.0,
    ) -> dict[str, Any]:
        entries = await outside.call(
            REGISTRY, lambda: lifecycles.outdated(names or (), timeout_s=timeout_s)
        )
        return {"entries": [shapes.outdated_json(entry) for entry in entries]}

    @app.get("/v1/history")
    def history(
        lifecycles: Verbs, name: str | None = None, since: datetime | None = None
    ) -> dict[str, Any]:
        if since is not None and since.tzinfo is None:
            raise InvalidRequest(field="since", rule="must name its time zone")
        return shapes.history_json(lifecycles.history(name, since=since))

    @app.post("/v1/gc")
    async def gc(body: GcBody, lifecycles: Verbs) -> dict[str, Any]:
        from slurm_image.domain.publication import parse_age

        older_than = parse_age(body.older_than)
        removed = await outside.call(
            SCHEDULER, lambda: lifecycles.gc(older_than=older_than, dry_run=body.dry_run)
        )
        return {"removed": [shapes.removed_json(item) for item in removed], "dry_run": body.dry_run}

    @app.get("/v1/queue")
    async def queue(lifecycles: Verbs) -> dict[str, Any]:
        """Who waits for what (Shifter's ``queue``): every lifecycle in flight the requester
        may see, with its orders."""
        return {"queue": await outside.call(SCHEDULER, lifecycles.queue)}

    from slurm_image.gateway.page_routes import SecurityHeaders, add_pages

    add_pages(app)
    app.add_middleware(BodyLimit, max_bytes=lambda: gateway.settings.max_body_bytes)
    app.add_middleware(RequestLine, refuse=error_response)
    app.add_middleware(SecurityHeaders)
    return app

"""The command line as a client of a gateway (docs/gateway.md, "The command line as its client"):
``RemoteLifecycles`` implements the verbs the commands call (``application.lifecycles_port``), as
the local ``Lifecycles`` does, each asked of ``slurm-image serve`` over its unix socket or HTTPS,
and returns the same types, so every command prints and exits exactly as in the local mode. Both
pass one contract suite (tests/contract/test_lifecycles_contract.py).

Each request goes through one ``GatewayExchange`` (``exchange``: who asks, the gateway asked
again while it cannot be reached); a refusal is a ``RemoteError`` with the gateway's field, rule
and exit code.
"""

from __future__ import annotations

import base64
import json
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from slurm_image.adapters.gateway_client.exchange import (
    FIELD,
    LONG_POLL_S,
    UNREACHABLE_GRACE_S,
    Gateway,
    GatewayExchange,
)
from slurm_image.application.lifecycles_port import RESOLVE_TIMEOUT_S, LifecyclesPort
from slurm_image.wire import requests, shapes
from slurm_image.wire.exit_codes import EXIT_SCHEDULER
from slurm_image.wire.remote_error import RemoteError

if TYPE_CHECKING:
    import httpx

    from slurm_image.application.lifecycle import Outcome
    from slurm_image.application.logs import Write
    from slurm_image.application.maintain import Removed
    from slurm_image.application.outdated import OutdatedEntry
    from slurm_image.application.prepare import PlannedLifecycle
    from slurm_image.application.resolve import Resolution
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.application.submit import Submission
    from slurm_image.application.wait import Progress, WaitResult
    from slurm_image.domain.by_name import StablePath
    from slurm_image.domain.credentials import RegistryCredentials
    from slurm_image.domain.history import HistoryRead
    from slurm_image.domain.listing import ListQuery, SummaryPage
    from slurm_image.domain.publication import AliasRecord
    from slurm_image.domain.published import PublishedAlias
    from slurm_image.domain.request import Operation
    from slurm_image.ports.authentication import CredentialSource

Answer = TypeVar("Answer")


class RemoteLifecycles(LifecyclesPort):
    """The verbs, asked of a gateway (see the module docstring)."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        credential_source: CredentialSource | None = None,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.gateway = gateway
        self.exchange = GatewayExchange(
            gateway,
            credential_source=credential_source,
            client=client,
            sleep=sleep,
            monotonic=monotonic,
        )
        self._sleep = sleep
        self._monotonic = monotonic

    # -- lifecycles --------------------------------------------------------------------

    def _lifecycle_body(
        self,
        operation: Operation,
        source: str,
        *,
        name: str,
        role: str,
        arch: str | None,
        resolve: bool = False,
        unsigned_ok: bool = False,
        group: str | None = None,
        credentials: RegistryCredentials | None = None,
    ) -> requests.LifecycleBody:
        return requests.LifecycleBody.model_construct(
            operation=operation,
            source=source,
            name=name,
            role=role,
            arch=arch,
            resolve=resolve,
            unsigned_ok=unsigned_ok,
            group=group,
            credentials=requests.credentials_body(credentials),
        )

    def plan(
        self,
        operation: Operation,
        source: str,
        *,
        name: str,
        role: str,
        arch: str | None = None,
        resolve: bool = False,
        unsigned_ok: bool = False,
        group: str | None = None,
        credentials: RegistryCredentials | None = None,
    ) -> PlannedLifecycle:
        body = self._lifecycle_body(
            operation,
            source,
            name=name,
            role=role,
            arch=arch,
            resolve=resolve,
            unsigned_ok=unsigned_ok,
            group=group,
            credentials=credentials,
        )
        return self.exchange.ask(shapes.planned_from, "POST", "/v1/plans", body=body)

    def import_image(
        self,
        source: str,
        *,
        name: str,
        role: str,
        submit: bool = True,
        wait: bool = False,
        timeout_s: float | None = None,
        replace: bool = False,
        force: bool = False,
        on_poll: Progress | None = None,
        arch: str | None = None,
        resolve: bool = False,
        group: str | None = None,
        credentials: RegistryCredentials | None = None,
    ) -> Outcome:
        body = self._lifecycle_body(
            "import_oci",
            source,
            name=name,
            role=role,
            arch=arch,
            resolve=resolve,
            group=group,
            credentials=credentials,
        )
        return self._run(body, submit, wait, timeout_s, replace, force, on_poll)

    def inspect_image(
        self,
        sqsh: str,
        *,
        name: str,
        role: str,
        submit: bool = True,
        wait: bool = False,
        timeout_s: float | None = None,
        replace: bool = False,
        on_poll: Progress | None = None,
        arch: str | None = None,
        unsigned_ok: bool = False,
        group: str | None = None,
    ) -> Outcome:
        body = self._lifecycle_body(
            "inspect_sqsh",
            sqsh,
            name=name,
            role=role,
            arch=arch,
            unsigned_ok=unsigned_ok,
            group=group,
        )
        return self._run(body, submit, wait, timeout_s, replace, False, on_poll)

    def _run(
        self,
        body: requests.LifecycleBody,
        submit: bool,
        wait: bool,
        timeout_s: float | None,
        replace: bool,
        force: bool,
        on_poll: Progress | None,
    ) -> Outcome:
        """Start the lifecycle (the gateway never holds this request while a job runs); with
        ``wait``, long-poll until its job is final, then have it published for this
        request. A gateway that restarts meanwhile is asked again until ``timeout_s``."""
        from slurm_image.application.lifecycle import Outcome
        from slurm_image.application.wait import require_success
        from slurm_image.domain.lifecycle_state import LifecycleState

        outcome, asked = self.exchange.ask(
            lambda data: (shapes.outcome_from(data), dict(data["request"])),
            "POST",
            "/v1/lifecycles",
            body=body.model_copy(update={"submit": submit, "replace": replace, "force": force}),
        )
        if not wait or outcome.state is not LifecycleState.SUBMITTED:
            return outcome
        waited = self.wait([outcome.lifecycle_id], timeout_s=timeout_s, on_poll=on_poll)
        require_success(waited)
        done = self.exchange.ask(
            shapes.outcome_from,
            "POST",
            f"/v1/lifecycles/{outcome.lifecycle_id}/finish",
            body=requests.FinishBody.model_construct(request=asked, replace=replace),
            retry_for_s=max(UNREACHABLE_GRACE_S, timeout_s or 0.0),
        )
        return Outcome(
            done.lifecycle_id,
            done.state,
            job_id=outcome.job_id,
            published=done.published,
            joined=outcome.joined,
        )

    def submit(self, lifecycle_id: str) -> Submission:
        return self.exchange.ask(
            shapes.submission_from, "POST", f"/v1/lifecycles/{lifecycle_id}/submit"
        )

    def status(self, lifecycle_ids: Sequence[str]) -> list[LifecycleStatus]:
        ids = {"ids": list(lifecycle_ids)}
        return self.exchange.ask(
            each("lifecycles", shapes.status_from), "GET", "/v1/lifecycles", params=ids
        )

    def wait(
        self,
        lifecycle_ids: Sequence[str],
        *,
        timeout_s: float | None = None,
        on_poll: Progress | None = None,
    ) -> WaitResult:
        """Long polls until every job is final or ``timeout_s`` elapsed; a gateway that cannot
        be reached meanwhile (it restarts), that stops, or that has too many waits open (both
        say when to ask again) is asked again until then."""
        from slurm_image.application.wait import WaitResult

        start = self._monotonic()
        while True:
            elapsed = self._monotonic() - start
            left = None if timeout_s is None else max(0.0, timeout_s - elapsed)
            poll = LONG_POLL_S if left is None else min(LONG_POLL_S, left)
            try:
                result = self.exchange.ask(
                    shapes.wait_from,
                    "POST",
                    "/v1/lifecycles/wait",
                    body=requests.WaitBody.model_construct(
                        lifecycle_ids=list(lifecycle_ids), timeout_s=poll
                    ),
                    retry_for_s=max(UNREACHABLE_GRACE_S, left if left is not None else 3600.0),
                )
            except RemoteError as error:
                # a gateway that stops, or has too many waits open, says when to ask again
                pause = error.retry_after_s
                if pause is None or (left is not None and pause > left):
                    raise
                self._sleep(pause)
                continue
            elapsed = self._monotonic() - start
            if on_poll is not None:
                on_poll(result.lifecycles, elapsed)
            if not result.timed_out:
                return WaitResult(result.lifecycles, timed_out=False, elapsed_s=elapsed)
            if timeout_s is not None and elapsed >= timeout_s:
                return WaitResult(result.lifecycles, timed_out=True, elapsed_s=elapsed)

    def logs(self, lifecycle_id: str, write: Write, *, follow: bool = False) -> None:
        """The job's logs, as the gateway streams them (Server-Sent Events)."""
        import httpx

        path = f"/v1/lifecycles/{lifecycle_id}/logs"
        params = {"follow": "true" if follow else "false"}
        try:
            with self.exchange.client.stream(
                "GET", path, params=params, headers=self.exchange.headers(), timeout=None
            ) as answer:
                if not answer.is_success:
                    answer.read()
                    self.exchange.read(answer)
                for kind, data in _events(answer.iter_lines()):
                    if kind == "log":
                        write(str(data["path"]), base64.b64decode(data["data_b64"]))
                    elif kind == "error":
                        raise shapes.remote_error_from(data.get("error", {}))
                    elif kind == "end":
                        return
        except httpx.TransportError as error:
            raise RemoteError(
                field=FIELD,
                rule=f"{self.gateway.url}: the log stream broke ({type(error).__name__})",
                exit_code=EXIT_SCHEDULER,
            ) from None
        raise RemoteError(
            field=FIELD, rule="the log stream ended before its end", exit_code=EXIT_SCHEDULER
        )

    def cancel(self, lifecycle_id: str) -> LifecycleStatus:
        return self.exchange.ask(
            shapes.status_from, "POST", f"/v1/lifecycles/{lifecycle_id}/cancel"
        )

    def publish(self, lifecycle_id: str, *, replace: bool = False) -> AliasRecord:
        return self.exchange.ask(
            shapes.alias_record_from,
            "POST",
            f"/v1/lifecycles/{lifecycle_id}/publish",
            body=requests.PublishBody.model_construct(replace=replace),
        )

    def cleanup(self, lifecycle_id: str) -> str:
        return self.exchange.ask(
            text("lifecycle_id"), "POST", f"/v1/lifecycles/{lifecycle_id}/cleanup"
        )

    # -- tags --------------------------------------------------------------------------

    def resolve_tag(
        self,
        reference: str,
        *,
        arch: str | None = None,
        timeout_s: float = RESOLVE_TIMEOUT_S,
        credentials: RegistryCredentials | None = None,
    ) -> Resolution:
        body = requests.ResolveBody.model_construct(
            reference=reference,
            arch=arch,
            timeout_s=float(timeout_s),
            credentials=requests.credentials_body(credentials),
        )
        return self.exchange.ask(shapes.resolution_from, "POST", "/v1/resolve", body=body)

    def outdated(
        self, names: Sequence[str] = (), *, timeout_s: float = RESOLVE_TIMEOUT_S
    ) -> list[OutdatedEntry]:
        params: dict[str, Any] = {"timeout_s": timeout_s}
        if names:
            params["names"] = list(names)
        return self.exchange.ask(
            each("entries", shapes.outdated_from), "GET", "/v1/outdated", params=params
        )

    # -- the catalog -------------------------------------------------------------------

    def resolve(self, name: str, *, verify: bool = False, arch: str | None = None) -> AliasRecord:
        params: dict[str, Any] = {"verify": "true" if verify else "false"}
        if arch is not None:
            params["arch"] = arch

        def record(data: Any) -> AliasRecord:
            if verify:
                return shapes.alias_record_from(data["verified"])
            return shapes.alias_record_from(dict(shapes.published_from(data).record))

        return self.exchange.ask(record, "GET", f"/v1/aliases/{name}", params=params)

    def architectures(self, name: str) -> tuple[str | None, ...]:
        return self.exchange.ask(
            lambda data: tuple(shapes.published_from(data).architectures),
            "GET",
            f"/v1/aliases/{name}",
        )

    def catalog_show(self, name: str, *, arch: str | None = None) -> PublishedAlias:
        params = {"arch": arch} if arch is not None else None
        return self.exchange.ask(shapes.published_from, "GET", f"/v1/aliases/{name}", params=params)

    def stable_path(self, name: str, *, arch: str | None = None) -> StablePath:
        """``path NAME`` (docs/gateway.md, "Run by name"): the same ``StablePath`` the catalog
        reader gives where the store is mounted, asked for ``arch``, else for this machine's
        architecture, so that a job on a node gets that node's image whichever way it asks."""
        from slurm_image.domain.architecture import from_machine

        asked = arch if arch is not None else from_machine(platform.machine())
        params = {"arch": asked} if asked is not None else None
        return self.exchange.ask(
            shapes.stable_path_from, "GET", f"/v1/aliases/{name}/path", params=params
        )

    def catalog_page(self, query: ListQuery) -> SummaryPage:
        """One page of ``list``'s summaries (``domain.listing``)."""
        params = {
            key: value
            for key, value in (
                ("limit", query.limit),
                ("after", query.after),
                ("role", query.role),
                ("owner", query.owner),
                ("prefix", query.prefix),
            )
            if value is not None
        }
        return self.exchange.ask(
            lambda data: shapes.summary_page_from(data, query.after),
            "GET",
            "/v1/aliases",
            params=params,
        )

    def history(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead:
        params: dict[str, Any] = {}
        if name is not None:
            params["name"] = name
        if since is not None:
            params["since"] = since.isoformat()
        return self.exchange.ask(shapes.history_from, "GET", "/v1/history", params=params)

    def unregister(self, name: str) -> str:
        return self.exchange.ask(text("name"), "DELETE", f"/v1/aliases/{name}")

    def gc(self, *, older_than: timedelta, dry_run: bool = False) -> list[Removed]:
        body = requests.GcBody.model_construct(
            older_than=f"{int(older_than.total_seconds())}s", dry_run=dry_run
        )
        return self.exchange.ask(each("removed", shapes.removed_from), "POST", "/v1/gc", body=body)

    def queue(self) -> list[dict[str, object]]:
        return self.exchange.ask(each("queue", mapping), "GET", "/v1/queue")


def text(key: str) -> Callable[[Any], str]:
    """A reader of the string under ``key`` of an answer."""

    def read_text(data: Any) -> str:
        value = data[key]
        if not isinstance(value, str):
            raise TypeError(f"{key} must be a string")
        return value

    return read_text


def mapping(data: Any) -> dict[str, object]:
    if not isinstance(data, dict):
        raise TypeError("must be an object")
    return data


def each(key: str, read: Callable[[Any], Answer]) -> Callable[[Any], list[Answer]]:
    """A reader of the list under ``key`` of an answer, each item read by ``read``."""

    def read_each(data: Any) -> list[Answer]:
        items = data[key]
        if not isinstance(items, list):
            raise TypeError(f"{key} must be a list")
        return [read(item) for item in items]

    return read_each


def _events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Server-Sent Events as (event, JSON data) pairs."""
    kind, data = "message", ""
    for line in lines:
        if line.startswith("event:"):
            kind = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data += line[len("data:") :].strip()
        elif not line and data:
            parsed = json.loads(data)
            yield kind, parsed if isinstance(parsed, dict) else {}
            kind, data = "message", ""

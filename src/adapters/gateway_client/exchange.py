"""One request to a gateway and the reading of its answer (docs/gateway.md, "The command line
as its client"): where the gateway is (``Gateway``), and ``GatewayExchange``, which sends each
request with who asks and reads the answer, or the gateway's refusal, as ``RemoteError``.

Over HTTPS each request carries a fresh MUNGE credential (``ports.authentication``), restricted to
the uid the gateway says it runs as (``/v1/about``); over the unix socket the kernel tells the
gateway who connects. A gateway that cannot be reached (or restarts) is asked again with backoff
within the command's own time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from slurm_image.domain.gateway_settings import parse_address
from slurm_image.wire import requests, shapes
from slurm_image.wire.exit_codes import EXIT_SCHEDULER
from slurm_image.wire.remote_error import RemoteError

if TYPE_CHECKING:
    import httpx
    from pydantic import BaseModel

    from slurm_image.ports.authentication import CredentialSource

FIELD = "gateway"
Answer = TypeVar("Answer")
LONG_POLL_S = 20.0
"""How long one ``wait`` request is held by the gateway (at most its 25 s)."""
UNREACHABLE_GRACE_S = 10.0
"""How long a one-shot command asks a gateway that cannot be reached again."""


class Gateway:
    """Where the gateway is: ``unix:PATH`` or ``https://HOST:PORT`` (``http://`` on loopback,
    for tests)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.address = parse_address(url, FIELD)
        self.socket = self.address.path
        self.base = "http://gateway" if self.socket is not None else self.address.describe()

    @property
    def tcp(self) -> bool:
        return self.socket is None


class GatewayExchange:
    """Requests to one gateway, each with who asks (see the module docstring)."""

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
        self._credential_source = credential_source
        self.client = client if client is not None else self._new_client()
        self._sleep = sleep
        self._monotonic = monotonic
        self._uid: int | None = None

    def _new_client(self) -> httpx.Client:
        import httpx

        transport = (
            httpx.HTTPTransport(uds=self.gateway.socket)
            if self.gateway.socket is not None
            else httpx.HTTPTransport(retries=0)
        )
        return httpx.Client(
            transport=transport,
            base_url=self.gateway.base,
            timeout=httpx.Timeout(LONG_POLL_S + 30.0, connect=5.0),
            follow_redirects=False,
        )

    def headers(self) -> dict[str, str]:
        if not self.gateway.tcp or self._credential_source is None:
            return {}
        credential = self._credential_source.credential(restrict_uid=self._gateway_uid())
        return {"Authorization": f"Munge {credential}"}

    def _gateway_uid(self) -> int:
        """The uid the gateway decodes credentials as (``/v1/about``, asked once): each
        credential is restricted to it, so that only the gateway's account can take it."""
        if self._uid is None:
            self._uid = self.ask(about_uid, "GET", "/v1/about", anonymous=True)
        return self._uid

    def ask(
        self,
        read: Callable[[Any], Answer],
        method: str,
        path: str,
        *,
        body: BaseModel | None = None,
        params: Mapping[str, Any] | None = None,
        retry_for_s: float = UNREACHABLE_GRACE_S,
        anonymous: bool = False,
    ) -> Answer:
        """``call``, its answer read by ``read`` (``wire``'s): an answer that is not what the
        API says is the gateway's fault, refused like a gateway that cannot be reached."""
        data = self.call(
            method, path, body=body, params=params, retry_for_s=retry_for_s, anonymous=anonymous
        )
        try:
            return read(data)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise RemoteError(
                field=FIELD,
                rule=f"{self.gateway.url} answered {method} {path} with what the API does not"
                f" say ({type(error).__name__})",
                exit_code=EXIT_SCHEDULER,
            ) from None

    def call(
        self,
        method: str,
        path: str,
        *,
        body: BaseModel | None = None,
        params: Mapping[str, Any] | None = None,
        retry_for_s: float = UNREACHABLE_GRACE_S,
        anonymous: bool = False,
    ) -> Any:
        """One request (with no credential when ``anonymous``), asked again while the gateway
        cannot be reached (within ``retry_for_s``); a refusal raises ``RemoteError``."""
        import httpx

        sent = None if body is None else requests.request_json(body)
        deadline = self._monotonic() + retry_for_s
        pause = 0.2
        while True:
            try:
                headers = {} if anonymous else self.headers()
                answer = self.client.request(
                    method, path, json=sent, params=params, headers=headers
                )
            except httpx.TransportError as error:
                if self._monotonic() + pause > deadline:
                    raise RemoteError(
                        field=FIELD,
                        rule=f"{self.gateway.url} cannot be reached ({type(error).__name__})",
                        exit_code=EXIT_SCHEDULER,
                    ) from None
                self._sleep(pause)
                pause = min(pause * 2, 2.0)
                continue
            return self.read(answer)

    def read(self, answer: httpx.Response) -> Any:
        try:
            data = answer.json()
        except ValueError:
            data = None
        if answer.is_success and data is not None:
            return data
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict):
            refusal = shapes.remote_error_from(error)
            retry = answer.headers.get("Retry-After")
            if retry is not None and retry.isdigit():
                refusal.retry_after_s = int(retry)
                refusal.add_note(f"ask again in {retry} s")
            raise refusal
        raise RemoteError(
            field=FIELD,
            rule=f"{self.gateway.url} answered HTTP {answer.status_code} without an error body",
            exit_code=EXIT_SCHEDULER,
        )


def about_uid(data: Any) -> int:
    """The gateway's uid in its ``/v1/about`` answer."""
    from slurm_image.domain.requester import MAX_ID

    uid = data["uid"]
    if type(uid) is not int or not 0 <= uid <= MAX_ID:
        raise ValueError("uid")
    return uid

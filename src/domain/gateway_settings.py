"""The ``[gateway]`` section of a profile (docs/gateway.md, "The profile"): who may do what
through ``slurm-image serve`` and the limits it keeps, read by the rules of ``domain.access``;
and, in a user's profile, ``url``, where the gateway is.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, Field, field_validator

from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.model_config import FROZEN, absent_when_none
from slurm_image.domain.requester import account_name

UNIX_PATH_MAX_BYTES = 107
"""The longest path a unix socket address holds (``sun_path`` less its NUL)."""


@dataclass(frozen=True)
class GatewayAddress:
    """Where a gateway listens and a client asks it: ``unix`` (``path``), ``https`` or, on a
    loopback address only, ``http`` (``host``, ``port``)."""

    kind: Literal["unix", "http", "https"]
    path: str | None = None
    host: str | None = None
    port: int | None = None

    @property
    def tls(self) -> bool:
        return self.kind == "https"

    def describe(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{self.kind}://{host}:{self.port}"


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def parse_address(text: str, field: str) -> GatewayAddress:
    """``unix:PATH`` (absolute), ``https://HOST:PORT``, or ``http://HOST:PORT`` with a loopback
    host: plain HTTP elsewhere would carry MUNGE credentials anyone on the way could replay.
    ``InvalidRequest`` naming ``field`` otherwise."""
    if text.startswith("unix:"):
        path = text[len("unix:") :]
        if not path.startswith("/") or "\x00" in path or len(path.encode()) > UNIX_PATH_MAX_BYTES:
            raise InvalidRequest(
                field=field,
                rule=f"unix:PATH needs an absolute path of at most {UNIX_PATH_MAX_BYTES} bytes",
            )
        return GatewayAddress("unix", path=os.path.normpath(path))
    parts = urlsplit(text)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise InvalidRequest(
            field=field, rule="must be unix:PATH, https://HOST:PORT or http://127.0.0.1:PORT"
        )
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise InvalidRequest(field=field, rule=f"{text} names no port")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise InvalidRequest(
            field=field,
            rule="plain HTTP is for a loopback address only (tests); other login nodes use"
            " https://",
        )
    return GatewayAddress(parts.scheme, host=parts.hostname, port=port)  # type: ignore[arg-type]


GROUP_PREFIX = "@"


def _principal(value: str) -> str:
    name = value.removeprefix(GROUP_PREFIX)
    account_name(name, "gateway principal")
    return value


def _url(value: str) -> str:
    parse_address(value, "gateway.url")
    return value


PRINCIPALS_MAX = 1000


def _principals(values: tuple[str, ...]) -> tuple[str, ...]:
    if len(values) > PRINCIPALS_MAX:
        raise ValueError(f"must list at most {PRINCIPALS_MAX} users and groups")
    for value in values:
        _principal(value)
    return values


Principals = Annotated[tuple[str, ...], AfterValidator(_principals)]
"""Users (``alice``) and groups (``@hpc-admins``)."""

PROXIES_MAX = 100


def _proxies(values: tuple[str, ...]) -> tuple[str, ...]:
    if len(values) > PROXIES_MAX:
        raise ValueError(f"must list at most {PROXIES_MAX} addresses or networks")
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(
                f"{value!r} is no IP address or network (such as 10.1.2.3 or 10.1.0.0/16)"
            ) from None
    return values


Proxies = Annotated[tuple[str, ...], AfterValidator(_proxies)]
"""The reverse proxies whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` the gateway takes:
IP addresses and networks."""


class GatewaySettings(BaseModel):
    """``admins``: everything, ``gc`` and anyone's alias included; ``importers``: who may import
    and inspect (None: every authenticated user); ``public_catalog``: the catalog's pages to
    anyone, unauthenticated; the limits, each answered with 429 and ``Retry-After`` when
    reached (``max_streams``: log streams and long polls open at once; a connection past
    ``max_connections``, or past ``max_connections_per_peer`` from one uid on the socket or one
    address over TCP, is answered 429 and closed); the connections' clocks (a request's head
    within ``header_timeout_s``, an idle connection closed after ``idle_timeout_s``, a SIGTERM
    drained within ``shutdown_timeout_s``); the requests that ask a registry or the scheduler,
    each part's at once within ``max_registry_calls`` and ``max_scheduler_calls``, and each
    registry host's within ``max_calls_per_registry`` (429 past it, at once);
    ``trusted_proxies``: the reverse proxies whose forwarded headers name the client (none: the
    connection's own address is the client's, whatever a request says); ``url``: the gateway a
    client asks (``unix:PATH`` or ``https://HOST:PORT``)."""

    model_config = FROZEN

    url: Annotated[str, AfterValidator(_url)] | None = absent_when_none()
    admins: Principals = ()
    importers: Principals | None = absent_when_none()
    public_catalog: bool = False
    max_active: Annotated[int, Field(ge=1, le=100_000)] = 64
    max_active_per_user: Annotated[int, Field(ge=1, le=100_000)] = 8
    max_body_bytes: Annotated[int, Field(ge=1024, le=16 * 1024 * 1024)] = 256 * 1024
    requests_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = 600
    max_streams: Annotated[int, Field(ge=1, le=100_000)] = 256
    max_streams_per_user: Annotated[int, Field(ge=1, le=100_000)] = 16
    max_connections: Annotated[int, Field(ge=1, le=100_000)] = 1024
    max_connections_per_peer: Annotated[int, Field(ge=1, le=100_000)] = 128
    header_timeout_s: Annotated[int, Field(ge=1, le=600)] = 10
    idle_timeout_s: Annotated[int, Field(ge=1, le=600)] = 5
    shutdown_timeout_s: Annotated[int, Field(ge=1, le=600)] = 10
    max_registry_calls: Annotated[int, Field(ge=1, le=1024)] = 32
    max_calls_per_registry: Annotated[int, Field(ge=1, le=1024)] = 16
    max_scheduler_calls: Annotated[int, Field(ge=1, le=1024)] = 32
    trusted_proxies: Proxies = ()

    @field_validator("admins", "importers", "trusted_proxies", mode="before")
    @classmethod
    def _listify(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value


def named(principals: tuple[str, ...], user: str, groups: frozenset[str]) -> bool:
    """Whether ``user`` or one of ``groups`` is among ``principals``."""
    for principal in principals:
        if principal.startswith(GROUP_PREFIX):
            if principal[len(GROUP_PREFIX) :] in groups:
                return True
        elif principal == user:
            return True
    return False

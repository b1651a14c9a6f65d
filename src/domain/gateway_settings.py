"""The ``[gateway]`` section of a profile (docs/gateway.md, "The profile"): who may do what
through ``slurm-image serve`` and the limits it keeps, read by the rules of ``domain.access``;
and, in a user's profile, ``url``, where the gateway is.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, field_validator

from slurm_image.domain.model_config import FROZEN, absent_when_none
from slurm_image.domain.requester import account_name

GROUP_PREFIX = "@"


def _principal(value: str) -> str:
    name = value.removeprefix(GROUP_PREFIX)
    account_name(name, "gateway principal")
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


class GatewaySettings(BaseModel):
    """``admins``: everything, ``gc`` and anyone's alias included; ``importers``: who may import
    and inspect (None: every authenticated user); ``public_catalog``: the catalog's pages to
    anyone, unauthenticated; the limits, each answered with 429 and ``Retry-After`` when
    reached; ``url``: the gateway a client asks (``unix:PATH`` or ``https://HOST:PORT``)."""

    model_config = FROZEN

    url: str | None = absent_when_none()
    admins: Principals = ()
    importers: Principals | None = absent_when_none()
    public_catalog: bool = False
    max_active: Annotated[int, Field(ge=1, le=100_000)] = 64
    max_active_per_user: Annotated[int, Field(ge=1, le=100_000)] = 8
    max_body_bytes: Annotated[int, Field(ge=1024, le=16 * 1024 * 1024)] = 256 * 1024
    requests_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = 600

    @field_validator("admins", "importers", mode="before")
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

"""The one configuration of the domain's pydantic models: immutable, strict, no unknown keys,
and built on first use (``defer_build``): a command builds the validators of the models it
validates or dumps, not those of every model its modules declare."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
"""Every domain model."""

FROZEN_OPEN = ConfigDict(frozen=True, extra="allow", strict=True, defer_build=True)
"""A model that keeps the tables it does not declare (a site submitter's settings)."""


def _is_none(value: object) -> bool:
    return value is None


def absent_when_none() -> Any:
    """An optional field added to a model after records of it were written: None by default and
    left out of the dump when None, so the canonical bytes (and digests) of a model that does
    not use it stay what they were."""
    return Field(default=None, exclude_if=_is_none)

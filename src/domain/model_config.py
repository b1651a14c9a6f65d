"""The one configuration of the domain's pydantic models: immutable, strict, no unknown keys,
and built on first use (``defer_build``): a command builds the validators of the models it
validates or dumps, not those of every model its modules declare."""

from __future__ import annotations

from pydantic import ConfigDict

FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
"""Every domain model."""

FROZEN_OPEN = ConfigDict(frozen=True, extra="allow", strict=True, defer_build=True)
"""A model that keeps the tables it does not declare (a site submitter's settings)."""

"""Where a pinned reference came from when it was resolved from a tag (docs/design.md,
"Resolving a tag"): the tag, when, and the digest the registry's answer hashed to.

A request made by ``import --resolve`` carries it; the plan records it (plan schema version 3)
and the published alias entry keeps it (alias schema version 4), so ``show`` and ``list`` print
the tag and ``outdated`` can ask the registry again whether the tag still names that image.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pydantic import BaseModel, model_validator

from slurm_image.domain.errors import DomainError, InvalidRequest
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.reference import parse_reference, parse_tag_reference

FIELD = "resolved_from"
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


def utc_time_text(moment: datetime) -> str:
    """The one form every recorded time takes: ISO 8601 in UTC with microseconds and ``Z``."""
    if moment.tzinfo is None:
        raise InvalidRequest(field=FIELD, rule="the clock must give an aware UTC time")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ResolvedFrom(BaseModel):
    """The tag a pinned reference was resolved from: ``tag`` is ``registry/repo:TAG`` as the
    user wrote it (the pin is ``tag@digest``), ``digest`` the SHA-256 of the registry's answer,
    ``resolved_at`` when (ISO 8601, UTC)."""

    model_config = FROZEN

    tag: str
    digest: str
    resolved_at: str

    @model_validator(mode="after")
    def _rules(self) -> ResolvedFrom:
        try:
            reference = parse_tag_reference(self.tag)
        except DomainError as error:
            raise InvalidRequest(field=f"{FIELD}.tag", rule=error.rule, value=self.tag) from None
        if str(reference) != self.tag:
            raise InvalidRequest(field=f"{FIELD}.tag", rule="must be written in its one form")
        if not _SHA256.fullmatch(self.digest):
            raise InvalidRequest(field=f"{FIELD}.digest", rule="must be sha256:<64 lowercase hex>")
        try:
            moment = datetime.fromisoformat(self.resolved_at.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidRequest(
                field=f"{FIELD}.resolved_at", rule="must be an ISO 8601 UTC time"
            ) from None
        if moment.utcoffset() != UTC.utcoffset(None) or utc_time_text(moment) != self.resolved_at:
            raise InvalidRequest(
                field=f"{FIELD}.resolved_at", rule="must be YYYY-MM-DDTHH:MM:SS.ffffffZ (UTC)"
            )
        return self

    @property
    def pinned(self) -> str:
        """The reference the tag was pinned to: ``tag@digest``."""
        return f"{self.tag}@{self.digest}"

    def check_source(self, source: str, field: str = "source") -> None:
        """An import of ``source`` is this resolution's pin, exactly as if typed: the same
        registry, repository and tag, pinned by the digest the registry answered."""
        if parse_reference(source) != parse_reference(self.pinned):
            raise InvalidRequest(
                field=field,
                rule=f"must be the pin {self.pinned} the tag was resolved to",
                value=source,
            )

    def as_dict(self) -> dict[str, str]:
        return {"tag": self.tag, "digest": self.digest, "resolved_at": self.resolved_at}

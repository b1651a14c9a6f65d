"""The records the store keeps (docs/design.md, "The store"): an alias, a source, a publication
marker. Where they live is ``store_layout``; what ``show`` and ``list`` print of an alias,
``published``.

Schema version 2 of alias and source records adds ``chain``: the ``VerifiedChain`` of the
import that produced the artifact, or null. Version 1 records, written before the import job
verified anything, are still read; they carry no chain, and a source without one never answers
an import from the store.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError, model_validator

from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.published import DETAIL_KEYS, SUMMARY_KEYS, check_alias_fields
from slurm_image.domain.roles import Role
from slurm_image.domain.store_layout import STORE_RECORD_MAX_BYTES, hex_digest
from slurm_image.domain.verified_chain import VerifiedChain, check_chain_source

if TYPE_CHECKING:
    from slurm_image.domain.inspection import InspectionRecord

_Record = TypeVar("_Record", bound=BaseModel)
RECORD_SCHEMA_VERSION: Literal[2] = 2
"""The version alias and source records are written in."""


def _check_version(schema_version: int, chain: VerifiedChain | None) -> None:
    if schema_version == 1 and chain is not None:
        raise InvalidRecord(field="chain", rule="a schema version 1 record carries no chain")


class AliasRecord(BaseModel):
    """What ``show NAME`` prints: the alias bound to a verified ``.sqsh`` and its facts.

    ``facts`` and ``inspector_version`` are the inspection record as the host validated it at
    publication; ``identity`` is the artifact's ``(st_dev, st_ino)`` on the publishing host;
    ``chain`` the verified chain of the source, when the artifact came from a verified import.
    """

    model_config = FROZEN

    schema_version: Literal[1, 2] = RECORD_SCHEMA_VERSION
    name: str
    role: Role
    path: str
    sqsh_sha256: str
    size: int
    identity: FileIdentity
    operation: Literal["import_oci", "inspect_sqsh"]
    source: str
    source_digest: str | None
    inspection_schema_version: int
    inspector_version: str
    facts: dict[str, Any]
    lifecycle_id: str
    published_at: str
    chain: VerifiedChain | None = None

    @model_validator(mode="after")
    def _rules(self) -> AliasRecord:
        check_alias_fields(
            self.name,
            self.lifecycle_id,
            self.path,
            self.sqsh_sha256,
            self.source_digest,
            self.chain,
        )
        _check_version(self.schema_version, self.chain)
        return self

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))

    def summary(self) -> dict[str, object]:
        """The keys ``list`` prints per image (docs/cli.md, "Commands")."""
        data = self.model_dump(mode="json", include=set(SUMMARY_KEYS))
        return {key: data[key] for key in SUMMARY_KEYS}

    def details(self) -> dict[str, object]:
        """The keys ``show`` and ``publish`` print (docs/cli.md, "Commands")."""
        data = self.model_dump(mode="json", include=set(DETAIL_KEYS))
        return {key: data[key] for key in DETAIL_KEYS}


class RoleFacts(BaseModel):
    """The facts one inspection recorded for one role of an artifact."""

    model_config = FROZEN

    inspection_schema_version: int
    inspector_version: str
    facts: dict[str, Any]
    lifecycle_id: str


class SourceRecord(BaseModel):
    """An OCI source digest and the artifact it was imported as, with its facts per role.

    ``chain``: what the import job verified from the pinned digest to the bytes squashed; None
    in a record written before it verified anything (version 1, or rewritten from one), which
    names an artifact but proves nothing about where it came from.
    """

    model_config = FROZEN

    schema_version: Literal[1, 2] = RECORD_SCHEMA_VERSION
    source_digest: str
    source: str
    sqsh_sha256: str
    roles: dict[Role, RoleFacts]
    chain: VerifiedChain | None = None

    @model_validator(mode="after")
    def _rules(self) -> SourceRecord:
        hex_digest(self.source_digest.removeprefix("sha256:"), "source_digest")
        hex_digest(self.sqsh_sha256, "sqsh_sha256")
        check_chain_source(self.source_digest, self.chain)
        _check_version(self.schema_version, self.chain)
        return self

    @property
    def verified(self) -> bool:
        """Whether the artifact is known to be what the pinned digest names (its chain)."""
        return self.chain is not None

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))

    def with_role(self, role: Role, facts: RoleFacts) -> SourceRecord:
        """This record with ``role``'s facts, written in the current schema version."""
        return self.model_copy(
            update={
                "roles": {**self.roles, role: facts},
                "schema_version": RECORD_SCHEMA_VERSION,
            }
        )


class PublicationMarker(BaseModel):
    """Written before the first change of a publication and removed after the last one.

    A process that finds it (under the alias lock) finishes the publication when the artifact
    is in place with the recorded digest, else drops it: the old alias record was never touched.
    """

    model_config = FROZEN

    schema_version: Literal[1] = 1
    candidate: str | None
    """The attempt's candidate to move into the store (import), or None."""
    alias: AliasRecord
    source: SourceRecord | None


def facts_of(record: InspectionRecord, lifecycle_id: str) -> RoleFacts:
    """The validated inspection record's facts, as the store keeps them."""
    return RoleFacts(
        inspection_schema_version=record.schema_version,
        inspector_version=record.inspector_version,
        facts=record.facts.model_dump(mode="json"),
        lifecycle_id=lifecycle_id,
    )


def _load(kind: type[_Record], data: bytes, what: str) -> _Record:
    if len(data) > STORE_RECORD_MAX_BYTES:
        raise InvalidRecord(field=what, rule=f"must be at most {STORE_RECORD_MAX_BYTES} bytes")
    try:
        record = kind.model_validate_json(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, DomainError):
            raise InvalidRecord(field=f"{what}.{cause.field}", rule=cause.rule) from None
        location = ".".join(str(part) for part in first["loc"])
        raise InvalidRecord(
            field=f"{what}.{location}" if location else what, rule=first["msg"]
        ) from None
    return record


def load_alias(data: bytes) -> AliasRecord:
    """Parse ``aliases/<name>.json``; raise ``InvalidRecord`` naming the field at fault."""
    return _load(AliasRecord, data, "alias")


def load_source(data: bytes) -> SourceRecord:
    return _load(SourceRecord, data, "source")


def load_marker(data: bytes) -> PublicationMarker:
    return _load(PublicationMarker, data, "marker")


class InvalidAge(DomainError):
    """A duration that is not ``<n>[smhd]``."""


_AGE_MAX_DAYS = 36500  # a century: further back than any attempt, far below timedelta's range
_AGE_MAX_SECONDS = _AGE_MAX_DAYS * 86400
_AGE_MAX_DIGITS = len(str(_AGE_MAX_SECONDS))


def parse_age(text: str, field: str = "older_than") -> timedelta:
    """``30s``, ``15m``, ``12h``, ``7d`` or plain seconds (``gc --older-than``)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    if not number.isdecimal() or not number.isascii():
        raise InvalidAge(
            field=field,
            rule="must be a whole number with an optional unit s, m, h or d",
            value=text,
        )
    seconds = int(number) * units[unit] if len(number) <= _AGE_MAX_DIGITS else None
    if seconds is None or seconds > _AGE_MAX_SECONDS:
        raise InvalidAge(field=field, rule=f"must be at most {_AGE_MAX_DAYS} days", value=text)
    return timedelta(seconds=seconds)

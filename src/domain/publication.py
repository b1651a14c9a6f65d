"""The records the store keeps (docs/design.md, "The store"): an alias, a source, a publication
marker. Where they live is ``store_layout``; what ``show`` and ``list`` print of an alias,
``published``.

Schema version 2 of alias and source records adds ``chain``: the ``VerifiedChain`` of the
import that produced the artifact, or null. Version 1 records, written before the import job
verified anything, are still read; they carry no chain, and a source without one never answers
an import from the store.

Schema version 3 adds ``architecture`` (``domain.architecture``): an alias file is then an
``AliasDocument``, one ``AliasRecord`` entry per architecture, and a source record is kept per
(source digest, architecture). A version 1 or 2 alias file is one record of unknown
architecture (read as a document of that one entry, never written in that form again); a
version 1 or 2 source record never answers an import for an architecture.

Schema version 4 of an alias entry adds ``resolved_from``: the tag its source was resolved from
(``domain.resolution``). An entry is written in version 4 only when it carries one, so every
other entry keeps the bytes of version 3.

Schema version 5 of an alias entry, and 4 of a source record, add ``signed_by``: the signature
the site policy accepted for the import (``domain.signatures.SignedBy``; docs/design.md, "Image
policy and signatures"). A record is written in that version only when it carries one; a
version 5 entry may carry ``resolved_from`` too.

Schema version 6 of an alias entry adds ``job``: the job its artifact came from and when the
scheduler says it started and ended (``JobRun``); an entry answered from the store has none.
Each version of an entry adds one field (``ENTRY_FIELD_VERSIONS``), and an entry is written in
the oldest version that holds the fields it carries, so a version 6 entry may carry every
field before it.

Version 3 of the publication marker adds ``event``: the history event its publisher records
once the publication is done (``domain.history.HistoryEvent``), which a process that finishes
the publication after a crash records instead, as that publisher.

Schema version 4 of an alias document adds who the alias belongs to (docs/gateway.md, "Who may
do what"): ``owner``, the requester whose request first published it through the gateway,
``group``, the group it is shared with, and ``private`` for an alias only that group may see.
Schema version 5 of a source record adds ``private_group``: a source imported with a
requester's own registry credentials answers an import from the store only for that group. A
document or record is written in these versions only when it carries one of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError, model_validator

from slurm_image.domain import paths
from slurm_image.domain.access import Ownership
from slurm_image.domain.architecture import check_architecture
from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.history import HistoryEvent
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.model_config import FROZEN, absent_when_none
from slurm_image.domain.published import (
    DETAIL_KEYS,
    SUMMARY_KEYS,
    check_alias_fields,
    check_job_run,
)
from slurm_image.domain.requester import Requester, account_name
from slurm_image.domain.resolution import ResolvedFrom
from slurm_image.domain.roles import Role
from slurm_image.domain.signed_by import SignedBy
from slurm_image.domain.store_layout import STORE_RECORD_MAX_BYTES, hex_digest
from slurm_image.domain.verified_chain import VerifiedChain, check_chain_source

if TYPE_CHECKING:
    from slurm_image.domain.inspection import InspectionRecord

_Record = TypeVar("_Record", bound=BaseModel)
RECORD_SCHEMA_VERSION: Literal[3] = 3
"""The version alias and source records are written in (an alias entry with a tag: 4)."""
TAGGED_SCHEMA_VERSION: Literal[4] = 4
"""The version of an alias entry that records the tag it was resolved from."""
SIGNED_SCHEMA_VERSION: Literal[5] = 5
"""The version of an alias entry that records the signature it was accepted for."""
SIGNED_SOURCE_SCHEMA_VERSION: Literal[4] = 4
"""The version of a source record that records the signature it was accepted for."""
OWNED_DOCUMENT_SCHEMA_VERSION: Literal[4] = 4
"""The version of an alias document that records its owner, group or privacy."""
PRIVATE_SOURCE_SCHEMA_VERSION: Literal[5] = 5
"""The version of a source record that only one group's imports are answered from."""
JOB_SCHEMA_VERSION: Literal[6] = 6
"""The version of an alias entry that records the job its artifact came from."""
ENTRY_FIELD_VERSIONS: tuple[tuple[str, int], ...] = (
    ("resolved_from", TAGGED_SCHEMA_VERSION),
    ("signed_by", SIGNED_SCHEMA_VERSION),
    ("job", JOB_SCHEMA_VERSION),
)
"""The field each alias entry version after 3 adds, in order."""
SOURCE_FIELD_VERSIONS: tuple[tuple[str, int], ...] = (
    ("signed_by", SIGNED_SOURCE_SCHEMA_VERSION),
    ("private_group", PRIVATE_SOURCE_SCHEMA_VERSION),
)
"""The field each source record version after 3 adds."""
MARKER_SCHEMA_VERSION: Literal[2] = 2
EVENT_MARKER_SCHEMA_VERSION: Literal[3] = 3
"""The version of a publication marker that carries its publisher's history event."""


def oldest_version(carried: Sequence[str], versions: Sequence[tuple[str, int]]) -> int:
    """The oldest version of a record that holds the fields ``carried`` (of ``versions``)."""
    return max(
        (version for field, version in versions if field in carried),
        default=RECORD_SCHEMA_VERSION,
    )


def alias_schema_version(
    resolved_from: ResolvedFrom | None, signed_by: SignedBy | None, job: JobRun | None = None
) -> int:
    """The oldest alias entry version that holds what the entry carries."""
    present = {"resolved_from": resolved_from, "signed_by": signed_by, "job": job}
    carried = [field for field, value in present.items() if value is not None]
    return oldest_version(carried, ENTRY_FIELD_VERSIONS)


def _check_version(
    schema_version: int,
    chain: VerifiedChain | None,
    architecture: str | None,
    carried: Sequence[str],
    versions: Sequence[tuple[str, int]],
) -> None:
    """A record's version is the oldest that holds the fields it carries (``versions``): one
    that carries a field of a later version, or claims a version whose field it lacks, is
    refused naming that field; so is any of them in a record of version 1 or 2."""
    for field, version in versions:
        if field in carried and schema_version < version:
            raise InvalidRecord(field=field, rule=f"is recorded from schema version {version} on")
    wanted = oldest_version(carried, versions)
    if schema_version > RECORD_SCHEMA_VERSION and schema_version != wanted:
        missing = next(field for field, version in versions if version == schema_version)
        raise InvalidRecord(
            field=missing, rule=f"is required in schema version {schema_version} records"
        )
    if schema_version == 1 and chain is not None:
        raise InvalidRecord(field="chain", rule="a schema version 1 record carries no chain")
    if schema_version >= 3 and architecture is None:
        raise InvalidRecord(field="architecture", rule="is required from schema version 3 on")
    if schema_version < 3 and architecture is not None:
        raise InvalidRecord(
            field="architecture", rule=f"a schema version {schema_version} record has none"
        )
    if architecture is not None:
        try:
            check_architecture(architecture, "architecture")
        except DomainError as error:
            raise InvalidRecord(field=error.field, rule=error.rule) from None


class JobRun(BaseModel):
    """The job an entry's artifact came from: its id, and when it started and ended as the
    scheduler dated them (``utc_time_text``; None when the scheduler gave none)."""

    model_config = FROZEN

    job_id: str
    started_at: str | None
    ended_at: str | None

    @model_validator(mode="after")
    def _rules(self) -> JobRun:
        check_job_run(self.job_id, self.started_at, self.ended_at)
        return self


class AliasRecord(BaseModel):
    """What ``show NAME`` prints: the alias bound to a verified ``.sqsh`` and its facts.

    ``facts`` and ``inspector_version`` are the inspection record as the host validated it at
    publication; ``identity`` is the artifact's ``(st_dev, st_ino)`` on the publishing host;
    ``chain`` the verified chain of the source, when the artifact came from a verified import;
    ``architecture`` what the image runs on (None: published before it was recorded);
    ``resolved_from`` the tag the source was resolved from (``import --resolve``; schema
    version 4), None when it was given pinned.
    """

    model_config = FROZEN

    schema_version: Literal[1, 2, 3, 4, 5, 6] = RECORD_SCHEMA_VERSION
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
    architecture: str | None = absent_when_none()
    resolved_from: ResolvedFrom | None = absent_when_none()
    signed_by: SignedBy | None = absent_when_none()
    job: JobRun | None = absent_when_none()

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
        carried = [field for field, _ in ENTRY_FIELD_VERSIONS if getattr(self, field) is not None]
        _check_version(
            self.schema_version, self.chain, self.architecture, carried, ENTRY_FIELD_VERSIONS
        )
        return self

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))

    def summary(self) -> dict[str, object]:
        """The keys ``list`` prints per image (docs/cli.md, "Commands")."""
        data = self.model_dump(mode="json", include=set(SUMMARY_KEYS))
        return {key: data.get(key) for key in SUMMARY_KEYS}

    def details(self) -> dict[str, object]:
        """The keys ``show`` and ``publish`` print (docs/cli.md, "Commands")."""
        data = self.model_dump(mode="json", include=set(DETAIL_KEYS))
        return {key: data.get(key) for key in DETAIL_KEYS}


class AliasDocument(BaseModel):
    """An alias file: the alias's entries, one per architecture, all of one role.

    Written in schema version 3 only. A record written before architectures were recorded is
    read as a document of that one entry (``legacy``), whose ``canonical_bytes`` are the
    record's own; it is replaced whole when the alias is rebound, never extended.
    """

    model_config = FROZEN

    schema_version: Literal[3, 4] = RECORD_SCHEMA_VERSION
    name: str
    entries: tuple[AliasRecord, ...]
    owner: Requester | None = absent_when_none()
    group: str | None = absent_when_none()
    private: Literal[True] | None = absent_when_none()

    @model_validator(mode="after")
    def _rules(self) -> AliasDocument:
        paths.name(self.name)
        if not self.entries:
            raise InvalidRecord(field="entries", rule="must hold at least one entry")
        for entry in self.entries:
            if entry.name != self.name:
                raise InvalidRecord(field="entries.name", rule=f"must be {self.name!r}")
        owned = self.owner is not None or self.group is not None or bool(self.private)
        if owned != (self.schema_version == OWNED_DOCUMENT_SCHEMA_VERSION):
            raise InvalidRecord(
                field="schema_version",
                rule=f"an owner, group or privacy is recorded exactly in version"
                f" {OWNED_DOCUMENT_SCHEMA_VERSION}",
            )
        if self.group is not None:
            try:
                account_name(self.group, "group")
            except DomainError as error:
                raise InvalidRecord(field="group", rule=error.rule) from None
        if self.private and self.group is None:
            raise InvalidRecord(field="private", rule="a private alias names its group")
        if self.legacy:
            if owned:
                raise InvalidRecord(
                    field="owner", rule="a record from before architectures has no owner"
                )
            return self
        architectures = [entry.architecture for entry in self.entries]
        if None in architectures:
            raise InvalidRecord(
                field="entries.architecture", rule="every entry names its architecture"
            )
        if architectures != sorted(set(architectures)):  # type: ignore[type-var]
            raise InvalidRecord(
                field="entries", rule="one entry per architecture, sorted by architecture"
            )
        if len({entry.role for entry in self.entries}) != 1:
            raise InvalidRecord(field="entries.role", rule="every entry has the alias's role")
        return self

    @classmethod
    def of(cls, *entries: AliasRecord, ownership: Ownership | None = None) -> AliasDocument:
        """The document of ``entries`` (at least one, one name), sorted by architecture, with
        ``ownership`` (None, or one that names nobody: the store owner's alias)."""
        ordered = sorted(entries, key=lambda entry: entry.architecture or "")
        owned = ownership if ownership is not None and ownership.recorded else None
        if owned is None:
            return cls(name=entries[0].name, entries=tuple(ordered))
        return cls(
            schema_version=OWNED_DOCUMENT_SCHEMA_VERSION,
            name=entries[0].name,
            entries=tuple(ordered),
            owner=owned.owner,
            group=owned.group,
            private=True if owned.private else None,
        )

    @property
    def ownership(self) -> Ownership:
        """Who the alias belongs to (``domain.access``)."""
        return Ownership(owner=self.owner, group=self.group, private=bool(self.private))

    @property
    def legacy(self) -> bool:
        """One record written before architectures were recorded."""
        return len(self.entries) == 1 and self.entries[0].architecture is None

    @property
    def role(self) -> Role:
        return self.entries[0].role

    @property
    def architectures(self) -> tuple[str | None, ...]:
        return tuple(entry.architecture for entry in self.entries)

    def entry(self, architecture: str | None) -> AliasRecord | None:
        for entry in self.entries:
            if entry.architecture == architecture:
                return entry
        return None

    def with_entry(self, record: AliasRecord) -> AliasDocument:
        """This document with ``record``'s architecture bound to ``record``, the others and
        the ownership kept."""
        others = [entry for entry in self.entries if entry.architecture != record.architecture]
        return AliasDocument.of(*others, record, ownership=self.ownership)

    def canonical_bytes(self) -> bytes:
        if self.legacy:
            return self.entries[0].canonical_bytes()
        return canonical_json(self.model_dump(mode="json"))


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
    names an artifact but proves nothing about where it came from. ``source_digest`` is the
    chain's pin, or its per-architecture manifest (the same image, asked for by that digest).
    ``architecture``: the image's (None: recorded before it was, and then it answers nothing).
    """

    model_config = FROZEN

    schema_version: Literal[1, 2, 3, 4, 5] = RECORD_SCHEMA_VERSION
    source_digest: str
    source: str
    sqsh_sha256: str
    roles: dict[Role, RoleFacts]
    chain: VerifiedChain | None = None
    architecture: str | None = absent_when_none()
    signed_by: SignedBy | None = absent_when_none()
    """The signature the policy accepted when the source was imported (schema version 4, or
    5)."""
    private_group: str | None = absent_when_none()
    """The group whose imports alone this record answers (schema version 5): the source was
    imported with a requester's own registry credentials."""

    @model_validator(mode="after")
    def _rules(self) -> SourceRecord:
        hex_digest(self.source_digest.removeprefix("sha256:"), "source_digest")
        hex_digest(self.sqsh_sha256, "sqsh_sha256")
        check_chain_source(self.source_digest, self.chain)
        if self.private_group is not None:
            try:
                account_name(self.private_group, "private_group")
            except DomainError as error:
                raise InvalidRecord(field="private_group", rule=error.rule) from None
        carried = [field for field, _ in SOURCE_FIELD_VERSIONS if getattr(self, field) is not None]
        _check_version(
            self.schema_version, self.chain, self.architecture, carried, SOURCE_FIELD_VERSIONS
        )
        return self

    @staticmethod
    def version_for(signed_by: SignedBy | None, private_group: str | None) -> int:
        """The oldest source record version that holds what the record carries."""
        present = {"signed_by": signed_by, "private_group": private_group}
        carried = [field for field, value in present.items() if value is not None]
        return oldest_version(carried, SOURCE_FIELD_VERSIONS)

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
                "schema_version": self.version_for(self.signed_by, self.private_group),
            }
        )


class PublicationMarker(BaseModel):
    """Written before the first change of a publication and removed after the last one.

    A process that finds it (under the alias lock) finishes the publication when the artifact
    is in place with the recorded digest, else drops it: the old alias record was never touched.
    Version 2 holds the whole alias ``document`` to write and every source record; version 1
    (one record, at most one source) is still finished. Version 3 adds the ``event`` the
    publisher records in the store's history once done (who published, what was bound, what
    it displaced), so that a recovery records it, as that publisher.
    """

    model_config = FROZEN

    schema_version: Literal[1, 2, 3] = MARKER_SCHEMA_VERSION
    candidate: str | None
    """The attempt's candidate to move into the store (import), or None."""
    alias: AliasRecord
    """The entry being published: its artifact must be in place for the rest to be written."""
    source: SourceRecord | None = None
    document: AliasDocument | None = absent_when_none()
    sources: tuple[SourceRecord, ...] = ()
    event: HistoryEvent | None = absent_when_none()

    @model_validator(mode="after")
    def _rules(self) -> PublicationMarker:
        if self.schema_version == 1 and (self.document is not None or self.sources):
            raise InvalidRecord(
                field="schema_version", rule="version 1 holds one record and one source"
            )
        if self.schema_version >= 2 and (self.document is None or self.source is not None):
            raise InvalidRecord(
                field="schema_version", rule="version 2 and 3 hold a document and sources"
            )
        if (self.schema_version == EVENT_MARKER_SCHEMA_VERSION) != (self.event is not None):
            raise InvalidRecord(field="event", rule="is recorded exactly in version 3 markers")
        if self.event is not None and (
            self.event.event not in ("published", "replaced")
            or self.event.artifact != self.alias.sqsh_sha256
        ):
            raise InvalidRecord(field="event", rule="must bind the published entry's artifact")
        if self.document is not None and self.document.entry(self.alias.architecture) != (
            self.alias
        ):
            raise InvalidRecord(field="document", rule="must hold the published entry")
        return self

    @property
    def alias_document(self) -> AliasDocument:
        """The alias as the publication leaves it."""
        return self.document if self.document is not None else AliasDocument.of(self.alias)

    @property
    def source_records(self) -> tuple[SourceRecord, ...]:
        return self.sources if self.source is None else (self.source,)


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
        location = ".".join(str(part) for part in first["loc"])
        if isinstance(cause, DomainError):  # raised by a model's rules, at the model's location
            within = [what, *(str(part) for part in first["loc"])]
            named = cause.field.split(".")
            if len(within) > 1 and within[-1] == named[0]:  # a field's own rule names itself
                within.pop()
            raise InvalidRecord(field=".".join(within + named), rule=cause.rule) from None
        raise InvalidRecord(
            field=f"{what}.{location}" if location else what, rule=first["msg"]
        ) from None
    return record


_DOCUMENT = re.compile(rb'\s*\{\s*"entries"\s*:')
"""An alias document's first key (keys are sorted); an older record's is another."""


def load_alias(data: bytes) -> AliasDocument:
    """Parse ``aliases/<name>.json`` (a document, or one record of an older schema version);
    raise ``InvalidRecord`` naming the field at fault."""
    if len(data) <= STORE_RECORD_MAX_BYTES and _DOCUMENT.match(data):
        return _load(AliasDocument, data, "alias")
    return AliasDocument.of(_load(AliasRecord, data, "alias"))


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

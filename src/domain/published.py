"""What ``show`` and ``list`` print of a published alias (docs/cli.md, "Commands"), and the alias
record as a launcher reads it: as it was written, without the model library.

The record was validated when it was published and ``show --verify`` validates it again
(``publication.load_alias``), so a plain read checks the printed keys' types and the alias
fields' rules (``check_alias_fields``, which ``AliasRecord`` validates with too), not the rest
of the record. ``chain`` is printed as null for a record written before it existed,
``architecture`` as null ("unknown") for one written before architectures were recorded, and
``resolved_from`` (the tag the source was resolved from) as null for an entry whose source was
given pinned, ``signed_by`` (the signature the site policy accepted) as null for one no
signature was required for, and ``job`` (the job the artifact came from, and when it ran) as
null for one answered from the store or published before jobs were recorded.

An alias file holds one entry per architecture (``publication.AliasDocument``); ``show``
resolves one of them (``choose_entry``), ``list`` prints each. Who the alias belongs to is the
document's (``OWNERSHIP_KEYS``: ``owner``, the user name, null for the store's owner; ``group``;
``private``), printed with every entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from slurm_image.domain import paths
from slurm_image.domain.architecture import ARCHITECTURES, from_machine
from slurm_image.domain.errors import DomainError, InvalidRecord, NoImageForArchitecture
from slurm_image.domain.roles import ROLES
from slurm_image.domain.store_layout import hex_digest
from slurm_image.domain.verified_chain import VerifiedChain, check_chain_source

if TYPE_CHECKING:
    from slurm_image.domain.access import Ownership

SUMMARY_KEYS = (
    "name",
    "architecture",
    "role",
    "path",
    "sqsh_sha256",
    "source",
    "source_digest",
    "published_at",
    "resolved_from",
    "signed_by",
)
"""The keys ``list`` prints per image (docs/cli.md, "Commands")."""
DETAIL_KEYS = (
    *SUMMARY_KEYS,
    "facts",
    "inspector_version",
    "lifecycle_id",
    "size",
    "chain",
    "job",
)
"""The keys ``show`` and ``publish`` print (docs/cli.md, "Commands")."""
OWNERSHIP_KEYS = ("owner", "group", "private")
"""Printed with every entry of an alias: who it belongs to (docs/gateway.md)."""
_OPTIONAL_KEYS = ("chain", "architecture", "resolved_from", "signed_by", "job")
"""Printed as null when absent: older records have no chain, no architecture, an entry whose
source was given pinned no tag, one no signature was required for no signature, and one
answered from the store (or published before jobs were recorded) no job."""
JOB_KEYS = ("ended_at", "job_id", "started_at")
_JOB_ID = re.compile(r"[1-9][0-9]{0,9}")
_RECORDED_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
_SIGNED_BY_KEYS = ("digest", "format", "key_fingerprint", "signed_digest")
_RESOLVED_FROM_KEYS = ("digest", "resolved_at", "tag")
_TEXT_KEYS = (
    "name",
    "role",
    "path",
    "sqsh_sha256",
    "source",
    "published_at",
    "lifecycle_id",
    "inspector_version",
)


def check_alias_fields(
    name: str,
    lifecycle_id: str,
    path: str,
    sqsh_sha256: str,
    source_digest: str | None,
    chain: VerifiedChain | None,
) -> None:
    """The rules of an alias record's fields; raises the ``DomainError`` of the first broken."""
    paths.name(name)
    paths.name(lifecycle_id, "lifecycle_id")
    paths.sqsh_path(path, "path")
    hex_digest(sqsh_sha256, "sqsh_sha256")
    if source_digest is not None:
        hex_digest(source_digest.removeprefix("sha256:"), "source_digest")
    check_chain_source(source_digest, chain)


def check_job_run(job_id: object, started_at: object, ended_at: object) -> None:
    """The rules of an entry's ``job`` (the job its artifact came from): a Slurm job id, and
    the times the scheduler gave as every recorded time is written (``utc_time_text``: UTC,
    microseconds, ``Z``), or null when it gave none; an end only after a start, never before
    it. Raises ``InvalidRecord`` naming the key."""
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise InvalidRecord(field="job.job_id", rule="must be a job id (decimal digits)")
    for key, value in (("started_at", started_at), ("ended_at", ended_at)):
        if value is None:
            continue
        if not isinstance(value, str) or not _RECORDED_TIME.fullmatch(value):
            raise InvalidRecord(
                field=f"job.{key}", rule="must be null or a UTC time 2026-01-31T12:00:00.000000Z"
            )
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise InvalidRecord(field=f"job.{key}", rule="is no date and time") from None
    if ended_at is not None and (started_at is None or str(ended_at) < str(started_at)):
        raise InvalidRecord(field="job.ended_at", rule="comes only after started_at")


def choose_entry(
    name: str,
    architectures: Sequence[str | None],
    *,
    asked: str | None,
    machine: str | None,
) -> int:
    """The index of the entry ``show`` resolves among an alias's ``architectures``: the one
    ``asked`` for, else the one of the ``machine`` asking (``platform.machine()``). A record
    written before architectures were recorded (the one entry, None) answers only when no
    architecture is asked for. Raises ``NoImageForArchitecture`` naming what the alias has."""
    wanted = asked if asked is not None else from_machine(machine or "")
    if wanted is not None and wanted in architectures:
        return architectures.index(wanted)
    if asked is None and list(architectures) == [None]:
        return 0
    has = ", ".join(architecture or "unknown" for architecture in architectures)
    if wanted is None:
        rule = f"this machine ({machine or 'unknown'}) is none of {', '.join(ARCHITECTURES)}"
    else:
        rule = f"alias {name} has no image for {wanted}"
    raise NoImageForArchitecture(
        field="arch", rule=f"{rule}; {name} has: {has} (choose one with --arch)", value=wanted
    )


@dataclass(frozen=True)
class Owned:
    """Who an alias belongs to, as its file says: the owner's user name and uid (None: the
    store's owner), its group, whether only that group may see it."""

    user: str | None = None
    uid: int | None = None
    group: str | None = None
    private: bool = False

    def fields(self) -> dict[str, object]:
        return {"owner": self.user, "group": self.group, "private": self.private}

    def ownership(self) -> Ownership:
        """The same as ``access.Ownership``, for the rules of who may see or change it."""
        from slurm_image.domain.access import Ownership
        from slurm_image.domain.requester import Requester

        owner = (
            Requester(user=self.user, uid=self.uid)
            if self.user is not None and self.uid is not None
            else None
        )
        return Ownership(owner=owner, group=self.group, private=self.private)


def read_owned(document: Mapping[str, Any]) -> Owned:
    """The ownership keys of an alias file (a version 4 document), checked as read."""
    owner = document.get("owner")
    group = document.get("group")
    private = document.get("private")
    if owner is not None and not (
        isinstance(owner, dict)
        and sorted(owner) == ["uid", "user"]
        and isinstance(owner["user"], str)
        and type(owner["uid"]) is int
    ):
        raise InvalidRecord(field="alias.owner", rule="must be null or {user, uid}")
    if group is not None and not isinstance(group, str):
        raise InvalidRecord(field="alias.group", rule="must be null or a group name")
    if private not in (None, True) or (private and group is None):
        raise InvalidRecord(field="alias.private", rule="must be absent, or true with a group")
    return Owned(
        user=owner["user"] if owner else None,
        uid=owner["uid"] if owner else None,
        group=group,
        private=bool(private),
    )


@dataclass(frozen=True)
class PublishedAlias:
    """One entry of an alias as read from the store, with the keys ``show`` and ``list`` print,
    the ``architectures`` of every entry the alias has, and who the alias belongs to."""

    record: Mapping[str, Any]
    architectures: tuple[str | None, ...] = ()
    owned: Owned = Owned()

    def summary(self) -> dict[str, object]:
        return {key: self.record.get(key) for key in SUMMARY_KEYS}

    def details(self) -> dict[str, object]:
        return {key: self.record.get(key) for key in DETAIL_KEYS}


@dataclass(frozen=True)
class PublishedEntries:
    """Every entry of one alias file, as read."""

    name: str
    entries: tuple[PublishedAlias, ...]
    owned: Owned = Owned()

    @property
    def architectures(self) -> tuple[str | None, ...]:
        return tuple(entry.record.get("architecture") for entry in self.entries)

    def resolve(self, *, asked: str | None, machine: str | None) -> PublishedAlias:
        index = choose_entry(self.name, self.architectures, asked=asked, machine=machine)
        return self.entries[index]


def read_published(data: bytes, name: str) -> PublishedEntries:
    """The alias file ``data`` of ``name``: a document of entries, or one record of an older
    schema version; raises ``InvalidRecord`` naming the field."""
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        raise InvalidRecord(field="alias", rule="is not a JSON object") from None
    if not isinstance(parsed, dict):
        raise InvalidRecord(field="alias", rule="is not a JSON object")
    if "entries" not in parsed:
        record = _read_entry(parsed, name, "alias")
        if record.get("architecture") is not None:
            raise InvalidRecord(field="alias.architecture", rule="is recorded in entries only")
        return PublishedEntries(name, (PublishedAlias(record, (None,)),))
    entries = parsed["entries"]
    if parsed.get("name") != name or not isinstance(entries, list) or not entries:
        raise InvalidRecord(field="alias.entries", rule=f"must be the entries of {name}")
    records = [
        _read_entry(entry, name, f"alias.entries.{index}") for index, entry in enumerate(entries)
    ]
    architectures = tuple(record.get("architecture") for record in records)
    if None in architectures or len(set(architectures)) != len(architectures):
        raise InvalidRecord(
            field="alias.entries.architecture", rule="one entry per named architecture"
        )
    owned = read_owned(parsed)
    return PublishedEntries(
        name,
        tuple(PublishedAlias(record, architectures, owned) for record in records),
        owned,
    )


def _read_entry(record: object, name: str, where: str) -> Mapping[str, Any]:
    if not isinstance(record, dict):
        raise InvalidRecord(field=where, rule="is not a JSON object")
    architecture = record.get("architecture")
    if architecture is not None and architecture not in ARCHITECTURES:
        raise InvalidRecord(
            field=f"{where}.architecture", rule=f"must be one of {', '.join(ARCHITECTURES)}"
        )
    for key in DETAIL_KEYS:
        if key not in record and key not in _OPTIONAL_KEYS:
            raise InvalidRecord(field=f"{where}.{key}", rule="is required")
    for key in _TEXT_KEYS:
        if not isinstance(record[key], str):
            raise InvalidRecord(field=f"{where}.{key}", rule="must be a string")
    if record["source_digest"] is not None and not isinstance(record["source_digest"], str):
        raise InvalidRecord(field=f"{where}.source_digest", rule="must be a string or null")
    if type(record["size"]) is not int:
        raise InvalidRecord(field=f"{where}.size", rule="must be an integer")
    if not isinstance(record["facts"], dict):
        raise InvalidRecord(field=f"{where}.facts", rule="must be an object")
    resolved_from = record.get("resolved_from")
    if resolved_from is not None and (
        not isinstance(resolved_from, dict)
        or sorted(resolved_from) != list(_RESOLVED_FROM_KEYS)
        or not all(isinstance(value, str) for value in resolved_from.values())
    ):
        raise InvalidRecord(
            field=f"{where}.resolved_from",
            rule=f"must be null or an object of the strings {', '.join(_RESOLVED_FROM_KEYS)}",
        )
    signed_by = record.get("signed_by")
    if signed_by is not None and (
        not isinstance(signed_by, dict)
        or sorted(signed_by) != list(_SIGNED_BY_KEYS)
        or not all(isinstance(value, str) for value in signed_by.values())
    ):
        raise InvalidRecord(
            field=f"{where}.signed_by",
            rule=f"must be null or an object of the strings {', '.join(_SIGNED_BY_KEYS)}",
        )
    job = record.get("job")
    if job is not None:
        if not isinstance(job, dict) or sorted(job) != list(JOB_KEYS):
            raise InvalidRecord(
                field=f"{where}.job", rule=f"must be null or an object of {', '.join(JOB_KEYS)}"
            )
        try:
            check_job_run(job["job_id"], job["started_at"], job["ended_at"])
        except DomainError as error:
            raise InvalidRecord(field=f"{where}.{error.field}", rule=error.rule) from None
    if record["role"] not in ROLES:
        raise InvalidRecord(field=f"{where}.role", rule=f"must be one of {', '.join(ROLES)}")
    if record["name"] != name:
        raise InvalidRecord(
            field=f"{where}.name", rule=f"is {record['name']!r}, not the alias {name!r}"
        )
    try:
        chain = record.get("chain")
        check_alias_fields(
            record["name"],
            record["lifecycle_id"],
            record["path"],
            record["sqsh_sha256"],
            record["source_digest"],
            None if chain is None else VerifiedChain.from_mapping(chain),
        )
    except DomainError as error:
        raise InvalidRecord(field=f"{where}.{error.field}", rule=error.rule) from None
    return record

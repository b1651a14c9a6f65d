"""What ``show`` and ``list`` print of a published alias (docs/cli.md, "Commands"), and the alias
record as a launcher reads it: as it was written, without the model library.

The record was validated when it was published and ``show --verify`` validates it again
(``publication.load_alias``), so a plain read checks the printed keys' types and the alias
fields' rules (``check_alias_fields``, which ``AliasRecord`` validates with too), not the rest
of the record. ``chain`` is printed as null for a record written before it existed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.roles import ROLES
from slurm_image.domain.store_layout import hex_digest
from slurm_image.domain.verified_chain import VerifiedChain, check_chain_source

SUMMARY_KEYS = ("name", "role", "path", "sqsh_sha256", "source", "source_digest", "published_at")
"""The keys ``list`` prints per image (docs/cli.md, "Commands")."""
DETAIL_KEYS = (*SUMMARY_KEYS, "facts", "inspector_version", "lifecycle_id", "size", "chain")
"""The keys ``show`` and ``publish`` print (docs/cli.md, "Commands")."""
_OPTIONAL_KEYS = ("chain",)
"""Printed as null when absent: schema version 1 records have no chain."""
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


@dataclass(frozen=True)
class PublishedAlias:
    """One alias record as read from the store, with the keys ``show`` and ``list`` print."""

    record: Mapping[str, Any]

    def summary(self) -> dict[str, object]:
        return {key: self.record[key] for key in SUMMARY_KEYS}

    def details(self) -> dict[str, object]:
        return {key: self.record.get(key) for key in DETAIL_KEYS}


def read_published(data: bytes, name: str) -> PublishedAlias:
    """The alias record ``data`` of ``name``; raises ``InvalidRecord`` naming the field."""
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):
        raise InvalidRecord(field="alias", rule="is not a JSON object") from None
    if not isinstance(record, dict):
        raise InvalidRecord(field="alias", rule="is not a JSON object")
    for key in DETAIL_KEYS:
        if key not in record and key not in _OPTIONAL_KEYS:
            raise InvalidRecord(field=f"alias.{key}", rule="is required")
    for key in _TEXT_KEYS:
        if not isinstance(record[key], str):
            raise InvalidRecord(field=f"alias.{key}", rule="must be a string")
    if record["source_digest"] is not None and not isinstance(record["source_digest"], str):
        raise InvalidRecord(field="alias.source_digest", rule="must be a string or null")
    if type(record["size"]) is not int:
        raise InvalidRecord(field="alias.size", rule="must be an integer")
    if not isinstance(record["facts"], dict):
        raise InvalidRecord(field="alias.facts", rule="must be an object")
    if record["role"] not in ROLES:
        raise InvalidRecord(field="alias.role", rule=f"must be one of {', '.join(ROLES)}")
    if record["name"] != name:
        raise InvalidRecord(
            field="alias.name", rule=f"is {record['name']!r}, not the alias {name!r}"
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
        raise InvalidRecord(field=f"alias.{error.field}", rule=error.rule) from None
    return PublishedAlias(record)

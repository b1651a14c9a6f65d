"""What ``show`` and ``list`` print of a published alias (cli.md), and the alias record as a
launcher reads it: as it was written, without the model library.

The record was validated when it was published and ``show --verify`` validates it again
(``publication.load_alias``), so a plain read checks only what a launcher relies on, with the
same rules: the name asked for, a digest, an absolute ``.sqsh`` path, the printed keys present.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.store_layout import hex_digest

SUMMARY_KEYS = ("name", "role", "path", "sqsh_sha256", "source", "source_digest", "published_at")
"""The keys ``list`` prints per image (cli.md)."""
DETAIL_KEYS = (*SUMMARY_KEYS, "facts", "inspector_version", "lifecycle_id", "size")
"""The keys ``show`` and ``publish`` print (cli.md)."""
_TEXT_KEYS = ("name", "role", "path", "sqsh_sha256", "source", "published_at", "lifecycle_id")


@dataclass(frozen=True)
class PublishedAlias:
    """One alias record as read from the store, with the keys ``show`` and ``list`` print."""

    record: Mapping[str, Any]

    def summary(self) -> dict[str, object]:
        return {key: self.record[key] for key in SUMMARY_KEYS}

    def details(self) -> dict[str, object]:
        return {key: self.record[key] for key in DETAIL_KEYS}


def read_published(data: bytes, name: str) -> PublishedAlias:
    """The alias record ``data`` of ``name``; raises ``InvalidRecord`` naming the field."""
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):
        raise InvalidRecord("alias", "is not a JSON object") from None
    if not isinstance(record, dict):
        raise InvalidRecord("alias", "is not a JSON object")
    for key in DETAIL_KEYS:
        if key not in record:
            raise InvalidRecord(f"alias.{key}", "is required")
    for key in _TEXT_KEYS:
        if not isinstance(record[key], str):
            raise InvalidRecord(f"alias.{key}", "must be a string")
    if record["name"] != name:
        raise InvalidRecord("alias.name", f"is {record['name']!r}, not the alias {name!r}")
    if not isinstance(record["facts"], dict):
        raise InvalidRecord("alias.facts", "must be an object")
    try:
        paths.sqsh_path(record["path"], "path")
        hex_digest(record["sqsh_sha256"], "sqsh_sha256")
    except DomainError as error:
        raise InvalidRecord(f"alias.{error.field}", error.rule) from None
    return PublishedAlias(record)

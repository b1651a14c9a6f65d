"""The store's history (docs/design.md, "History"): one JSON line per event that changed what
users get from the store, appended under ``images/history/`` in one file per month (UTC), so a
site can rotate them.

A line is the event's compact JSON (sorted keys) and a newline. Reading tolerates what a crash
can leave: a torn last line (no newline, or not a whole event) is skipped, never an error, and
an appender that finds the file not ending in a newline starts its line on a new one, so the
torn bytes stay a line of their own and every whole event stays whole.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, ValidationError, field_validator

from slurm_image.domain.errors import InvalidRecord
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.roles import Role

HISTORY_SCHEMA_VERSION: Literal[1] = 1

HISTORY_LINE_MAX_BYTES = 16 * 1024
"""A longer line is no event of ours: it is skipped when read, and never written."""

MONTH_FILE = re.compile(r"(?P<year>[0-9]{4})-(?P<month>0[1-9]|1[0-2])\.jsonl")
"""The name of one month's file in ``images/history/``."""

EventKind = Literal[
    "published",
    "replaced",
    "unregistered",
    "gc_artifact",
    "gc_attempt",
    "job_failed",
    "cancelled",
]
"""What happened:

- ``published``: an alias was bound to an artifact for an architecture (a new alias, or a new
  architecture entry of one);
- ``replaced``: ``--replace`` bound an alias's entry to another artifact (``previous_artifact``
  is the one it named before);
- ``unregistered``: an alias was removed (its artifacts stay until ``gc``);
- ``gc_artifact``, ``gc_attempt``: ``gc`` removed an artifact no alias names, or an attempt;
- ``job_failed``: a job ended without a result to publish (its ``exit_code`` and ``state``);
- ``cancelled``: a lifecycle's job was cancelled through the product.
"""

_NAME_TEXT = re.compile(r"[^\x00-\x1f\x7f]{1,255}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_SOURCE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class HistoryEvent(BaseModel):
    """One line of the history. Who (``user``, ``uid``, ``host``: the account and machine that
    ran the command), when (``time``, UTC) and what (the rest; a field that does not apply to the
    event is None)."""

    model_config = FROZEN

    schema_version: Literal[1] = HISTORY_SCHEMA_VERSION
    event: EventKind
    time: AwareDatetime
    user: str
    uid: int = Field(ge=0)
    host: str
    lifecycle_id: str | None = None
    job_id: str | None = None
    alias: str | None = None
    architecture: str | None = None
    operation: Literal["import", "inspect"] | None = None
    role: Role | None = None
    source_digest: str | None = None
    """The pinned source's digest (``sha256:<hex>``) of an import."""
    artifact: str | None = None
    """The SHA-256 (hex) of the ``.sqsh`` bound, removed or unbound."""
    previous_artifact: str | None = None
    """``replaced``: the SHA-256 of the artifact the entry named before."""
    exit_code: int | None = None
    state: str | None = None
    """``job_failed``, ``cancelled``: the scheduler's state of the job (``FAILED``, ``TIMEOUT``)."""
    job_seconds: float | None = Field(default=None, ge=0)
    """``published``, ``replaced``, ``job_failed``: how long the job ran, when known."""
    publish_latency_seconds: float | None = Field(default=None, ge=0)
    """``published``, ``replaced``: from the plan's creation to the publication."""

    @field_validator("time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.utcoffset() != UTC.utcoffset(None):
            raise ValueError("must be in UTC")
        return value

    @field_validator("user", "host", "lifecycle_id", "job_id", "alias", "architecture", "state")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and not _NAME_TEXT.fullmatch(value):
            raise ValueError("must be 1 to 255 characters without control characters")
        return value

    @field_validator("artifact", "previous_artifact")
    @classmethod
    def _sha256(cls, value: str | None) -> str | None:
        if value is not None and not _SHA256_HEX.fullmatch(value):
            raise ValueError("must be 64 lowercase hexadecimal characters")
        return value

    @field_validator("source_digest")
    @classmethod
    def _source(cls, value: str | None) -> str | None:
        if value is not None and not _SOURCE_DIGEST.fullmatch(value):
            raise ValueError("must be sha256:<64 lowercase hexadecimal characters>")
        return value


@dataclass(frozen=True)
class HistoryRead:
    """What a read of the history found: its whole events, oldest first, and how many lines
    were not one (a torn last line after a crash, or anything else unreadable)."""

    events: tuple[HistoryEvent, ...]
    skipped: int = 0


def event_line(event: HistoryEvent) -> bytes:
    """The event as one line: compact JSON, sorted keys, UTF-8, the newline included."""
    text = json.dumps(
        event.model_dump(mode="json"),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    line = (text + "\n").encode("utf-8")
    if len(line) > HISTORY_LINE_MAX_BYTES:
        raise InvalidRecord(
            field="history", rule=f"an event line is at most {HISTORY_LINE_MAX_BYTES} bytes"
        )
    return line


def parse_line(line: bytes) -> HistoryEvent | None:
    """The event a line holds (with or without its newline), or None when it is not one."""
    body = line.removesuffix(b"\n")
    if not body or b"\n" in body or len(body) >= HISTORY_LINE_MAX_BYTES:
        return None
    try:
        return HistoryEvent.model_validate_json(body)
    except ValidationError:
        return None


def parse_history(data: bytes) -> HistoryRead:
    """Every whole event of one file's bytes, in order, and the count of lines that are not.
    A last line without its newline is torn (the append that wrote it did not finish): skipped,
    even when its text happens to parse."""
    events: list[HistoryEvent] = []
    skipped = 0
    lines = data.split(b"\n")
    for index, body in enumerate(lines):
        last = index == len(lines) - 1
        if last and not body:
            break
        event = None if last else parse_line(body)
        if event is None:
            skipped += 1
        else:
            events.append(event)
    return HistoryRead(events=tuple(events), skipped=skipped)


def month_file(time: datetime) -> str:
    """The name of the file ``time``'s event goes to: ``YYYY-MM.jsonl`` of its UTC month."""
    utc = time.astimezone(UTC)
    return f"{utc.year:04d}-{utc.month:02d}.jsonl"


def month_start(name: str) -> datetime | None:
    """The first instant of the month a history file's name stands for, or None."""
    match = MONTH_FILE.fullmatch(name)
    if match is None:
        return None
    return datetime(int(match["year"]), int(match["month"]), 1, tzinfo=UTC)

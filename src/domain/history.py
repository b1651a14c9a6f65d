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
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, ValidationError, field_validator

from slurm_image.domain.errors import InvalidRecord, InvalidRequest
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.roles import Role
from slurm_image.domain.store_layout import HISTORY_MONTH_FILE

HISTORY_SCHEMA_VERSION: Literal[3] = 3
"""The version events are written in. Version 2 adds the events ``cleaned_up``, ``gc_removed``
and ``refused`` and the fields ``recovered``, ``rule``, ``source``, ``reason``, ``removed``,
``count`` and ``bytes``; version 3 the fields ``group`` and ``private``; lines of the earlier
versions (none of them) are read as they are."""

HISTORY_LINE_MAX_BYTES = 16 * 1024
"""A longer line is no event of ours: it is skipped when read, and never written."""

HISTORY_FILE_MAX_BYTES = 256 * 1024 * 1024
"""A month's file larger than this is refused when read, naming it: a site rotates the files
long before (a month of events is a few MB)."""

MONTH_FILE = HISTORY_MONTH_FILE
"""The name of one month's file in ``images/history/`` (``store_layout``, which names it)."""

EventKind = Literal[
    "published",
    "replaced",
    "unregistered",
    "cleaned_up",
    "gc_artifact",
    "gc_attempt",
    "gc_removed",
    "job_failed",
    "cancelled",
    "refused",
]
"""What happened:

- ``published``: an alias was bound to an artifact for an architecture (a new alias, or a new
  architecture entry of one); ``recovered``: by the recovery of a crashed publisher's marker,
  as the publisher the marker names;
- ``replaced``: ``--replace`` bound an alias's entry to another artifact (``previous_artifact``
  is the one it named before); ``recovered`` as for ``published``;
- ``unregistered``: an alias was removed (its artifacts stay until ``gc``);
- ``cleaned_up``: ``cleanup`` removed an attempt directory;
- ``gc_artifact``, ``gc_attempt``: ``gc`` removed an artifact no alias names, or an attempt;
- ``gc_removed``: ``gc`` removed ``count`` things of one kind (``removed``: ``GC_KINDS``), of
  ``bytes`` in all;
- ``job_failed``: a job ended without a result to publish (its ``exit_code`` and ``state``);
- ``cancelled``: a lifecycle's job was cancelled, through the product or by the scheduler's own
  command (``state`` CANCELLED);
- ``refused``: the product (or a front end) refused what someone asked for: ``rule`` names the
  rule (``REFUSAL_RULE``), ``exit_code`` what the command exited with, ``source`` and ``alias``
  what was asked for, ``reason`` the refusal as the command printed it.
"""

GC_KINDS = ("source", "temporary", "credentials", "layer", "layer-temporary", "token")
"""What a ``gc_removed`` event counts (``application.maintain.Removed``): source records,
temporary records, staged registry credentials, and of the layer cache its blobs, downloads
never finished and registry tokens. Artifacts and attempts have events of their own."""
REFUSAL_RULE = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""The form of a refusal's rule: a short name a site alerts on (a metrics label value)."""
REASON_MAX_CHARACTERS = 1024
"""A refusal's ``reason`` is cut to this many characters (the line stays one event)."""

_NAME_TEXT = re.compile(r"[^\x00-\x1f\x7f]{1,255}")
_REASON_TEXT = re.compile(rf"[^\x00-\x1f\x7f]{{1,{REASON_MAX_CHARACTERS}}}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_SOURCE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class HistoryEvent(BaseModel):
    """One line of the history. Who (``user``, ``uid``, ``host``: the account and machine that
    ran the command), when (``time``, UTC) and what (the rest; a field that does not apply to the
    event is None)."""

    model_config = FROZEN

    schema_version: Literal[1, 2, 3] = HISTORY_SCHEMA_VERSION
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
    group: str | None = None
    """An event of a private lifecycle or alias: the group it is private to."""
    private: Literal[True] | None = None
    """An event of a private lifecycle or alias (an import with the requester's own registry
    login): through the gateway, only its group and the admins read it."""
    artifact: str | None = None
    """The SHA-256 (hex) of the ``.sqsh`` bound, removed or unbound."""
    previous_artifact: str | None = None
    """``replaced``: the SHA-256 of the artifact the entry named before."""
    exit_code: int | None = None
    state: str | None = None
    """``job_failed``, ``cancelled``: the scheduler's state of the job (``FAILED``, ``TIMEOUT``)."""
    job_seconds: float | None = Field(default=None, ge=0)
    """``published``, ``replaced``, ``job_failed``, ``cancelled``: how long the job ran, by
    the scheduler's start and end times, when known."""
    publish_latency_seconds: float | None = Field(default=None, ge=0)
    """``published``, ``replaced``: from the plan's creation to the publication."""
    recovered: Literal[True] | None = None
    """``published``, ``replaced``: recorded by the process that finished the publication a
    crashed publisher left (its marker), as that publisher."""
    rule: str | None = None
    """``refused``: the rule that refused (``REFUSAL_RULE``)."""
    source: str | None = None
    """``refused``: the source asked for (a reference, a tag, a path), as given (at most
    ``REASON_MAX_CHARACTERS``)."""
    reason: str | None = None
    """``refused``: why, as the command said it (at most ``REASON_MAX_CHARACTERS``)."""
    removed: str | None = None
    """``gc_removed``: what of ``GC_KINDS``."""
    count: int | None = Field(default=None, ge=0)
    """``gc_removed``: how many."""
    bytes: int | None = Field(default=None, ge=0)
    """``gc_removed``: their bytes in all (what their directory listings said)."""

    @field_validator("time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.utcoffset() != UTC.utcoffset(None):
            raise ValueError("must be in UTC")
        return value

    @field_validator(
        "user", "host", "lifecycle_id", "job_id", "alias", "architecture", "state", "group"
    )
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and not _NAME_TEXT.fullmatch(value):
            raise ValueError("must be 1 to 255 characters without control characters")
        return value

    @field_validator("source", "reason")
    @classmethod
    def _reason(cls, value: str | None) -> str | None:
        if value is not None and not _REASON_TEXT.fullmatch(value):
            raise ValueError(
                f"must be 1 to {REASON_MAX_CHARACTERS} characters without control characters"
            )
        return value

    @field_validator("rule")
    @classmethod
    def _rule(cls, value: str | None) -> str | None:
        if value is not None and not REFUSAL_RULE.fullmatch(value):
            raise ValueError("must be a lowercase name: a letter, then letters, digits or _")
        return value

    @field_validator("removed")
    @classmethod
    def _removed(cls, value: str | None) -> str | None:
        if value is not None and value not in GC_KINDS:
            raise ValueError(f"must be one of {', '.join(GC_KINDS)}")
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


def reason_text(text: str) -> str:
    """``text`` as a refusal's ``reason`` or ``source``: control characters (a newline too) as
    one space, cut to ``REASON_MAX_CHARACTERS`` (ending ``...`` when cut)."""
    flat = _CONTROL.sub(" ", text).strip() or "-"
    if len(flat) <= REASON_MAX_CHARACTERS:
        return flat
    return flat[: REASON_MAX_CHARACTERS - 3] + "..."


@dataclass(frozen=True)
class HistoryRead:
    """What a read of the history found: its whole events, oldest first, and how many lines
    were not one (a torn last line after a crash, or anything else unreadable)."""

    events: tuple[HistoryEvent, ...]
    skipped: int = 0


@dataclass(frozen=True)
class HistoryPosition:
    """How far a follower has read: the month file (None: none yet) and the offset just past
    its last whole line read. A line not ended yet (an append in progress) lies beyond it."""

    month: str | None = None
    offset: int = 0


def parse_whole_lines(data: bytes) -> tuple[HistoryRead, int]:
    """The events of ``data``'s whole lines, and how many bytes they take: a last line without
    its newline is left for later (an append in progress, or a crash's torn line, which the
    next append ends with a newline)."""
    end = data.rfind(b"\n") + 1
    return parse_history(data[:end]), end


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


def month_files(names: Iterable[str], since: datetime | None = None) -> list[str]:
    """The month files among the entries ``names`` of the history directory (any other name is
    ignored), oldest first, without those of months wholly before ``since``."""
    first = None if since is None else month_file(since)
    return sorted(
        name
        for name in names
        if MONTH_FILE.fullmatch(name) is not None and (first is None or name >= first)
    )


def appended_bytes(line: bytes, last_byte: bytes) -> bytes:
    """What one append writes after a file whose last byte is ``last_byte`` (b"" when empty):
    the line, after a newline when a torn line (a crash in the middle of an append) ends the
    file, so that the torn bytes stay a line of their own."""
    return line if last_byte in (b"", b"\n") else b"\n" + line


def since_then(reads: Iterable[HistoryRead], since: datetime | None) -> HistoryRead:
    """The reads of the month files, oldest first, as one: the events at or after ``since``
    (every one when None), and every line skipped."""
    events: list[HistoryEvent] = []
    skipped = 0
    for read in reads:
        events.extend(event for event in read.events if since is None or event.time >= since)
        skipped += read.skipped
    return HistoryRead(events=tuple(events), skipped=skipped)


SINCE_RULE = (
    "must be an ISO 8601 date (2026-01-31) or date and time (2026-01-31T12:00,"
    " 2026-01-31T12:00:00+02:00); a time without an offset is UTC"
)


def parse_since(text: str, field: str = "--since") -> datetime:
    """The instant ``history --since`` names: an ISO 8601 date (its first instant, UTC) or date
    and time (UTC unless it carries an offset)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(field=field, rule=SINCE_RULE, value=text) from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)

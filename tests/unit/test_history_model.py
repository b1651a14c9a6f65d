"""The history's event model and its one-line form (domain.history)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from slurm_image.domain.errors import InvalidRecord, InvalidRequest
from slurm_image.domain.history import (
    REASON_MAX_CHARACTERS,
    HistoryEvent,
    HistoryRead,
    appended_bytes,
    event_line,
    month_file,
    month_files,
    month_start,
    parse_history,
    parse_line,
    parse_since,
    reason_text,
    since_then,
)

TIME = datetime(2026, 3, 5, 8, 30, tzinfo=UTC)


def event(**fields: Any) -> HistoryEvent:
    values: dict[str, Any] = {
        "event": "published",
        "time": TIME,
        "user": "ada",
        "uid": 1000,
        "host": "login1",
    }
    values.update(fields)
    return HistoryEvent(**values)


def test_a_line_is_compact_sorted_json_with_its_newline_and_reads_back() -> None:
    line = event(alias="app", artifact="a" * 64)
    data = event_line(line)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert data.startswith(b'{"alias":"app","architecture":null,"artifact":"aaaa')
    assert parse_line(data) == line


@pytest.mark.parametrize(
    "fields",
    [
        {"time": datetime(2026, 3, 5, 8, 30, tzinfo=timezone(timedelta(hours=2)))},
        {"uid": -1},
        {"user": "ada\nroot"},
        {"artifact": "A" * 64},
        {"source_digest": "a" * 64},
        {"event": "renamed"},
        {"job_seconds": -1.0},
        {"rule": "Source Not Allowed"},
        {"rule": "_x"},
        {"rule": "r" * 65},
        {"reason": "two\nlines"},
        {"reason": "r" * 1025},
        {"source": ""},
        {"removed": "artifact"},
        {"count": -1},
        {"bytes": -1},
        {"recovered": False},
        {"schema_version": 4},
        {"private": False},
        {"group": "a\nb"},
    ],
)
def test_an_event_breaking_a_rule_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        event(**fields)


def test_a_version_1_line_reads_as_the_event_it_was() -> None:
    """Written before refusals, cleanups and recoveries were recorded: none of their keys."""
    line = (
        b'{"alias":"app","architecture":"x86_64","artifact":"' + b"a" * 64 + b'","event":'
        b'"published","exit_code":null,"host":"login1","job_id":"7","job_seconds":null,'
        b'"lifecycle_id":"img-1","operation":"import","previous_artifact":null,'
        b'"publish_latency_seconds":12.5,"role":"client","schema_version":1,"source_digest":'
        b'null,"state":null,"time":"2026-03-05T08:30:00Z","uid":1000,"user":"ada"}\n'
    )
    parsed = parse_line(line)
    assert parsed is not None
    assert (parsed.schema_version, parsed.alias, parsed.recovered, parsed.rule) == (
        1,
        "app",
        None,
        None,
    )
    assert event().schema_version == 3


def test_a_refusal_and_a_gc_count_are_events_of_their_own() -> None:
    refused = event(
        event="refused",
        rule="signature_missing",
        exit_code=9,
        source="registry.example.org/team/app@sha256:" + "a" * 64,
        alias="app",
        reason="sha256:...: is not signed (no cosign signature found)",
    )
    assert parse_line(event_line(refused)) == refused
    removed = event(event="gc_removed", removed="layer", count=3, bytes=4096)
    assert parse_line(event_line(removed)) == removed


def test_a_reason_is_one_line_cut_to_its_bound() -> None:
    assert reason_text("a\nb\x1b[31m c") == "a b [31m c"
    long = reason_text("x" * 5000)
    assert len(long) == REASON_MAX_CHARACTERS and long.endswith("...")
    assert reason_text("\n") == "-"
    event(reason=long)  # within the event's bound


def test_a_line_past_the_bound_is_never_written() -> None:
    big = event(alias="a" * 255, host="h" * 255, user="u" * 255)
    assert len(event_line(big)) < 16 * 1024
    with pytest.raises(InvalidRecord):
        event_line(big.model_copy(update={"state": "s" * 17000}))


def test_a_torn_last_line_is_skipped_even_when_its_text_parses() -> None:
    first, second = event_line(event(job_id="1")), event_line(event(job_id="2"))
    read = parse_history(first + second[:-1])
    assert (read.events, read.skipped) == ((event(job_id="1"),), 1)
    read = parse_history(first + b"garbage\n\n" + second)
    assert (read.events, read.skipped) == ((event(job_id="1"), event(job_id="2")), 2)
    assert parse_history(b"") == HistoryRead(events=(), skipped=0)


def test_month_files_are_utc_months_in_order_from_the_month_of_since() -> None:
    assert month_file(datetime(2026, 1, 31, 23, 30, tzinfo=timezone(timedelta(hours=-2)))) == (
        "2026-02.jsonl"
    )
    names = ["2026-03.jsonl", "notes", "2025-12.jsonl", "2026-13.jsonl", "2026-01.jsonl"]
    assert month_files(names) == ["2025-12.jsonl", "2026-01.jsonl", "2026-03.jsonl"]
    assert month_files(names, datetime(2026, 1, 31, tzinfo=UTC)) == [
        "2026-01.jsonl",
        "2026-03.jsonl",
    ]
    assert month_start("2026-03.jsonl") == datetime(2026, 3, 1, tzinfo=UTC)
    assert month_start("2026-3.jsonl") is None


def test_an_append_after_a_torn_line_starts_a_line_of_its_own() -> None:
    line = event_line(event())
    assert appended_bytes(line, b"") == line
    assert appended_bytes(line, b"\n") == line
    assert appended_bytes(line, b"}") == b"\n" + line


def test_since_keeps_events_at_or_after_it_and_counts_every_skipped_line() -> None:
    early, late = event(job_id="1"), event(job_id="2", time=TIME + timedelta(hours=1))
    reads = [HistoryRead(events=(early,), skipped=1), HistoryRead(events=(late,), skipped=2)]
    assert since_then(reads, None) == HistoryRead(events=(early, late), skipped=3)
    assert since_then(reads, TIME + timedelta(minutes=1)).events == (late,)
    assert since_then(reads, TIME).events == (early, late)


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2026-03-05", datetime(2026, 3, 5, tzinfo=UTC)),
        ("2026-03-05T08:30", datetime(2026, 3, 5, 8, 30, tzinfo=UTC)),
        ("2026-03-05T10:30:00+02:00", datetime(2026, 3, 5, 8, 30, tzinfo=UTC)),
        ("2026-03-05T08:30:00Z", datetime(2026, 3, 5, 8, 30, tzinfo=UTC)),
    ],
)
def test_since_is_an_iso_date_or_time_naive_meaning_utc(text: str, instant: datetime) -> None:
    parsed = parse_since(text)
    assert parsed == instant
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize("text", ["", "yesterday", "2026-02-30", "05/03/2026", "2026-03-05T25:00"])
def test_a_since_that_is_no_iso_time_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_since(text)
    assert refused.value.field == "--since"
    assert "ISO 8601" in refused.value.rule

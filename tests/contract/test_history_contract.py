"""The History contract (ports.history), asserted identically for every adapter."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from publish_support import history_for, locks_for, store_for
from slurm_image.adapters import history_files
from slurm_image.domain.history import HistoryEvent, HistoryPosition, HistoryRead, event_line
from slurm_image.ports.history import HISTORY_LOCK, History, HistoryError
from slurm_image.ports.lock import Locks, LockTimeout
from slurm_image.ports.store import Store

FOREIGN_UID = 4242


def event(day: int, month: int = 3, kind: str = "published", **fields: Any) -> HistoryEvent:
    values: dict[str, Any] = {
        "event": kind,
        "time": datetime(2026, month, day, 12, 0, tzinfo=UTC),
        "user": "ada",
        "uid": 1000,
        "host": "login1",
        "alias": "app",
        "architecture": "x86_64",
        "artifact": "a" * 64,
    }
    values.update(fields)
    return HistoryEvent(**values)


@pytest.fixture
def store(workspace_harness: Any) -> Store:
    return store_for(workspace_harness)


@pytest.fixture
def locks(workspace_harness: Any, store: Store) -> Locks:
    return locks_for(workspace_harness, store)


@pytest.fixture
def history(workspace_harness: Any, store: Store, locks: Locks) -> History:
    return history_for(workspace_harness, store, locks, lock_timeout_s=0.2)


@pytest.fixture
def directory(workspace_harness: Any) -> str:
    return f"{workspace_harness.root}/images/history"


def test_every_adapter_is_a_history(history: History) -> None:
    assert isinstance(history, History)


def test_a_store_without_a_history_reads_as_none(history: History) -> None:
    read = history.read()
    assert (read.events, read.skipped) == ((), 0)


def test_events_read_back_whole_in_the_order_appended(
    workspace_harness: Any, history: History, directory: str
) -> None:
    appended = [
        event(3, kind="published"),
        event(2, kind="unregistered", artifact=None),
        event(4, kind="gc_artifact", alias=None, architecture=None),
    ]
    for each in appended:
        history.append(each)
    read = history.read()
    assert read.events == tuple(appended)
    assert read.skipped == 0
    lines = workspace_harness.read(f"{directory}/2026-03.jsonl").splitlines(keepends=True)
    assert lines == [event_line(each) for each in appended]
    assert json.loads(lines[0])["schema_version"] == 3


def test_one_file_per_utc_month_read_oldest_month_first(
    workspace_harness: Any, history: History, directory: str
) -> None:
    february = event(20, month=2)
    march = event(1, month=3)
    late_january = HistoryEvent(
        **{**event(1).model_dump(), "time": datetime(2026, 1, 31, 23, 30, tzinfo=UTC)}
    )
    history.append(march)
    history.append(february)
    history.append(late_january)
    assert [path for path in workspace_harness.listing() if path.startswith(directory + "/")] == [
        f"{directory}/2026-01.jsonl",
        f"{directory}/2026-02.jsonl",
        f"{directory}/2026-03.jsonl",
    ]
    assert history.read().events == (late_january, february, march)


def test_since_leaves_out_earlier_events_and_never_opens_earlier_months(
    workspace_harness: Any, history: History, directory: str
) -> None:
    history.append(event(10, month=2))
    history.append(event(5, month=3))
    history.append(event(20, month=3))
    workspace_harness.remove(f"{directory}/2026-02.jsonl")
    workspace_harness.symlink("/etc/passwd", f"{directory}/2026-02.jsonl")
    since = datetime(2026, 3, 10, tzinfo=UTC)
    assert history.read(since).events == (event(20, month=3),)
    assert history.read(datetime(2026, 3, 5, 12, 0, tzinfo=UTC)).events == (
        event(5, month=3),
        event(20, month=3),
    )
    with pytest.raises(HistoryError) as refused:
        history.read()
    assert refused.value.field == f"{directory}/2026-02.jsonl"


def test_a_torn_last_line_is_skipped_and_the_next_append_is_whole(
    workspace_harness: Any, history: History, directory: str
) -> None:
    first, second = event(1), event(2)
    history.append(first)
    path = f"{directory}/2026-03.jsonl"
    torn = event_line(second)[:40]
    workspace_harness.append(path, torn)
    read = history.read()
    assert (read.events, read.skipped) == ((first,), 1)
    history.append(second)
    read = history.read()
    assert (read.events, read.skipped) == ((first, second), 1)
    assert workspace_harness.read(path) == event_line(first) + torn + b"\n" + event_line(second)


def test_lines_that_are_no_event_are_counted_and_other_names_ignored(
    workspace_harness: Any, history: History, directory: str
) -> None:
    history.append(event(1))
    path = f"{directory}/2026-03.jsonl"
    workspace_harness.append(path, b"not json\n{}\n" + event_line(event(2)) + b"\n")
    for name in ("notes.txt", "2026-13.jsonl", "2026-03.jsonl.1"):
        workspace_harness.write(f"{directory}/{name}", b"garbage")
    read = history.read()
    assert read.events == (event(1), event(2))
    assert read.skipped == 3


def test_read_after_gives_what_was_appended_since_the_last_read_whole_lines_only(
    workspace_harness: Any, history: History, directory: str
) -> None:
    empty, position = history.read_after(None)
    assert (empty.events, position) == ((), HistoryPosition())
    history.append(event(1))
    history.append(event(2))
    read, position = history.read_after(position)
    assert read.events == (event(1), event(2))
    path = f"{directory}/2026-03.jsonl"
    assert position == HistoryPosition("2026-03.jsonl", len(workspace_harness.read(path)))
    assert history.read_after(position) == (HistoryRead(events=()), position)
    line = event_line(event(3))
    workspace_harness.append(path, line[:30])  # an append in progress: not a line yet
    read, later = history.read_after(position)
    assert (read.events, read.skipped, later) == ((), 0, position)
    workspace_harness.append(path, line[30:])
    read, position = history.read_after(later)
    assert read.events == (event(3),)
    history.append(event(1, month=4))  # a new month
    history.append(event(4))
    read, position = history.read_after(position)
    assert read.events == (event(4), event(1, month=4))
    assert position.month == "2026-04.jsonl"


def test_read_after_from_no_position_is_read_and_since_holds_throughout(
    history: History,
) -> None:
    for day in (1, 10, 20):
        history.append(event(day))
    since = datetime(2026, 3, 5, tzinfo=UTC)
    read, position = history.read_after(None, since)
    assert read.events == history.read(since).events == (event(10), event(20))
    history.append(event(2, month=4))
    assert history.read_after(position, datetime(2026, 4, 3, tzinfo=UTC))[0].events == ()


def test_read_after_reads_a_month_file_replaced_by_a_smaller_one_from_its_start(
    workspace_harness: Any, history: History, directory: str
) -> None:
    for day in (1, 2, 3):
        history.append(event(day))
    _, position = history.read_after(None)
    path = f"{directory}/2026-03.jsonl"
    workspace_harness.remove(path)
    history.append(event(9))
    assert history.read_after(position)[0].events == (event(9),)


def test_the_directory_and_files_are_the_stores_readable_by_all(
    workspace_harness: Any, history: History, directory: str
) -> None:
    history.append(event(1))  # in a store where nothing was staged yet
    assert workspace_harness.mode(f"{workspace_harness.root}/images") == 0o755
    assert workspace_harness.mode(directory) == 0o755
    assert workspace_harness.mode(f"{directory}/2026-03.jsonl") == 0o644
    assert workspace_harness.kind_of(f"{directory}/2026-03.jsonl") == "file"


def test_a_symlinked_history_directory_is_refused(
    workspace_harness: Any, history: History, directory: str
) -> None:
    elsewhere = f"{workspace_harness.root}/elsewhere"
    workspace_harness.mkdir(elsewhere, 0o755)
    workspace_harness.write(f"{elsewhere}/2026-03.jsonl", event_line(event(1)))
    workspace_harness.makedirs(f"{workspace_harness.root}/images")
    workspace_harness.symlink(elsewhere, directory)
    with pytest.raises(HistoryError) as refused:
        history.append(event(2))
    assert refused.value.field == directory
    with pytest.raises(HistoryError) as refused:
        history.read()
    assert refused.value.field == directory
    assert workspace_harness.read(f"{elsewhere}/2026-03.jsonl") == event_line(event(1))


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_a_month_file_that_is_not_a_regular_file_is_refused(
    workspace_harness: Any, history: History, directory: str, kind: str
) -> None:
    history.append(event(1, month=2))
    path = f"{directory}/2026-03.jsonl"
    target = f"{workspace_harness.root}/target"
    workspace_harness.write(target, b"")
    if kind == "symlink":
        workspace_harness.symlink(target, path)
    elif kind == "fifo":
        workspace_harness.mkfifo(path)
    else:
        workspace_harness.mkdir(path)
    with pytest.raises(HistoryError) as refused:
        history.append(event(2))
    assert refused.value.field == path
    with pytest.raises(HistoryError) as refused:
        history.read()
    assert refused.value.field == path
    assert workspace_harness.read(target) == b""


def test_a_month_file_of_another_owner_or_writable_by_others_is_refused(
    workspace_harness: Any, history: History, directory: str
) -> None:
    history.append(event(1))
    path = f"{directory}/2026-03.jsonl"
    workspace_harness.chmod(path, 0o666)
    for act in (lambda: history.append(event(2)), history.read):
        with pytest.raises(HistoryError) as refused:
            act()
        assert refused.value.field == path
        assert "group or others" in refused.value.rule
    workspace_harness.chmod(path, 0o644)
    workspace_harness.chown(path, FOREIGN_UID)
    for act in (lambda: history.append(event(2)), history.read):
        with pytest.raises(HistoryError) as refused:
            act()
        assert refused.value.field == path
        assert str(FOREIGN_UID) in refused.value.rule


def test_a_history_directory_of_another_owner_is_refused(
    workspace_harness: Any, history: History, directory: str
) -> None:
    history.append(event(1))
    workspace_harness.chown(directory, FOREIGN_UID)
    with pytest.raises(HistoryError) as refused:
        history.append(event(2))
    assert refused.value.field == directory


def test_a_month_file_past_the_bound_is_refused_by_name(
    workspace_harness: Any,
    history: History,
    directory: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history.append(event(1))
    history.append(event(2))
    monkeypatch.setattr(history_files, "HISTORY_FILE_MAX_BYTES", len(event_line(event(1))))
    with pytest.raises(HistoryError) as refused:
        history.read()
    assert refused.value.field == f"{directory}/2026-03.jsonl"
    assert "rotate" in refused.value.rule


def test_an_append_waits_for_the_lock_and_no_longer_than_its_bound(
    history: History, locks: Locks
) -> None:
    outcome: list[BaseException | None] = []

    def append() -> None:
        try:
            history.append(event(1))
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    with locks.exclusive(HISTORY_LOCK, timeout_s=1):
        thread = threading.Thread(target=append)
        thread.start()
        thread.join(30)
    assert isinstance(outcome[0], LockTimeout)
    assert history.read().events == ()
    append()
    assert outcome[1] is None
    assert history.read().events == (event(1),)


def test_a_history_opened_for_reading_never_appends(
    workspace_harness: Any, store: Store, history: History
) -> None:
    history.append(event(1))
    reader = history_for(workspace_harness, store, None)
    assert reader.read().events == (event(1),)
    with pytest.raises(HistoryError):
        reader.append(event(2))
    assert history.read().events == (event(1),)

"""The local history under real processes: an append killed with SIGKILL (in the middle of its
write, and at whatever point a loop of appends was reached) leaves a history that reads, every
event whole or absent, and the next append whole; another user reads the owner's history."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from slurm_image.adapters.fcntl_lock import FcntlLocks
from slurm_image.adapters.local_history import LocalHistory
from slurm_image.adapters.local_store import LocalStore
from slurm_image.domain.errors import SlurmImageError
from slurm_image.domain.history import HistoryEvent, event_line, parse_line

OTHER_UID = 65534


def event(number: int, source: str = "child") -> HistoryEvent:
    return HistoryEvent(
        event="published",
        time=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        user=source,
        uid=1000,
        host="h" * 200,
        job_id=str(number),
        alias="app",
        architecture="x86_64",
        artifact=f"{number:064x}",
    )


def history(root: str) -> LocalHistory:
    store = LocalStore(root)
    return LocalHistory(store, FcntlLocks(store), lock_timeout_s=30)


@pytest.fixture
def root(world_readable_tmp: Path) -> str:
    path = world_readable_tmp / "ws"
    path.mkdir(mode=0o755)
    return str(path)


def _month_file(root: str) -> Path:
    return Path(root) / "images" / "history" / "2026-03.jsonl"


def _append_torn_and_die(root: str) -> None:
    """Append one event whose write() stops half way, then die as a kill -9 would."""
    original = os.write

    def half_then_die(fd: int, data: Any) -> int:
        if bytes(data).endswith(b"\n"):
            original(fd, bytes(data)[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        return original(fd, data)

    os.write = half_then_die
    history(root).append(event(2))
    os._exit(0)


def _append_forever(root: str, start: int) -> None:
    appender = history(root)
    number = start
    while True:
        appender.append(event(number))
        number += 1


def _fork(target: Any, *args: Any) -> Any:
    child = multiprocessing.get_context("fork").Process(target=target, args=args)
    child.start()
    return child


def test_an_append_killed_in_its_write_leaves_a_torn_line_that_is_skipped(root: str) -> None:
    history(root).append(event(1))
    child = _fork(_append_torn_and_die, root)
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    data = _month_file(root).read_bytes()
    assert data.startswith(event_line(event(1)))
    assert not data.endswith(b"\n")  # the torn half is there
    read = history(root).read()
    assert (read.events, read.skipped) == ((event(1),), 1)
    history(root).append(event(3, "parent"))  # the lock died with the child
    read = history(root).read()
    assert (read.events, read.skipped) == ((event(1), event(3, "parent")), 1)


def test_appends_killed_at_any_point_leave_every_event_whole_or_absent(root: str) -> None:
    path = _month_file(root)
    written = {event_line(event(number)) for number in range(10_000)}
    for round_number in range(4):
        size = path.stat().st_size if path.exists() else 0
        child = _fork(_append_forever, root, round_number * 1000)
        for _ in range(3000):  # until the child has appended something (never a time bound)
            if path.exists() and path.stat().st_size > size + 2000:
                break
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.join(60)
        assert child.exitcode == -signal.SIGKILL
        history(root).append(event(9000 + round_number, "parent"))
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    whole = [line for line in lines[:-1] if parse_line(line) is not None]
    torn = [line for line in lines[:-1] if parse_line(line) is None]
    assert len(torn) <= 4
    assert all(any(line.startswith(torn_line) for line in written) for torn_line in torn)
    read = history(root).read()
    assert read.skipped == len(torn)
    assert len(read.events) == len(whole)
    assert [e for e in read.events if e.user == "parent"] == [
        event(9000 + n, "parent") for n in range(4)
    ]
    children = [e for e in read.events if e.user == "child"]
    assert children and all(event_line(e) in written for e in children)


def _read_as(uid: int, root: str) -> list[str]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read_end)
            os.setgid(uid)
            os.setuid(uid)
            found = [e.job_id or "" for e in LocalHistory(LocalStore.reader(root)).read().events]
            try:
                history(root).append(event(5))
                found.append("appended")
            except SlurmImageError:
                found.append("refused")
            try:
                with _month_file(root).open("ab") as handle:
                    handle.write(event_line(event(6)))
                found.append("written")
            except PermissionError:
                found.append("denied")
            os.write(write_end, json.dumps(found).encode())
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return list(json.loads(data))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_reads_the_owners_history_and_cannot_append(root: str) -> None:
    history(root).append(event(1))
    history(root).append(event(2))
    assert _read_as(OTHER_UID, root) == ["1", "2", "refused", "denied"]
    assert [e.job_id for e in history(root).read().events] == ["1", "2"]

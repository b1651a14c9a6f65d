"""``history --follow`` as a log shipper runs it: a process of its own that prints the events
there are, then each one appended as soon as it is whole (``--json``: one JSON line each,
flushed), and ends with exit 0 and nothing on stderr on SIGTERM or SIGINT, or once its reader
went away."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pytest

from slurm_image.adapters.fcntl_lock import FcntlLocks
from slurm_image.adapters.local_history import LocalHistory
from slurm_image.adapters.local_store import LocalStore
from slurm_image.domain.history import HistoryEvent, event_line
from support import PACKAGE_DIR

WAIT_S = 30.0
"""The most any step may take before the test gives up (a bound, not a measure)."""


def event(alias: str, **fields: Any) -> HistoryEvent:
    return HistoryEvent(
        event="unregistered",
        time=datetime(2026, 3, 5, 12, tzinfo=UTC),
        user="ada",
        uid=1000,
        host="login1",
        alias=alias,
        **fields,
    )


class Follower:
    """``slurm-image [--json] history --follow`` in a process of its own."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        profile = tmp_path / "slurm-image.toml"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": PACKAGE_DIR}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "slurm_image.composition", "--profile", str(profile), *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        self.stdout: IO[bytes] = self.process.stdout

    def line(self) -> bytes:
        ready, _, _ = select.select([self.stdout], [], [], WAIT_S)
        assert ready, "no line came"
        return self.stdout.readline()

    def ended(self) -> tuple[int, bytes]:
        code = self.process.wait(WAIT_S)
        assert self.process.stderr is not None
        return code, self.process.stderr.read()


@pytest.fixture
def history(tmp_path: Path) -> Iterator[LocalHistory]:
    root = tmp_path / "ws"
    (root / "images").mkdir(parents=True)
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n[image_build]\npartition = "cpu"\ncpus_per_task = 2\n'
        'memory = "4G"\ntime_limit = "1:00:00"\n'
    )
    local = LocalStore(str(root))
    yield LocalHistory(local, FcntlLocks(local))


@pytest.fixture
def followers() -> Iterator[list[Follower]]:
    started: list[Follower] = []
    yield started
    for follower in started:
        if follower.process.poll() is None:
            follower.process.kill()
            follower.process.wait()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_json_lines_as_appended_until_a_signal_ends_it_cleanly(
    tmp_path: Path, history: LocalHistory, followers: list[Follower], stop: signal.Signals
) -> None:
    history.append(event("before"))
    follower = Follower(tmp_path, "--json", "history", "--follow")
    followers.append(follower)
    assert follower.line() == event_line(event("before"))
    history.append(event("after", job_id="7"))
    assert json.loads(follower.line()) == json.loads(event_line(event("after", job_id="7")))
    path = tmp_path / "ws" / "images" / "history" / "2026-03.jsonl"
    whole = event_line(event("written in two"))
    with path.open("ab") as month:  # an append in progress is printed once it is whole
        month.write(whole[:25])
        month.flush()
        month.write(whole[25:])
    assert follower.line() == whole
    follower.process.send_signal(stop)
    assert follower.ended() == (0, b"")


def test_the_human_form_and_the_alias_filter(
    tmp_path: Path, history: LocalHistory, followers: list[Follower]
) -> None:
    follower = Follower(tmp_path, "history", "app", "--follow")
    followers.append(follower)
    history.append(event("other"))
    history.append(event("app", job_id="12"))
    words = follower.line().decode().split()
    assert words[:3] == ["2026-03-05T12:00:00Z", "unregistered", "app"]
    assert "ada@login1" in words and "12" in words
    follower.process.terminate()
    assert follower.ended() == (0, b"")


def test_it_ends_quietly_once_its_reader_went_away(
    tmp_path: Path, history: LocalHistory, followers: list[Follower]
) -> None:
    follower = Follower(tmp_path, "--json", "history", "--follow")
    followers.append(follower)
    history.append(event("first"))
    assert follower.line() == event_line(event("first"))
    follower.stdout.close()
    history.append(event("second"))
    assert follower.ended() == (0, b"")

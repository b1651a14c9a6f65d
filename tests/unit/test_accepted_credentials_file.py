"""The gateway's replay file (adapters/accepted_credentials_file.py): what a process accepted is
known to the next, the file is its account's alone, holds digests and ends only, forgets what
has ended and keeps at most its bound."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from pathlib import Path

import pytest

from slurm_image.adapters.accepted_credentials_file import FIELD, AcceptedCredentialsFile
from slurm_image.adapters.memory import FakeClock
from slurm_image.domain.errors import InvalidRequest


def digest(n: int) -> bytes:
    return hashlib.sha256(f"MUNGE:credential-{n}:".encode()).digest()


def test_what_one_process_accepted_the_next_knows(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "accepted"
    now = clock.now().timestamp()
    first = AcceptedCredentialsFile(str(path), clock)
    first.remember(digest(1), now + 300)
    first.close()
    second = AcceptedCredentialsFile(str(path), clock)
    assert second.seen(digest(1))
    assert not second.seen(digest(2))


def test_each_worker_keeps_its_own_file_and_knows_what_its_siblings_accepted(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    files = [str(tmp_path / "accepted"), str(tmp_path / "accepted.2")]
    now = clock.now().timestamp()
    for index, path in enumerate(files):
        worker = AcceptedCredentialsFile(path, clock)
        worker.remember(digest(index), now + 300)
        worker.close()
    again = AcceptedCredentialsFile(files[0], clock, also=[*files[1:], files[1] + ".missing"])
    assert again.seen(digest(0)) and again.seen(digest(1))


def test_the_file_is_0600_and_holds_digests_and_ends_only(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "accepted"
    until = int(clock.now().timestamp()) + 300
    AcceptedCredentialsFile(str(path), clock).remember(digest(1), until)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text() == f"{digest(1).hex()} {until}\n"


def test_what_has_ended_is_forgotten_and_left_out_of_the_file(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "accepted"
    now = clock.now().timestamp()
    first = AcceptedCredentialsFile(str(path), clock)
    first.remember(digest(1), now + 10)
    first.remember(digest(2), now + 300)
    clock.advance(timedelta(seconds=60))
    second = AcceptedCredentialsFile(str(path), clock)
    assert not second.seen(digest(1)) and second.seen(digest(2))
    assert digest(1).hex() not in path.read_text()
    assert path.read_text().count("\n") == 1


def test_at_most_max_kept_are_kept_those_nearest_their_end_forgotten_first(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    path = tmp_path / "accepted"
    now = clock.now().timestamp()
    kept = AcceptedCredentialsFile(str(path), clock, max_kept=3)
    for n in range(5):
        kept.remember(digest(n), now + 100 + n)
    assert [kept.seen(digest(n)) for n in range(5)] == [False, False, True, True, True]
    again = AcceptedCredentialsFile(str(path), clock, max_kept=3)
    assert len(again) == 3
    assert path.read_text().count("\n") == 3


def test_the_file_is_rewritten_before_it_grows_past_twice_what_is_alive(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "accepted"
    kept = AcceptedCredentialsFile(str(path), clock)
    for n in range(3000):
        kept.remember(digest(n), clock.now().timestamp() + 1)
        clock.advance(timedelta(seconds=1))
    assert path.read_text().count("\n") <= 1024


def test_unreadable_lines_are_skipped(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "accepted"
    until = int(clock.now().timestamp()) + 300
    path.write_text(f"garbage\n{digest(1).hex()} {until}\n{'z' * 64} {until}\n\x00\xff\n")
    path.chmod(0o600)
    kept = AcceptedCredentialsFile(str(path), clock)
    assert kept.seen(digest(1)) and len(kept) == 1


@pytest.mark.parametrize("how", ["readable", "symlink", "directory"])
def test_a_file_others_may_touch_or_no_file_is_refused_naming_it(tmp_path: Path, how: str) -> None:
    path = tmp_path / "accepted"
    if how == "readable":
        path.write_text("")
        path.chmod(0o644)
    elif how == "symlink":
        target = tmp_path / "elsewhere"
        target.write_text("")
        target.chmod(0o600)
        os.symlink(target, path)
    else:
        path = tmp_path / "missing" / "accepted"
    with pytest.raises(InvalidRequest) as refused:
        AcceptedCredentialsFile(str(path), FakeClock())
    assert refused.value.field == FIELD
    assert str(path) in refused.value.rule

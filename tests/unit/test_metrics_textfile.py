"""``metrics --textfile PATH`` writes its file atomically (cli.textfile): a temporary
file beside PATH, renamed onto it, mode 0644 whatever the umask; the old file replaced whole,
no temporary left behind, even when the write fails; a PATH that cannot be written, or whose
directory another user may write (where they could plant the file first), is refused naming
``--textfile`` before anything is created."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_image.cli import textfile
from slurm_image.cli.textfile import check_textfile, write_textfile
from slurm_image.domain.errors import InvalidPath
from slurm_image.wire.errors import exit_code_for
from support import unavailable


@pytest.fixture
def private_umask() -> Iterator[None]:
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def test_the_file_is_written_0644_and_replaces_the_old_one_whole(
    tmp_path: Path, private_umask: None
) -> None:
    path = tmp_path / "slurm_image.prom"
    path.write_bytes(b"old figures\n")
    old_inode = path.stat().st_ino
    check_textfile(str(path))
    write_textfile(str(path), b"new figures\n")
    assert path.read_bytes() == b"new figures\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.stat().st_ino != old_inode  # a new file renamed onto the name
    assert os.listdir(tmp_path) == ["slurm_image.prom"]


def test_a_relative_path_is_written_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    check_textfile("metrics.prom")
    write_textfile("metrics.prom", b"x 1\n")
    assert (tmp_path / "metrics.prom").read_bytes() == b"x 1\n"


def test_a_symlink_at_the_path_is_replaced_and_its_target_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"someone else's file\n")
    path = tmp_path / "slurm_image.prom"
    path.symlink_to(target)
    write_textfile(str(path), b"figures\n")
    assert not path.is_symlink()
    assert path.read_bytes() == b"figures\n"
    assert target.read_bytes() == b"someone else's file\n"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "slurm_image.prom"
    path.write_bytes(b"old figures\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(textfile.os, "fsync", full)
    with pytest.raises(InvalidPath) as refused:
        write_textfile(str(path), b"new figures\n")
    assert refused.value.field == "--textfile"
    assert "No space left on device" in refused.value.rule
    assert path.read_bytes() == b"old figures\n"
    assert os.listdir(tmp_path) == ["slurm_image.prom"]


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("missing directory", "No such file or directory"),
        ("directory is a file", "is not a directory"),
        ("path is a directory", "is a directory"),
        ("trailing slash", "must name a file"),
        ("empty", "must name a file"),
    ],
)
def test_a_path_that_cannot_be_the_file_is_refused_naming_the_option_and_nothing_is_created(
    tmp_path: Path, case: str, words: str
) -> None:
    (tmp_path / "a-file").write_bytes(b"")
    (tmp_path / "a-directory").mkdir()
    path = {
        "missing directory": f"{tmp_path}/missing/slurm_image.prom",
        "directory is a file": f"{tmp_path}/a-file/slurm_image.prom",
        "path is a directory": f"{tmp_path}/a-directory",
        "trailing slash": f"{tmp_path}/slurm_image.prom/",
        "empty": "",
    }[case]
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(InvalidPath) as refused:
        check_textfile(path)
    assert refused.value.field == "--textfile"
    assert words in refused.value.rule
    assert exit_code_for(refused.value) == 2
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


ORDINARY_UID = 4242


def refusal_as(uid: int | None, path: str) -> str:
    """The rule ``check_textfile(path)`` refuses with, checked as ``uid`` (None: this process)
    in a forked child, since root may write any directory; "" when it is not refused."""
    if uid is None:
        try:
            check_textfile(path)
        except InvalidPath as error:
            return f"{error.field}: {error.rule}"
        return ""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        os.write(write, refusal_as(None, path).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        said = answer.read().decode()
    assert os.waitpid(child, 0)[1] == 0
    return said


def test_a_directory_that_cannot_be_written_is_refused() -> None:
    base = Path(tempfile.mkdtemp(prefix="slurm-image-textfile-"))
    try:
        base.chmod(0o755)  # the ordinary uid walks in, and cannot write what root closed
        closed = base / "closed"
        closed.mkdir(mode=0o555)
        uid = ORDINARY_UID if os.geteuid() == 0 else None
        path = f"{closed}/slurm_image.prom"
        said = refusal_as(uid, path)
        assert said == f"--textfile: {path}: its directory {closed} is not writable"
        assert list(closed.iterdir()) == []
    finally:
        shutil.rmtree(base)


def test_the_write_itself_refuses_a_directory_at_the_path(tmp_path: Path) -> None:
    (tmp_path / "slurm_image.prom").mkdir()
    with pytest.raises(InvalidPath) as refused:
        write_textfile(f"{tmp_path}/slurm_image.prom", b"figures\n")
    assert refused.value.field == "--textfile"
    assert os.listdir(tmp_path) == ["slurm_image.prom"]
    assert (tmp_path / "slurm_image.prom").is_dir()


OTHER_UID = 4243
DIRECTORY_RULE = (
    "is writable by group or others, who could plant the file before you (or replace it) with"
    " figures of their own: " + textfile.DIRECTORY_HINT
)


def test_a_planted_file_in_a_directory_others_may_write_is_refused_and_left_alone() -> None:
    """In a sticky 1777 textfile directory another user planted ``slurm_image.prom``: the
    store's owner (an ordinary uid when the suite runs as root) is refused before anything is
    read, naming the directory and the rule; the planted file stays as it was."""
    base = Path(tempfile.mkdtemp(prefix="slurm-image-textfile-"))
    try:
        base.chmod(0o755)
        shared = base / "textfile"
        shared.mkdir()
        shared.chmod(0o1777)
        planted = shared / "slurm_image.prom"
        planted.write_bytes(b"slurm_image_aliases 1000\n")
        if os.geteuid() == 0:
            os.chown(planted, OTHER_UID, OTHER_UID)
        uid = ORDINARY_UID if os.geteuid() == 0 else None
        said = refusal_as(uid, str(planted))
        assert said == f"--textfile: {planted}: its directory {shared} {DIRECTORY_RULE}"
        assert planted.read_bytes() == b"slurm_image_aliases 1000\n"
        assert os.listdir(shared) == ["slurm_image.prom"]
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o775, 0o1770])
def test_a_directory_group_or_others_may_write_is_refused_by_the_check_and_by_the_write(
    tmp_path: Path, mode: int
) -> None:
    shared = tmp_path / "textfile"
    shared.mkdir()
    shared.chmod(mode)
    path = f"{shared}/slurm_image.prom"
    rule = f"{path}: its directory {shared} "
    with pytest.raises(InvalidPath) as checked:
        check_textfile(path)
    assert checked.value.field == "--textfile"
    assert checked.value.rule.startswith(rule + "is writable by group or others")
    assert exit_code_for(checked.value) == 2
    with pytest.raises(InvalidPath) as written:  # the directory the write opens is held too
        write_textfile(path, b"figures\n")
    assert written.value.rule == checked.value.rule
    assert os.listdir(shared) == []


def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        unavailable("giving a directory to another uid needs root (CI runs as root)")
    theirs = tmp_path / "textfile"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    path = f"{theirs}/slurm_image.prom"
    with pytest.raises(InvalidPath) as refused:
        check_textfile(path)
    assert refused.value.rule == (
        f"{path}: its directory {theirs} is owned by uid {OTHER_UID}, neither by uid 0 nor by"
        f" root: {textfile.DIRECTORY_HINT}"
    )

"""LocalWorkspace behaviour that only a real filesystem shows: races with other processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_image.adapters.local_workspace import LocalWorkspace
from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.paths import AttemptLayout
from slurm_image.ports.workspace import IdentityChanged, UnsafePath
from support import unavailable

FIRST = "img-00000000000000000000000000000003"
SECOND = "img-00000000000000000000000000000004"


@pytest.mark.parametrize("component", ["images", "tmp", "jobs"])
def test_a_layout_directory_made_by_a_concurrent_prepare_is_used_not_an_error(
    world_readable_tmp: Path, component: str
) -> None:
    root = str(world_readable_tmp)
    workspace = LocalWorkspace(root)
    racing = getattr(AttemptLayout(root, FIRST), component)
    original = workspace._mkdir

    def lose_the_race(parent: int, name: str, field: str, mode: int) -> None:
        if field == racing:
            os.mkdir(name, 0o700, dir_fd=parent)  # another prepare got there first
        original(parent, name, field, mode)

    workspace._mkdir = lose_the_race  # type: ignore[method-assign]
    layout = AttemptLayout(root, SECOND)
    identity = workspace.create_directory(layout.job_dir, parents=True)
    assert workspace.directory_identity(layout.job_dir) == identity
    for path in (layout.images, layout.tmp, layout.jobs, layout.job_dir):
        assert Path(path).is_dir() and not Path(path).is_symlink()


def test_a_symlink_planted_in_that_race_is_still_refused(world_readable_tmp: Path) -> None:
    root = str(world_readable_tmp)
    decoy = world_readable_tmp / "decoy"
    decoy.mkdir()
    workspace = LocalWorkspace(root)
    original = workspace._mkdir

    def plant(parent: int, name: str, field: str, mode: int) -> None:
        if name == "images":
            os.symlink(str(decoy), name, dir_fd=parent)
        original(parent, name, field, mode)

    workspace._mkdir = plant  # type: ignore[method-assign]
    with pytest.raises(InvalidPath, match="images is a symlink"):
        workspace.create_directory(AttemptLayout(root, SECOND).job_dir, parents=True)
    assert list(decoy.iterdir()) == []


USER = 65534


def _removed_as_an_ordinary_user(root: Path, job: Path) -> int:
    """Fork, become ``USER`` (every path below ``root`` is theirs), remove ``job``; the exit
    code of the child: 0 removed, 1 an error."""
    for path in [root, *root.rglob("*")]:
        os.chown(path, USER, USER, follow_symlinks=False)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(USER)
            os.setuid(USER)
            workspace = LocalWorkspace(str(root))
            workspace.remove_tree(str(job), expected=workspace.directory_identity(str(job)))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_an_ordinary_user_removes_directories_the_image_made_0000(
    world_readable_tmp: Path,
) -> None:
    if os.geteuid() != 0:
        unavailable("becoming an ordinary user needs root")
    root = world_readable_tmp / "ws"
    job = Path(AttemptLayout(str(root), FIRST).job_dir)
    locked = job / "output" / "a" / "locked"
    (locked / "deeper").mkdir(parents=True, mode=0o700)
    (locked / "deeper" / "file").write_bytes(b"x")
    for directory in (locked / "deeper", locked):
        directory.chmod(0o000)
    assert _removed_as_an_ordinary_user(root, job) == 0
    assert not job.exists()


def test_a_directory_swapped_in_during_removal_is_not_emptied(
    world_readable_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(world_readable_tmp)
    workspace = LocalWorkspace(root)
    job = AttemptLayout(root, FIRST).job_dir
    workspace.create_directory(f"{job}/output/inner", parents=True)
    elsewhere = world_readable_tmp / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_bytes(b"keep")
    original = os.open

    def swap_before_entering(path: str, flags: int, *args: int, **kwargs: int) -> int:
        if path == "inner" and flags & os.O_DIRECTORY:
            monkeypatch.setattr(os, "open", original)
            os.rename(f"{job}/output/inner", f"{job}/inner.gone")
            os.rename(elsewhere, f"{job}/output/inner")
        return original(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_before_entering)
    with pytest.raises(IdentityChanged, match="replaced during removal"):
        workspace.remove_tree(job, expected=workspace.directory_identity(job))
    assert Path(f"{job}/output/inner/precious").read_bytes() == b"keep"


def test_a_symlink_swapped_in_during_removal_is_not_followed(
    world_readable_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(world_readable_tmp)
    workspace = LocalWorkspace(root)
    job = AttemptLayout(root, FIRST).job_dir
    workspace.create_directory(f"{job}/output/inner", parents=True)
    elsewhere = world_readable_tmp / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_bytes(b"keep")
    original = os.open

    def swap_before_entering(path: str, flags: int, *args: int, **kwargs: int) -> int:
        if path == "inner" and flags & os.O_DIRECTORY:
            monkeypatch.setattr(os, "open", original)
            os.rmdir(f"{job}/output/inner")
            os.symlink(elsewhere, f"{job}/output/inner")
        return original(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_before_entering)
    with pytest.raises(UnsafePath, match="symlink"):
        workspace.remove_tree(job, expected=workspace.directory_identity(job))
    assert (elsewhere / "precious").read_bytes() == b"keep"


def test_a_directory_moved_out_of_the_tree_during_removal_is_not_followed(
    world_readable_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(world_readable_tmp)
    workspace = LocalWorkspace(root)
    job = AttemptLayout(root, FIRST).job_dir
    workspace.create_directory(f"{job}/output/a/b", parents=True)
    (Path(job) / "output" / "a" / "b" / "file").write_bytes(b"")
    elsewhere = world_readable_tmp / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_bytes(b"keep")
    original = os.unlink

    def move_while_inside(name: str, *, dir_fd: int) -> None:
        if name == "file":
            monkeypatch.setattr(os, "unlink", original)
            os.rename(f"{job}/output/a", elsewhere / "a")  # b's parent is now elsewhere/a
        original(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", move_while_inside)
    with pytest.raises(IdentityChanged, match="moved during removal"):
        workspace.remove_tree(job, expected=workspace.directory_identity(job))
    assert (elsewhere / "precious").read_bytes() == b"keep"
    assert (elsewhere / "a").is_dir()

"""Removing a directory tree through its open descriptor (``LocalWorkspace.remove_tree``): a walk
that empties it in bounded descriptors and memory, never follows a symlink, never leaves the
filesystem, and refuses a tree that keeps changing while it is removed."""

from __future__ import annotations

import errno
import os
import stat
from contextlib import suppress

from slurm_image.adapters.local_files import DIR_FLAGS, identity_of, port_error
from slurm_image.domain.file_kinds import describe_mode
from slurm_image.ports.workspace import IdentityChanged, UnsafePath, WorkspaceError

_SWEEPS = 8
"""How often one directory may be found changed (refilled after its sweep, or emptied again
after an ``rmdir`` refused) before its tree is taken to be written to while it is removed."""


class DirectoryEmptier:
    """Empty one open directory, iteratively, in bounded descriptors and memory.

    Holds at most three descriptors whatever the tree's depth or width: the directory being
    emptied, its listing (one ``scandir``, never a list of names), and a child or parent while
    stepping. Each sweep unlinks entries that are not directories (``unlink`` never follows a
    symlink and never removes a directory) and stops at the first directory, which is entered
    only after ``lstat``, open with ``O_DIRECTORY|O_NOFOLLOW`` and ``fstat`` agree it is the same
    directory on the same filesystem (a mount inside is refused, never emptied). The way back up
    is ``..`` of the emptied directory, taken only when it is the directory the walk came from,
    so a directory moved elsewhere meanwhile is not followed out of the tree. The state kept is
    one name and one inode number per level of depth.
    """

    def __init__(self, top: int, field: str, *, keep: frozenset[str] = frozenset()) -> None:
        self._top = top
        self._field = field
        self._keep = keep
        self._device = os.fstat(top).st_dev
        self._names: list[str] = []
        self._inodes: list[int] = []
        self._refused = 0

    def where(self, name: str = "") -> str:
        return "/".join([self._field, *self._names, *([name] if name else [])])

    def run(self) -> None:
        fd = self._top
        try:
            os.fchmod(fd, 0o700)
            while True:
                child = self._sweep(fd)
                if child is not None:
                    opened = self._enter(fd, child)
                    if fd != self._top:
                        os.close(fd)
                    fd = opened
                    continue
                if not self._names:
                    return
                parent = self._up(fd)
                os.close(fd)
                fd = parent
                self._remove_emptied(fd)
        except OSError as error:
            raise port_error(error, self.where()) from None
        finally:
            if fd != self._top:
                os.close(fd)

    def _sweep(self, fd: int) -> str | None:
        """Unlink entries until the first directory, and return its name; None once empty."""
        keep = frozenset() if self._names else self._keep
        for _ in range(_SWEEPS):
            removed = False
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.name in keep:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        return entry.name
                    with suppress(FileNotFoundError, IsADirectoryError):
                        os.unlink(entry.name, dir_fd=fd)  # a directory by now: the next sweep
                        removed = True
            if not removed:
                return None
        raise WorkspaceError(field=self.where(), rule="kept changing while it was removed")

    def _enter(self, parent: int, name: str) -> int:
        entry = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(entry.st_mode):
            raise IdentityChanged(field=self.where(name), rule="was replaced during removal")
        if entry.st_dev != self._device:
            raise UnsafePath(
                field=self.where(name), rule="is another filesystem mounted here: not removed"
            )
        try:
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=parent)
            except PermissionError:
                _unlock(parent, name, entry, self.where(name))
                fd = os.open(name, DIR_FLAGS, dir_fd=parent)
        except OSError as error:
            if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            raise UnsafePath(
                field=self.where(name),
                rule=f"became {describe_mode(mode)} during removal: not followed",
            ) from None
        try:
            if identity_of(os.fstat(fd)) != identity_of(entry):
                raise IdentityChanged(field=self.where(name), rule="was replaced during removal")
            os.fchmod(fd, 0o700)
        except BaseException:
            os.close(fd)
            raise
        self._names.append(name)
        self._inodes.append(entry.st_ino)
        return fd

    def _up(self, fd: int) -> int:
        """The parent of the emptied directory ``fd``: the directory the walk came from."""
        if len(self._names) == 1:
            return self._top
        parent = os.open("..", DIR_FLAGS, dir_fd=fd)
        status = os.fstat(parent)
        if (status.st_dev, status.st_ino) != (self._device, self._inodes[-2]):
            os.close(parent)
            raise IdentityChanged(field=self.where(), rule="was moved during removal")
        return parent

    def _remove_emptied(self, parent: int) -> None:
        """Remove the directory just emptied from ``parent``, if it is still that directory."""
        name, inode = self._names.pop(), self._inodes.pop()
        try:
            entry = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if (entry.st_dev, entry.st_ino) == (self._device, inode):
                os.rmdir(name, dir_fd=parent)
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.ENOTEMPTY:
                raise
            self._refused += 1  # filled again meanwhile: the parent's next sweep enters it again
            if self._refused > _SWEEPS:
                raise WorkspaceError(
                    field=self.where(name), rule="kept changing while it was removed"
                ) from None


def _unlock(parent: int, name: str, entry: os.stat_result, field: str) -> None:
    """Give our own directory ``name`` back the permissions to empty it (the image may have
    made it 0000): through an ``O_PATH`` descriptor, which needs none, of that very directory."""
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        if identity_of(os.fstat(fd)) != identity_of(entry):
            raise IdentityChanged(field=field, rule="was replaced during removal")
        os.chmod(f"/proc/self/fd/{fd}", 0o700)  # noqa: PTH101 (the descriptor's own inode)
    finally:
        os.close(fd)


def remove_entry(fd: int, name: str, field: str) -> None:
    """Unlink ``name`` below ``fd`` unless it is a directory or gone, and make that durable."""
    try:
        os.unlink(name, dir_fd=fd)
    except (FileNotFoundError, IsADirectoryError):
        return
    except OSError as error:
        raise port_error(error, field) from None
    os.fsync(fd)

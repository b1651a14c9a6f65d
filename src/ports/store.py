"""The Store port: the filesystem operations publication needs beyond the ``Workspace``.

A store is a ``Workspace`` (same root, same walking rules: no symlinked, foreign-owned or
swapped directory below the root is ever used) with these operations added. Paths below the root
are walked safely; the one path allowed outside it is the ``.sqsh`` an ``inspect`` names, which
``digest`` opens without following a symlink at its last component.

Error contract: the ``Workspace`` errors, plus ``ChangedWhileRead`` when a file's identity, size
or times changed while it was read (its bytes would describe no single state of the file).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol, runtime_checkable

from slurm_image.domain.file_kinds import EntryKind
from slurm_image.domain.identity import FileIdentity
from slurm_image.ports.hasher import FileDigest
from slurm_image.ports.workspace import VerifiedRead, Workspace, WorkspaceError

__all__ = ["ChangeStamp", "ChangedWhileRead", "EntryKind", "Store"]


class ChangedWhileRead(WorkspaceError):
    """The file changed between the start and the end of a read."""


class ChangeStamp(NamedTuple):
    """What ``Store.stamp`` sees of a stamp file: which file, and how many bumps it holds."""

    device: int
    inode: int
    size: int


@runtime_checkable
class Store(Workspace, Protocol):
    """The workspace as the publisher and the catalog use it (see the module docstring)."""

    def read_stable(self, path: str, *, max_bytes: int) -> VerifiedRead:
        """The bytes of the regular file ``path``, read through ONE descriptor opened without
        following a symlink and without blocking (a FIFO is refused, never opened for reading);
        the size bound is checked on that descriptor before the first byte is read, and the
        file must be unchanged (identity, size, times) at the end. Raises ``NotFound``,
        ``NotRegularFile``, ``TooLarge``, ``ChangedWhileRead``."""
        ...

    def digest(self, path: str) -> FileDigest:
        """SHA-256 of the regular file ``path`` through one descriptor, as ``read_stable``."""
        ...

    def entry_kind(self, path: str) -> EntryKind | None:
        """What is at ``path`` itself (a symlink is not followed), or None when nothing is."""
        ...

    def file_sizes(self, directory: str) -> Mapping[str, int]:
        """The size in bytes of each regular file directly in ``directory``, by name, from one
        listing (no file is opened, nothing is followed: a symlink, directory or FIFO is left
        out, and so is an entry removed while listed). Raises ``NotFound`` when the directory
        does not exist, and the walk's errors."""
        ...

    def ensure_directory(self, path: str, *, mode: int, group: str | None = None) -> FileIdentity:
        """Make ``path`` and the missing directories on the way (each ``mode``) and give
        every directory from ``images/`` down to ``path`` at least ``mode``'s read and search
        bits, so that others can resolve what is published. Existing directories must be safe.
        With ``group`` (one the store's owner is in, as ``install``), ``path`` itself gets that
        group and exactly ``mode``: a directory only that group may search."""
        ...

    def set_link(self, path: str, target: str) -> None:
        """Make ``path`` the symlink ``target`` atomically: a fresh symlink made beside it is
        renamed over whatever symlink or file is there, and the directory fsynced, so that a
        reader resolving ``path`` meanwhile finds the old target or the new, never nothing.
        ``WorkspaceError`` when a directory is at ``path``; nothing is left beside it."""
        ...

    def read_link(self, path: str) -> str | None:
        """The target of the symlink at ``path`` (not followed), None when nothing is there;
        ``NotRegularFile`` (a ``WorkspaceError``) when something other than a symlink is."""
        ...

    def install(
        self,
        source: str,
        destination: str,
        *,
        expected: FileDigest,
        mode: int,
        group: str | None = None,
    ) -> FileIdentity:
        """Move the file ``source`` to ``destination`` (same filesystem), never replacing
        anything: opened without following a symlink, it must still be the file ``expected``
        describes (identity, size, times); it gets exactly ``mode`` (and the group ``group``,
        one the store's owner is in: ``WorkspaceError`` otherwise) and is fsynced, then linked
        exclusively at ``destination`` (``AlreadyExists`` when anything is there), checked to be
        that same file, unlinked at ``source``, and both directories are fsynced.
        Raises ``ChangedWhileRead`` when the file is not the one ``expected`` describes."""
        ...

    def set_mode(self, path: str, *, mode: int) -> None:
        """Give the regular file ``path`` (never followed through a symlink; the store's owner
        owns it) exactly ``mode``: an artifact kept for a group alone, opened to everyone by a
        public publication of the same bytes. ``WorkspaceError`` when it cannot."""
        ...

    def publish_file(
        self, path: str, data: bytes, *, mode: int, staging: str, group: str | None = None
    ) -> None:
        """Atomically replace (or create) ``path``: a temporary file in the directory
        ``staging`` (same filesystem, never read as published state) with exactly ``mode``
        (and the group ``group``, as ``install``), fsynced, renamed over ``path``, directory
        fsynced. A reader sees the old or the new bytes, never a mix."""
        ...

    def bump(self, path: str) -> None:
        """Append one byte to the stamp file ``path`` (made ``RECORD_MODE`` when missing, never
        through a symlink), holding an exclusive lock on it while appending, so that its size
        counts the bumps even when processes on several hosts bump it at once."""
        ...

    def stamp(self, path: str) -> ChangeStamp | None:
        """The stamp file ``path`` as it is now (opened, so that a shared filesystem looks
        again), or None when there is none. Cheap: a reader asks it at every request."""
        ...

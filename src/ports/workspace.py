"""The Workspace port: the shared directory tree where attempts are staged (docs/design.md, "The
plan and staging").

A workspace is bound to one root (the profile's ``workspace_root``). Every path given to it is
absolute and lies strictly below that root. The root and every directory on the way to it must
be changeable by nobody but the user and root (``domain.paths.shared_directory_problem``; else
``InvalidPath`` of ``workspace_root``, a profile error); every directory *below* it is walked
without following symlinks, and must be a real directory of the current user's own
(``domain.paths.own_directory_problem``): a symlinked, foreign-owned, shared or non-directory
``images/``, ``.tmp/``, ``jobs/`` or attempt directory is refused, and nothing is read or
written through it. The root itself must also be closed to group and others, sticky or not
(``domain.paths.workspace_root_problem``): whoever may add entries to it could create its
``images/`` first. An ``images/`` that is not the user's is likewise ``InvalidPath`` of
``workspace_root`` (the workspace is not set up for this user), not an error of one attempt.

Error contract (every adapter raises only these for workspace trouble; each carries ``field``,
the path concerned, and ``reason``):

- ``UnsafePath``: a directory on the way is a symlink, not a directory, or not owned by us; or
  the path is not strictly below the root.
- ``AlreadyExists``: an exclusive create met an existing entry (file, directory, symlink —
  dangling or not — or FIFO). Nothing was written through it.
- ``NotFound``: the path or a directory on the way does not exist.
- ``NotRegularFile``: a verified read met a symlink, FIFO, directory, device or socket. A FIFO
  never blocks the caller.
- ``TooLarge``: a verified read met a file larger than its bound.
- ``IdentityChanged``: the directory a caller pinned (``within=``) is no longer the one it
  recorded, or a removal target is not the directory the caller created.
- ``AccessDenied``: the operating system refused (read-only filesystem, permissions).
- ``WorkspaceError``: any other I/O failure (e.g. no space left).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError
from slurm_image.domain.identity import FileIdentity


class WorkspaceError(SlurmImageError):
    """Base of the workspace errors: ``field`` is the path, ``rule`` what is wrong with it."""


class UnsafePath(WorkspaceError):
    """A symlinked, foreign-owned or non-directory component, or a path outside the root."""


class AlreadyExists(WorkspaceError):
    """An exclusive creation found something at the path."""


class NotFound(WorkspaceError):
    """Nothing exists at the path (or at a directory on the way)."""


class NotRegularFile(WorkspaceError):
    """A verified read found something other than a regular file."""


class TooLarge(WorkspaceError):
    """A verified read found a file larger than the caller's bound."""


class IdentityChanged(WorkspaceError):
    """A directory is no longer the one the caller recorded."""


class AccessDenied(WorkspaceError):
    """The system refused the operation: a read-only workspace or missing permission."""


@dataclass(frozen=True)
class WrittenFile:
    """A file created and made durable: its identity, size, mode and SHA-256."""

    identity: FileIdentity
    size: int
    mode: int
    sha256: str


@dataclass(frozen=True)
class VerifiedRead:
    """The bytes of a regular file, read through one descriptor, and that file's identity."""

    data: bytes
    identity: FileIdentity
    mode: int


@dataclass(frozen=True)
class CacheEntry:
    """One entry of the layer cache as found, never followed: ``name`` relative to the cache
    (``<digest>``, ``<digest>.XXXXXXXXXX``, ``.tokens.<uid>/<file>``, ...)."""

    name: str
    regular: bool
    """A regular file (not a symlink, directory, FIFO, ...)."""
    size: int
    used_at: float
    """Seconds since the epoch: the later of its last read and its last change."""


@runtime_checkable
class Workspace(Protocol):
    """Staged attempts under one workspace root (see the module docstring for the errors)."""

    root: str

    def create_directory(
        self,
        path: str,
        *,
        mode: int = 0o700,
        parents: bool = False,
        within: FileIdentity | None = None,
    ) -> FileIdentity:
        """Create the directory ``path`` exclusively with exactly ``mode``; return its identity.

        With ``parents``, missing directories between the root and ``path`` are created 0700;
        existing ones must be safe (see the module docstring). Raises ``AlreadyExists`` when
        anything is at ``path``; ``IdentityChanged`` when the parent is not ``within``.
        """
        ...

    def write_new(
        self, path: str, data: bytes, *, mode: int, within: FileIdentity | None = None
    ) -> WrittenFile:
        """Create ``path`` exclusively (never through a symlink), write ``data``, set exactly
        ``mode``, and make file and directory entry durable (fsync) before returning.

        ``within``: the identity the parent directory must have; else ``IdentityChanged``.
        """
        ...

    def replace_file(
        self, path: str, data: bytes, *, mode: int = 0o600, within: FileIdentity | None = None
    ) -> WrittenFile:
        """Atomically replace (or create) ``path`` with ``data``: a fresh temporary file in the
        same directory, fsynced, renamed over ``path``, directory fsynced. A reader sees the old
        or the new content, never a mix; no temporary file is left behind on failure.
        """
        ...

    def read_verified(
        self, path: str, *, max_bytes: int, within: FileIdentity | None = None
    ) -> VerifiedRead:
        """Read a regular file through one descriptor opened without following symlinks.

        Raises ``NotRegularFile`` (symlink, FIFO — without blocking —, directory, ...),
        ``TooLarge`` when it holds more than ``max_bytes``, ``NotFound``, ``IdentityChanged``.
        """
        ...

    def directory_identity(self, path: str) -> FileIdentity:
        """The identity of the directory ``path``, reached without following symlinks."""
        ...

    def exists(self, path: str) -> bool:
        """Whether anything (a dangling symlink too) is at ``path``. Unsafe directories on the
        way raise ``UnsafePath`` rather than answer."""
        ...

    def list_directory(self, path: str) -> Sequence[str]:
        """The entry names of the directory ``path``, sorted."""
        ...

    def remove_file(self, path: str, *, within: FileIdentity | None = None) -> None:
        """Remove the entry at ``path`` if it is not a directory (a symlink itself, never its
        target). Raises ``NotFound`` when nothing is there."""
        ...

    def image_problem(self, path: str) -> str | None:
        """What would let someone other than the user and root change the bytes of the file at
        ``path`` (anywhere, inside the root or not), or None: every directory on its way (as
        written and as resolved) must pass ``domain.paths.shared_directory_problem`` and the
        file itself (not followed if a symlink) ``domain.paths.unchangeable_file_problem``. A
        missing file is a problem too. The answer names the path at fault; nothing raises."""
        ...

    def remove_tree(self, path: str, *, expected: FileIdentity, last: Sequence[str] = ()) -> None:
        """Remove the directory ``path`` and everything below it, never following a symlink
        and never descending into a directory that is not the one it opened, nor into another
        filesystem mounted inside (``UnsafePath``). ``expected`` is the identity the directory
        must have (``IdentityChanged`` otherwise, and nothing is removed).

        Any depth and width: the walk is iterative, with a bounded number of descriptors and
        no list of a directory's entries in memory. ``last``: names of entries directly below
        ``path`` that are removed after everything else, in that order, so that a removal
        interrupted by an error leaves them in place."""
        ...

    def cache_problem(self, directory: str) -> str | None:
        """What would let another user change the layer cache ``directory``, which may lie
        outside the root (README, "The layer cache"): the path at fault and why, or None. The
        directories on its way, as written and as resolved, are held to
        ``paths.shared_directory_problem`` and a symlink among them must be the user's or
        root's; the directory itself to ``layer_cache.directory_problem``. What does not exist
        yet is no problem (the job creates it). Nothing raises."""
        ...

    def cache_entries(self, directory: str) -> Sequence[CacheEntry]:
        """The entries of the layer cache ``directory`` and of its ``.tokens.<uid>``
        directories, never following a symlink. ``NotFound`` when it does not exist,
        ``UnsafePath`` when it has a ``cache_problem``."""
        ...

    def remove_cache_file(self, directory: str, name: str) -> None:
        """Remove the regular file ``name`` (as ``cache_entries`` names it) of the layer cache
        ``directory``, never following a symlink: ``NotRegularFile`` for anything else,
        ``NotFound`` when it is gone, ``UnsafePath`` when the cache has a ``cache_problem``."""
        ...

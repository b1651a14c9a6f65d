"""What the local adapters share about files on this host: the open flags of a directory, a new
file and a read, the port's error for an ``OSError`` (``port_error``), a file's identity from its
status, a bounded read of a descriptor, and the directories on the way to a path."""

from __future__ import annotations

import errno
import os

from slurm_image.domain import paths
from slurm_image.domain.identity import FileIdentity
from slurm_image.ports.workspace import (
    AccessDenied,
    AlreadyExists,
    NotFound,
    TooLarge,
    UnsafePath,
    WorkspaceError,
)

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DENIED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def port_error(error: OSError, field: str) -> WorkspaceError:
    """The port's error for an ``OSError`` met at ``field``."""
    reason = error.strerror or type(error).__name__
    if error.errno in _DENIED:
        return AccessDenied(field=field, rule=reason)
    if error.errno == errno.ENOENT:
        return NotFound(field=field, rule="does not exist")
    if error.errno == errno.EEXIST:
        return AlreadyExists(field=field, rule="already exists")
    if error.errno == errno.ELOOP:
        return UnsafePath(field=field, rule="is a symlink")
    return WorkspaceError(field=field, rule=reason)


def identity_of(status: os.stat_result) -> FileIdentity:
    return FileIdentity(device=status.st_dev, inode=status.st_ino)


def directories_to(directory: str) -> list[str]:
    """``/``, then every directory on the way to ``directory`` and ``directory`` itself, as
    written and then as resolved."""
    real = os.path.realpath(directory)
    return list(dict.fromkeys([*paths.ancestors(directory), *paths.ancestors(real)]))


def read_bounded(fd: int, max_bytes: int, field: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise TooLarge(field=field, rule=f"holds more than {max_bytes} bytes")


def group_id(name: str, field: str) -> int:
    """The gid of the group ``name`` for a file at ``field``; ``WorkspaceError`` when the
    system knows no such group."""
    import grp

    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise WorkspaceError(field=field, rule=f"group {name} does not exist here") from None

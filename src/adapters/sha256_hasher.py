"""SHA-256 through one descriptor, in large reads: images are gigabytes (docs/design.md, "The batch
job" and "Publication")."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from slurm_image.domain.identity import FileIdentity
from slurm_image.ports.hasher import ChangedWhileHashing, FileDigest, HashError, NotHashable

BUFFER_BYTES = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _moment(status: os.stat_result) -> tuple[int, int, int, int, int]:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


class Sha256Hasher:
    """A ``Hasher`` (see ``ports.hasher``): ``hashlib`` fed from a reused 1 MiB buffer."""

    name = "sha256"

    def __init__(self, buffer_bytes: int = BUFFER_BYTES) -> None:
        if buffer_bytes < 4096:
            raise ValueError("buffer_bytes must be at least 4096")
        self._buffer_bytes = buffer_bytes

    def digest_bytes(self, data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def digest_file(self, path: str) -> FileDigest:
        try:
            entry = Path(path).lstat()
        except OSError as error:
            raise self._error(error, path) from None
        if not stat.S_ISREG(entry.st_mode):
            # Looked at before opening, so that a FIFO never blocks us.
            raise NotHashable(field=path, rule="is not a regular file")
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as error:
            raise self._error(error, path) from None
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode) or before.st_ino != entry.st_ino:
                raise ChangedWhileHashing(field=path, rule="was replaced while it was opened")
            digest = hashlib.sha256()
            buffer = bytearray(self._buffer_bytes)
            view = memoryview(buffer)
            size = 0
            while count := os.readv(fd, [buffer]):
                digest.update(view[:count])
                size += count
            after = os.fstat(fd)
        except OSError as error:
            raise self._error(error, path) from None
        finally:
            os.close(fd)
        if _moment(before) != _moment(after) or size != after.st_size:
            raise ChangedWhileHashing(field=path, rule="changed while it was hashed")
        return FileDigest(
            sha256=digest.hexdigest(),
            size=size,
            identity=FileIdentity(device=after.st_dev, inode=after.st_ino),
            mtime_ns=after.st_mtime_ns,
            ctime_ns=after.st_ctime_ns,
        )

    @staticmethod
    def _error(error: OSError, path: str) -> HashError:
        if error.errno == errno.ENOENT:
            return NotHashable(field=path, rule="does not exist")
        if error.errno == errno.ELOOP:
            return NotHashable(field=path, rule="is a symlink")
        return HashError(field=path, rule=error.strerror or type(error).__name__)

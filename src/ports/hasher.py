"""SHA-256 of (possibly very large) files: ``FileDigest``, which ``Store.digest`` returns too,
and the ``Hasher`` protocol of a standalone file hasher (``adapters.sha256_hasher``).

``Hasher`` is not a port the use cases take: each digest they compare comes from the port that
read the bytes, through the same descriptor (docs/ports.md, "Hashing is not a port").

Error contract (every adapter; each error carries ``field``, the path, and ``reason``):

- ``NotHashable``: the path is missing, a symlink, a FIFO (never blocks), a directory or
  anything else that is not a regular file.
- ``ChangedWhileHashing``: the file's identity, size or times changed while it was read; the
  digest would describe no single state of the file.
- ``HashError``: any other I/O failure.
Digests are 64 lowercase hex characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError
from slurm_image.domain.identity import FileIdentity


class HashError(SlurmImageError):
    """Base of the hasher errors: ``field`` is the path, ``rule`` what went wrong."""


class NotHashable(HashError):
    """The path is not a regular file reachable without following a symlink."""


class ChangedWhileHashing(HashError):
    """The file changed between the start and the end of hashing."""


@dataclass(frozen=True)
class FileDigest:
    """The SHA-256 of one file, with the identity and size it had while it was read."""

    sha256: str
    size: int
    identity: FileIdentity
    mtime_ns: int
    ctime_ns: int


@runtime_checkable
class Hasher(Protocol):
    name: str

    def digest_bytes(self, data: bytes) -> str:
        """SHA-256 of ``data``."""
        ...

    def digest_file(self, path: str) -> FileDigest:
        """SHA-256 of the regular file at ``path``, opened once without following a symlink
        and streamed through that one descriptor."""
        ...

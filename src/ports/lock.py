"""The Locks port: named locks that hold across processes and, on shared filesystems, nodes.

``exclusive(name)`` is held by one holder at a time; ``shared(name)`` by any number of holders
while nobody holds it exclusively. Both wait at most ``timeout_s`` seconds and then raise
``LockTimeout`` (nothing was done under the lock). A holder that dies releases its locks.

Names follow ``domain.paths.name``. The local adapter uses POSIX ``fcntl`` record locks (which
NFS and Lustre share across clients, unlike BSD ``flock``) on files in ``images/locks/``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError


class LockTimeout(SlurmImageError):
    """The lock was held by someone else past the bounded wait."""


@runtime_checkable
class Locks(Protocol):
    def exclusive(self, name: str, *, timeout_s: float) -> AbstractContextManager[None]:
        """Hold the lock ``name`` alone, waiting at most ``timeout_s``."""
        ...

    def shared(self, name: str, *, timeout_s: float) -> AbstractContextManager[None]:
        """Hold the lock ``name`` together with other shared holders."""
        ...

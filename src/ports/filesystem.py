"""The Filesystems port: what kind of filesystem holds a path (for ``doctor``)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError


class FilesystemError(SlurmImageError):
    """The filesystem holding ``path`` cannot be described; ``field`` and ``rule`` say why."""


@runtime_checkable
class Filesystems(Protocol):
    def type_name(self, path: str) -> str:
        """The statfs type name of the filesystem holding ``path`` (``ext2/ext3``, ``xfs``,
        ``nfs``, ``lustre``, ``tmpfs``, ...). Raises ``FilesystemError``, never anything else."""
        ...

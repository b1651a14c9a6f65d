"""The Filesystems port: what kind of filesystem holds a path (for ``doctor``)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class FilesystemError(Exception):
    """The filesystem holding ``path`` cannot be described; ``field`` and ``reason`` say why."""

    def __init__(self, reason: str, field: str = "workspace_root") -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


@runtime_checkable
class Filesystems(Protocol):
    def type_name(self, path: str) -> str:
        """The statfs type name of the filesystem holding ``path`` (``ext2/ext3``, ``xfs``,
        ``nfs``, ``lustre``, ``tmpfs``, ...). Raises ``FilesystemError``, never anything else."""
        ...

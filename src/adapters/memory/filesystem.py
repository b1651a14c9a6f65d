"""``FakeFilesystems``: a ``Filesystems`` that names one filesystem type for every path."""

from __future__ import annotations

from slurm_image.ports.filesystem import FilesystemError


class FakeFilesystems:
    """A ``Filesystems`` that names every path's filesystem ``type_name`` (None: it fails)."""

    def __init__(self, type_name: str | None = "memory") -> None:
        self.name = type_name

    def type_name(self, path: str) -> str:
        if self.name is None:
            raise FilesystemError(
                field="workspace_root", rule=f"cannot describe the filesystem of {path} (injected)"
            )
        return self.name

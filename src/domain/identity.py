"""The identity of a file or directory on one host: what "the same file" means."""

from __future__ import annotations

from dataclasses import dataclass

from slurm_image.domain.errors import InvalidRecord


@dataclass(frozen=True)
class FileIdentity:
    """``(st_dev, st_ino)``: equal identities name the same object, whatever its path.

    Only meaningful on the host that recorded it: a shared filesystem may show another
    ``st_dev`` on another node (docs/design.md, "Publication"), so identities are compared on the
    login node only. A standard-library dataclass: every filesystem read carries one, and reading
    the catalog needs no model library. Records that embed it (pydantic models) validate its
    fields too.
    """

    device: int
    inode: int

    def __post_init__(self) -> None:
        for field, value in (("device", self.device), ("inode", self.inode)):
            if type(value) is not int or value < 0:
                raise InvalidRecord(
                    field=f"identity.{field}", rule="must be a non-negative integer", value=value
                )

    def same_object_elsewhere(self, other: FileIdentity) -> bool:
        """Whether ``other``, seen from another login node, may name the same object.

        NFS, Lustre and GPFS clients can report different ``st_dev`` for one filesystem, so
        only the inode can be compared across hosts.
        """
        return self.inode == other.inode

    def __str__(self) -> str:
        return f"{self.device}:{self.inode}"

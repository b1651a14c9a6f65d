"""The identity of a file or directory on one host: what "the same file" means."""

from __future__ import annotations

from pydantic import BaseModel, Field

from slurm_image.domain.model_config import FROZEN


class FileIdentity(BaseModel):
    """``(st_dev, st_ino)``: equal identities name the same object, whatever its path.

    Only meaningful on the host that recorded it: a shared filesystem may show another
    ``st_dev`` on another node (design §8), so identities are compared on the login node only.
    """

    model_config = FROZEN

    device: int = Field(ge=0)
    inode: int = Field(ge=0)

    def same_object_elsewhere(self, other: FileIdentity) -> bool:
        """Whether ``other``, seen from another login node, may name the same object.

        NFS, Lustre and GPFS clients can report different ``st_dev`` for one filesystem, so
        only the inode can be compared across hosts.
        """
        return self.inode == other.inode

    def __str__(self) -> str:
        return f"{self.device}:{self.inode}"

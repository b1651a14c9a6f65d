"""``MemoryCredentialsFile``: a ``CredentialsFile`` over files held in memory."""

from __future__ import annotations

import stat
from dataclasses import dataclass, field

from slurm_image.adapters.memory.workspace import NOBODY
from slurm_image.domain import paths
from slurm_image.ports.credentials import CredentialsFileError


@dataclass
class MemoryCredentialsFile:
    """In-memory credentials files: path -> (bytes, mode, owned by the user)."""

    files: dict[str, tuple[bytes, int, bool]] = field(default_factory=dict)
    home: str = "/home/user"
    uid: int = 1000

    def read_credentials_file(self, path: str, *, max_bytes: int) -> bytes:
        expanded = self.home + path[1:] if path.startswith("~/") else path
        if expanded not in self.files:
            raise CredentialsFileError(
                field="enroot.credentials_file", rule=f"no file at {expanded}"
            )
        data, mode, owned = self.files[expanded]
        problem = paths.secret_file_problem(
            stat.S_IFREG | mode, self.uid if owned else NOBODY, self.uid
        )
        if problem is not None:
            raise CredentialsFileError(
                field="enroot.credentials_file", rule=f"{expanded} {problem}"
            )
        if len(data) > max_bytes:
            raise CredentialsFileError(
                field="enroot.credentials_file", rule=f"{expanded} is larger than {max_bytes} bytes"
            )
        return data

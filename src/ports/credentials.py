"""The CredentialsFile port: reading the user's own registry credentials (a netrc file).

Error contract: ``CredentialsFileError`` (``field`` is ``enroot.credentials_file``, ``reason``
what is wrong) for a file that is missing, not a regular file, not owned by the user, open to
group or others, or too large. Its message never holds the file's content.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError

FIELD = "enroot.credentials_file"


class CredentialsFileError(SlurmImageError):
    """The credentials file cannot be used: ``field`` names the setting (``FIELD``), ``rule``
    what is wrong."""


@runtime_checkable
class CredentialsFile(Protocol):
    """Reads the netrc named by the profile, after checking it is the user's own and private."""

    def read_credentials_file(self, path: str, *, max_bytes: int) -> bytes:
        """The bytes of ``path`` (``~/`` is the user's home), read through one descriptor that
        follows no symlink and never blocks. Refused unless it is a regular file owned by the
        user with no permission for group or others, of at most ``max_bytes``."""
        ...

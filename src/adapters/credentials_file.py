"""The user's credentials file on the local filesystem (ports.credentials)."""

from __future__ import annotations

import os
from pathlib import Path

from slurm_image.domain import paths
from slurm_image.ports.credentials import FIELD, CredentialsFileError


class LocalCredentialsFile:
    """Reads a netrc the way the port says: one descriptor, no symlink, the user's own, 0600."""

    def read_credentials_file(self, path: str, *, max_bytes: int) -> bytes:
        expanded = Path(path).expanduser()
        if not expanded.is_absolute():
            raise CredentialsFileError(field=FIELD, rule=f"{path} does not name an absolute path")
        try:
            fd = os.open(expanded, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise CredentialsFileError(field=FIELD, rule=f"no file at {expanded}") from None
        except OSError as error:
            if expanded.is_symlink():
                raise CredentialsFileError(
                    field=FIELD, rule=f"{expanded} is a symlink, not a file"
                ) from None
            raise CredentialsFileError(
                field=FIELD, rule=f"cannot read {expanded}: {error.strerror}"
            ) from None
        try:
            info = os.fstat(fd)
            problem = paths.secret_file_problem(info.st_mode, info.st_uid, os.geteuid())
            if problem is not None:
                raise CredentialsFileError(field=FIELD, rule=f"{expanded} {problem}")
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read(max_bytes + 1)
        except OSError as error:
            raise CredentialsFileError(
                field=FIELD, rule=f"cannot read {expanded}: {error.strerror}"
            ) from None
        finally:
            os.close(fd)
        if len(data) > max_bytes:
            raise CredentialsFileError(
                field=FIELD, rule=f"{expanded} is larger than {max_bytes} bytes"
            )
        return data

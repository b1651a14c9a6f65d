"""The job's logs on the local filesystem (``ports.log_files``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from slurm_image.ports.workspace import AccessDenied, NotRegularFile, WorkspaceError


class LocalLogFiles:
    def read_from(self, path: str, offset: int, max_bytes: int) -> bytes:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            return b""
        except PermissionError:
            raise AccessDenied(field=path, rule="permission denied") from None
        except OSError as error:
            if Path(path).is_symlink():
                raise NotRegularFile(field=path, rule="is a symlink") from None
            raise WorkspaceError(field=path, rule=error.strerror or str(error)) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotRegularFile(field=path, rule="is not a regular file")
            return os.pread(fd, max_bytes, offset)
        finally:
            os.close(fd)

"""``metrics --textfile PATH``: the file node_exporter's textfile collector reads, replaced whole
so that a scrape reads the previous figures or the new ones, never part of a file.

The command's own output, like its standard output: a path the caller names anywhere, not the
store, so it is written here and not through the store's ports. A temporary file is created
exclusively beside PATH (its name ends in ``.tmp``, which the collector, reading ``*.prom``,
ignores), written, fsynced, renamed onto PATH, and the directory fsynced. A path that cannot
be written is refused naming ``--textfile`` (exit 2), and no temporary file is left behind.

The directory is held to ``domain.paths.output_directory_problem`` (yours or root's, closed to
group and others, sticky or not), before anything is read and again on the descriptor the
file is written through: in a directory others may write, another user could plant
``slurm_image.prom`` first, and every run of its owner would fail while the planted figures
were scraped."""

from __future__ import annotations

import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidPath

OPTION = "--textfile"
TEXTFILE_MODE = 0o644
"""Readable by node_exporter, whichever user it runs as."""
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


DIRECTORY_HINT = (
    "make the textfile directory one only you (or root) can add files to, e.g. `install -d -o"
    " $USER -m 0755 DIR`, and point node_exporter's --collector.textfile.directory at it"
)


def _refused(path: str, rule: str) -> InvalidPath:
    return InvalidPath(field=OPTION, rule=f"{path}: {rule}", value=path)


def _check_directory(path: str, directory: Path, status: os.stat_result) -> None:
    problem = paths.output_directory_problem(status.st_mode, status.st_uid, os.geteuid())
    if problem is not None:
        raise _refused(path, f"its directory {directory} {problem}: {DIRECTORY_HINT}")


def check_textfile(path: str) -> None:
    """Refuse, before anything is read or written, a PATH whose directory does not exist (or
    is no directory, or others may write it, or it cannot be written to) and a PATH that is a
    directory."""
    if not path or path.endswith("/") or Path(path).name in ("", ".", ".."):
        raise _refused(path, "must name a file")
    directory = Path(path).absolute().parent
    try:
        status = directory.stat()
    except OSError as error:
        raise _refused(path, f"its directory {directory}: {error.strerror}") from None
    if not stat.S_ISDIR(status.st_mode):
        raise _refused(path, f"{directory} is not a directory")
    _check_directory(path, directory, status)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise _refused(path, f"its directory {directory} is not writable")
    with suppress(FileNotFoundError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise _refused(path, "is a directory")


def write_textfile(path: str, data: bytes) -> None:
    """Replace PATH with ``data`` atomically (see the module docstring)."""
    target = Path(path).absolute()
    directory, name = target.parent, target.name
    try:
        directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise _refused(path, f"its directory {directory}: {error.strerror}") from None
    try:
        _check_directory(path, directory, os.fstat(directory_fd))
        temporary = f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            _write_new(directory_fd, temporary, data)
            os.replace(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
            os.fsync(directory_fd)
        except OSError as error:
            with suppress(OSError):
                os.unlink(temporary, dir_fd=directory_fd)  # gone already once renamed
            raise _refused(path, error.strerror or type(error).__name__) from None
    finally:
        os.close(directory_fd)


def _write_new(directory_fd: int, name: str, data: bytes) -> None:
    fd = os.open(name, _CREATE_FLAGS, TEXTFILE_MODE, dir_fd=directory_fd)
    try:
        os.fchmod(fd, TEXTFILE_MODE)  # whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)

"""The Workspace on a local or shared POSIX filesystem (design §4).

Every directory below the root is opened ``O_DIRECTORY|O_NOFOLLOW`` relative to its parent's
descriptor (``dir_fd``), and its owner is checked on that descriptor, so a symlink or a directory
swapped in by someone else is never walked through. Files are created
``O_CREAT|O_EXCL|O_NOFOLLOW`` relative to the verified parent descriptor and fsynced, as is the
directory entry. Reads look at the entry first (``lstat``: a FIFO is refused without being
opened), then open it ``O_NOFOLLOW|O_NONBLOCK`` and ``fstat`` the descriptor, which must be the
same regular file.

The root and every directory on the way to it (as written and as resolved) must be changeable
by nobody but the user and root: owned by one of them, and sticky when group or others may write
(``paths.shared_directory_problem``); a root that is not a directory, or is not safe so, is an
``InvalidPath`` of ``workspace_root`` (a profile error). Directories below the root must be the
user's own, and sticky if group or others may write them (``paths.own_directory_problem``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.identity import FileIdentity
from slurm_image.ports.workspace import (
    AccessDenied,
    AlreadyExists,
    IdentityChanged,
    NotFound,
    NotRegularFile,
    TooLarge,
    UnsafePath,
    VerifiedRead,
    WorkspaceError,
    WrittenFile,
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DENIED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def _error(error: OSError, field: str) -> WorkspaceError:
    """The port's error for an ``OSError`` met at ``field``."""
    reason = error.strerror or type(error).__name__
    if error.errno in _DENIED:
        return AccessDenied(field, reason)
    if error.errno == errno.ENOENT:
        return NotFound(field, "does not exist")
    if error.errno == errno.EEXIST:
        return AlreadyExists(field, "already exists")
    if error.errno == errno.ELOOP:
        return UnsafePath(field, "is a symlink")
    return WorkspaceError(field, reason)


def _identity(status: os.stat_result) -> FileIdentity:
    return FileIdentity(device=status.st_dev, inode=status.st_ino)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


class LocalWorkspace:
    """A ``Workspace`` (see ``ports.workspace``) rooted at ``root`` on this host."""

    def __init__(self, root: str, *, uid: int | None = None) -> None:
        self.root = root
        self._uid = os.geteuid() if uid is None else uid

    # -- walking -------------------------------------------------------------------------

    def _components(self, path: str) -> list[str]:
        prefix = self.root.rstrip("/") + "/"
        parts = path[len(prefix) :].split("/") if path.startswith(prefix) else []
        if not parts or any(part in ("", ".", "..") for part in parts):
            raise UnsafePath(path, f"must lie strictly below the workspace root {self.root}")
        return parts

    def _open_root(self) -> int:
        self._check_root_chain()
        try:
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except NotADirectoryError:
            raise InvalidPath("workspace_root", "must be a directory", self.root) from None
        except OSError as error:
            raise _error(error, self.root) from None

    def _check_root_chain(self) -> None:
        """The root and every directory on the way to it, as written and as resolved, may be
        changed by nobody but the user and root (``paths.shared_directory_problem``): otherwise
        another user could exchange ``images/`` under a pending job. A profile problem."""
        real = os.path.realpath(self.root)
        for directory in {*paths.ancestors(self.root)[:-1], *paths.ancestors(real)}:
            try:
                status = os.stat(directory)  # noqa: PTH116 (one rule for every path here)
            except FileNotFoundError:
                continue  # reported by the open that follows, as NotFound
            except OSError as error:
                raise _error(error, directory) from None
            if directory == real and not stat.S_ISDIR(status.st_mode):
                raise InvalidPath("workspace_root", "must be a directory", self.root)
            problem = paths.shared_directory_problem(status.st_mode, status.st_uid, self._uid)
            if problem is not None:
                raise InvalidPath(
                    "workspace_root",
                    f"{directory} {problem}; {paths.WORKSPACE_SETUP_HINT}",
                    self.root,
                )

    def _open_dir(self, parent: int, name: str, field: str) -> int:
        """Open the directory ``name`` below ``parent``: no symlink, a directory, ours."""
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as error:
            if error.errno in (errno.ENOTDIR, errno.ELOOP):
                try:
                    mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
                except OSError:
                    mode = 0
                raise UnsafePath(field, f"is {_kind(mode)}, not a directory") from None
            raise _error(error, field) from None
        status = os.fstat(fd)
        problem = paths.own_directory_problem(status.st_mode, status.st_uid, self._uid)
        if problem is not None:
            os.close(fd)
            raise UnsafePath(field, problem)
        return fd

    @contextmanager
    def _directory(self, parts: Sequence[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the directory ``root/parts``, each step verified.

        With ``create``, a missing directory on the way is made 0700 (and fsynced in place).
        """
        fd = self._open_root()
        try:
            walked = self.root.rstrip("/")
            for part in parts:
                walked = f"{walked}/{part}"
                try:
                    child = self._open_dir(fd, part, walked)
                except NotFound:
                    if not create:
                        raise
                    with suppress(AlreadyExists):  # made meanwhile, e.g. by a concurrent prepare:
                        self._mkdir(fd, part, walked, 0o700)  # verified below like any other
                    child = self._open_dir(fd, part, walked)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _parent(self, path: str, within: FileIdentity | None) -> Iterator[tuple[int, str]]:
        parts = self._components(path)
        with self._directory(parts[:-1]) as fd:
            if within is not None and _identity(os.fstat(fd)) != within:
                parent = path.rsplit("/", 1)[0]
                raise IdentityChanged(parent, f"is no longer the directory {within}")
            yield fd, parts[-1]

    def _mkdir(self, parent: int, name: str, field: str, mode: int) -> None:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            raise AlreadyExists(field, "already exists") from None
        except OSError as error:
            raise _error(error, field) from None
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as error:
            raise _error(error, field) from None
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.fsync(parent)

    # -- the port ------------------------------------------------------------------------

    def create_directory(
        self,
        path: str,
        *,
        mode: int = 0o700,
        parents: bool = False,
        within: FileIdentity | None = None,
    ) -> FileIdentity:
        parts = self._components(path)
        with self._directory(parts[:-1], create=parents) as parent:
            if within is not None and _identity(os.fstat(parent)) != within:
                raise IdentityChanged(
                    path.rsplit("/", 1)[0], f"is no longer the directory {within}"
                )
            self._mkdir(parent, parts[-1], path, mode)
            fd = self._open_dir(parent, parts[-1], path)
            try:
                return _identity(os.fstat(fd))
            finally:
                os.close(fd)

    def _create(self, parent: int, name: str, field: str, data: bytes, mode: int) -> WrittenFile:
        """Create ``name`` exclusively, write, set ``mode``, fsync. Removed again on failure."""
        try:
            fd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=parent)
        except OSError as error:
            raise _error(error, field) from None
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
                os.fsync(fd)
                status = os.fstat(fd)
            finally:
                os.close(fd)
        except BaseException as failure:
            with suppress(OSError):
                os.unlink(name, dir_fd=parent)
            if isinstance(failure, OSError):
                raise _error(failure, field) from None
            raise
        return WrittenFile(
            identity=_identity(status),
            size=status.st_size,
            mode=stat.S_IMODE(status.st_mode),
            sha256=hashlib.sha256(data).hexdigest(),
        )

    def write_new(
        self, path: str, data: bytes, *, mode: int, within: FileIdentity | None = None
    ) -> WrittenFile:
        with self._parent(path, within) as (parent, name):
            written = self._create(parent, name, path, data, mode)
            os.fsync(parent)
            return written

    def replace_file(
        self, path: str, data: bytes, *, mode: int = 0o600, within: FileIdentity | None = None
    ) -> WrittenFile:
        with self._parent(path, within) as (parent, name):
            temporary = f".{name}.{secrets.token_hex(8)}.tmp"
            written = self._create(parent, temporary, path, data, mode)
            try:
                os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
            except OSError as error:
                with suppress(OSError):
                    os.unlink(temporary, dir_fd=parent)
                raise _error(error, path) from None
            os.fsync(parent)
            return written

    def read_verified(
        self, path: str, *, max_bytes: int, within: FileIdentity | None = None
    ) -> VerifiedRead:
        with self._parent(path, within) as (parent, name):
            try:
                entry = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError as error:
                raise _error(error, path) from None
            if not stat.S_ISREG(entry.st_mode):
                raise NotRegularFile(path, f"is {_kind(entry.st_mode)}, not a regular file")
            if entry.st_uid != self._uid:
                raise UnsafePath(path, f"is owned by uid {entry.st_uid}, not {self._uid}")
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=parent)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise NotRegularFile(path, "is a symlink, not a regular file") from None
                raise _error(error, path) from None
            try:
                status = os.fstat(fd)
                if not stat.S_ISREG(status.st_mode):
                    raise NotRegularFile(path, f"is {_kind(status.st_mode)}, not a regular file")
                if _identity(status) != _identity(entry):
                    raise IdentityChanged(path, "was replaced while it was opened")
                if status.st_uid != self._uid:
                    raise UnsafePath(path, f"is owned by uid {status.st_uid}, not {self._uid}")
                if status.st_size > max_bytes:
                    raise TooLarge(path, f"holds more than {max_bytes} bytes")
                data = _read_bounded(fd, max_bytes, path)
            except OSError as error:
                raise _error(error, path) from None
            finally:
                os.close(fd)
        return VerifiedRead(
            data=data, identity=_identity(status), mode=stat.S_IMODE(status.st_mode)
        )

    def directory_identity(self, path: str) -> FileIdentity:
        with self._directory(self._components(path)) as fd:
            return _identity(os.fstat(fd))

    def exists(self, path: str) -> bool:
        try:
            with self._parent(path, None) as (parent, name):
                os.stat(name, dir_fd=parent, follow_symlinks=False)
                return True
        except NotFound:
            return False
        except FileNotFoundError:
            return False
        except OSError as error:
            raise _error(error, path) from None

    def list_directory(self, path: str) -> Sequence[str]:
        with self._directory(self._components(path)) as fd:
            try:
                return sorted(os.listdir(fd))  # noqa: PTH208 (a descriptor, not a path)
            except OSError as error:
                raise _error(error, path) from None

    def remove_file(self, path: str, *, within: FileIdentity | None = None) -> None:
        with self._parent(path, within) as (parent, name):
            try:
                if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                    raise WorkspaceError(path, "is a directory")
                os.unlink(name, dir_fd=parent)
                os.fsync(parent)
            except OSError as error:
                raise _error(error, path) from None

    def remove_tree(self, path: str, *, expected: FileIdentity) -> None:
        with self._parent(path, None) as (parent, name):
            fd = self._open_dir(parent, name, path)
            try:
                if _identity(os.fstat(fd)) != expected:
                    raise IdentityChanged(path, f"is no longer the directory {expected}")
                _clear(fd, path)
            finally:
                os.close(fd)
            try:
                os.rmdir(name, dir_fd=parent)
                os.fsync(parent)
            except OSError as error:
                raise _error(error, path) from None


def _read_bounded(fd: int, max_bytes: int, field: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise TooLarge(field, f"holds more than {max_bytes} bytes")


def _clear(fd: int, field: str) -> None:
    """Remove everything inside the open directory ``fd``, never following a symlink."""
    try:
        os.fchmod(fd, 0o700)
        for name in os.listdir(fd):
            entry = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(entry.st_mode):
                os.unlink(name, dir_fd=fd)
                continue
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            try:
                if _identity(os.fstat(child)) != _identity(entry):
                    raise IdentityChanged(f"{field}/{name}", "was replaced during removal")
                _clear(child, f"{field}/{name}")
            finally:
                os.close(child)
            os.rmdir(name, dir_fd=fd)
    except OSError as error:
        raise _error(error, field) from None

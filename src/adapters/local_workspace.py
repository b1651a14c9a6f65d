"""The Workspace on a local or shared POSIX filesystem (docs/design.md, "The plan and staging").

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

from slurm_image.adapters import local_layer_cache
from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.file_kinds import describe_mode
from slurm_image.domain.identity import FileIdentity
from slurm_image.ports.workspace import (
    AccessDenied,
    AlreadyExists,
    CacheEntry,
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
        return AccessDenied(field=field, rule=reason)
    if error.errno == errno.ENOENT:
        return NotFound(field=field, rule="does not exist")
    if error.errno == errno.EEXIST:
        return AlreadyExists(field=field, rule="already exists")
    if error.errno == errno.ELOOP:
        return UnsafePath(field=field, rule="is a symlink")
    return WorkspaceError(field=field, rule=reason)


def _identity(status: os.stat_result) -> FileIdentity:
    return FileIdentity(device=status.st_dev, inode=status.st_ino)


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
            raise UnsafePath(
                field=path, rule=f"must lie strictly below the workspace root {self.root}"
            )
        return parts

    def _open_root(self) -> int:
        self._check_root_chain()
        try:
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except NotADirectoryError:
            raise InvalidPath(
                field="workspace_root", rule="must be a directory", value=self.root
            ) from None
        except OSError as error:
            raise _error(error, self.root) from None

    def _check_root_chain(self) -> None:
        """The root and every directory on the way to it, as written and as resolved, may be
        changed by nobody but the user and root (``paths.shared_directory_problem``), and the
        root itself is closed to group and others (``paths.workspace_root_problem``): otherwise
        another user could exchange or pre-create ``images/``. A profile problem."""
        real = os.path.realpath(self.root)
        for directory in _chain(self.root):
            try:
                status = os.stat(directory)  # noqa: PTH116 (one rule for every path here)
            except FileNotFoundError:
                continue  # reported by the open that follows, as NotFound
            except OSError as error:
                raise _error(error, directory) from None
            if directory == real and not stat.S_ISDIR(status.st_mode):
                raise InvalidPath(
                    field="workspace_root", rule="must be a directory", value=self.root
                )
            if directory == real:
                problem = paths.workspace_root_problem(status.st_mode, status.st_uid, self._uid)
                hint = paths.OWN_ROOT_HINT
            else:
                problem = paths.shared_directory_problem(status.st_mode, status.st_uid, self._uid)
                hint = paths.WORKSPACE_SETUP_HINT
            if problem is not None:
                raise InvalidPath(
                    field="workspace_root", rule=f"{directory} {problem}; {hint}", value=self.root
                )

    def image_problem(self, path: str) -> str | None:
        """What lets someone but the user and root change the bytes at ``path`` (see the port)."""
        for directory in _chain(path.rsplit("/", 1)[0] or "/"):
            try:
                status = os.stat(directory)  # noqa: PTH116 (one rule for every path here)
            except OSError as error:
                return f"{directory} cannot be examined ({error.strerror})"
            if not stat.S_ISDIR(status.st_mode):
                return f"{directory} is not a directory"
            problem = paths.shared_directory_problem(status.st_mode, status.st_uid, self._uid)
            if problem is not None:
                return f"{directory} {problem}"
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            return f"{path} does not exist"
        except OSError as error:
            return f"{path} cannot be examined ({error.strerror})"
        if not stat.S_ISREG(status.st_mode):
            return f"{path} is {describe_mode(status.st_mode)}, not a regular file"
        problem = paths.unchangeable_file_problem(status.st_mode, status.st_uid, self._uid)
        return None if problem is None else f"{path} {problem}"

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
                raise UnsafePath(
                    field=field, rule=f"is {describe_mode(mode)}, not a directory"
                ) from None
            raise _error(error, field) from None
        status = os.fstat(fd)
        problem = paths.own_directory_problem(status.st_mode, status.st_uid, self._uid)
        if problem is not None:
            os.close(fd)
            raise UnsafePath(field=field, rule=problem)
        return fd

    def _step(self, parent: int, name: str, walked: str, create: int | None) -> int:
        """Open the directory ``name`` below ``parent``, made with mode ``create`` when it is
        missing and ``create`` is given. The root's own entry (``images/``) that is not the
        user's is a set-up problem of the workspace, not of one attempt: ``InvalidPath``."""
        try:
            try:
                return self._open_dir(parent, name, walked)
            except NotFound:
                if create is None:
                    raise
                with suppress(AlreadyExists):  # made meanwhile, e.g. by a concurrent prepare:
                    self._mkdir(parent, name, walked, create)  # verified below like any other
                return self._open_dir(parent, name, walked)
        except UnsafePath as error:
            if walked.rsplit("/", 1)[0] != self.root.rstrip("/"):
                raise
            raise InvalidPath(
                field="workspace_root",
                rule=f"{walked} {error.reason}; {paths.STORE_DIRECTORY_HINT}",
                value=walked,
            ) from None

    @contextmanager
    def _directory(
        self, parts: Sequence[str], *, create: bool = False, mode: int = 0o700, widen: bool = False
    ) -> Iterator[int]:
        """A descriptor of the directory ``root/parts``, each step verified: the one walk down
        the tree that every operation takes.

        With ``create``, a missing directory on the way is made with ``mode`` (and fsynced in
        place); with ``widen``, every directory on the way gains ``mode``'s read and search
        bits (the store's published directories, which anyone may resolve).
        """
        fd = self._open_root()
        try:
            walked = self.root.rstrip("/")
            for part in parts:
                walked = f"{walked}/{part}"
                child = self._step(fd, part, walked, mode if create else None)
                os.close(fd)
                fd = child
                if widen:
                    current = stat.S_IMODE(os.fstat(fd).st_mode)
                    if current | (mode & 0o555) != current:
                        os.fchmod(fd, current | (mode & 0o555))
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _parent(self, path: str, within: FileIdentity | None) -> Iterator[tuple[int, str]]:
        parts = self._components(path)
        with self._directory(parts[:-1]) as fd:
            if within is not None and _identity(os.fstat(fd)) != within:
                parent = path.rsplit("/", 1)[0]
                raise IdentityChanged(field=parent, rule=f"is no longer the directory {within}")
            yield fd, parts[-1]

    def _mkdir(self, parent: int, name: str, field: str, mode: int) -> None:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            raise AlreadyExists(field=field, rule="already exists") from None
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
                    field=path.rsplit("/", 1)[0], rule=f"is no longer the directory {within}"
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
                raise NotRegularFile(
                    field=path, rule=f"is {describe_mode(entry.st_mode)}, not a regular file"
                )
            if entry.st_uid != self._uid:
                raise UnsafePath(
                    field=path, rule=f"is owned by uid {entry.st_uid}, not {self._uid}"
                )
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=parent)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise NotRegularFile(
                        field=path, rule="is a symlink, not a regular file"
                    ) from None
                raise _error(error, path) from None
            try:
                status = os.fstat(fd)
                if not stat.S_ISREG(status.st_mode):
                    raise NotRegularFile(
                        field=path, rule=f"is {describe_mode(status.st_mode)}, not a regular file"
                    )
                if _identity(status) != _identity(entry):
                    raise IdentityChanged(field=path, rule="was replaced while it was opened")
                if status.st_uid != self._uid:
                    raise UnsafePath(
                        field=path, rule=f"is owned by uid {status.st_uid}, not {self._uid}"
                    )
                if status.st_size > max_bytes:
                    raise TooLarge(field=path, rule=f"holds more than {max_bytes} bytes")
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
                    raise WorkspaceError(field=path, rule="is a directory")
                os.unlink(name, dir_fd=parent)
                os.fsync(parent)
            except OSError as error:
                raise _error(error, path) from None

    # -- the layer cache, which may lie outside the root -------------------------------------

    def cache_problem(self, directory: str) -> str | None:
        return local_layer_cache.cache_problem(directory, self._uid)

    def cache_entries(self, directory: str) -> Sequence[CacheEntry]:
        return local_layer_cache.cache_entries(directory, self._uid)

    def remove_cache_file(self, directory: str, name: str) -> None:
        local_layer_cache.remove_cache_file(directory, name, self._uid)

    def remove_tree(self, path: str, *, expected: FileIdentity, last: Sequence[str] = ()) -> None:
        with self._parent(path, None) as (parent, name):
            fd = self._open_dir(parent, name, path)
            try:
                if _identity(os.fstat(fd)) != expected:
                    raise IdentityChanged(field=path, rule=f"is no longer the directory {expected}")
                _Walk(fd, path, keep=frozenset(last)).run()
                for entry in last:
                    _remove_entry(fd, entry, f"{path}/{entry}")
                _Walk(fd, path).run()  # a name of ``last`` that is a directory, or came back
            finally:
                os.close(fd)
            try:
                os.rmdir(name, dir_fd=parent)
                os.fsync(parent)
            except OSError as error:
                raise _error(error, path) from None


def _chain(directory: str) -> list[str]:
    """``/``, then every directory on the way to ``directory`` and ``directory`` itself, as
    written and then as resolved."""
    real = os.path.realpath(directory)
    return list(dict.fromkeys([*paths.ancestors(directory), *paths.ancestors(real)]))


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
            raise TooLarge(field=field, rule=f"holds more than {max_bytes} bytes")


_SWEEPS = 8
"""How often one directory may be found changed (refilled after its sweep, or emptied again
after an ``rmdir`` refused) before its tree is taken to be written to while it is removed."""


class _Walk:
    """Empty one open directory, iteratively, in bounded descriptors and memory.

    Holds at most three descriptors whatever the tree's depth or width: the directory being
    emptied, its listing (one ``scandir``, never a list of names), and a child or parent while
    stepping. Each sweep unlinks entries that are not directories (``unlink`` never follows a
    symlink and never removes a directory) and stops at the first directory, which is entered
    only after ``lstat``, open with ``O_DIRECTORY|O_NOFOLLOW`` and ``fstat`` agree it is the same
    directory on the same filesystem (a mount inside is refused, never emptied). The way back up
    is ``..`` of the emptied directory, taken only when it is the directory the walk came from,
    so a directory moved elsewhere meanwhile is not followed out of the tree. The state kept is
    one name and one inode number per level of depth.
    """

    def __init__(self, top: int, field: str, *, keep: frozenset[str] = frozenset()) -> None:
        self._top = top
        self._field = field
        self._keep = keep
        self._device = os.fstat(top).st_dev
        self._names: list[str] = []
        self._inodes: list[int] = []
        self._refused = 0

    def where(self, name: str = "") -> str:
        return "/".join([self._field, *self._names, *([name] if name else [])])

    def run(self) -> None:
        fd = self._top
        try:
            os.fchmod(fd, 0o700)
            while True:
                child = self._sweep(fd)
                if child is not None:
                    opened = self._enter(fd, child)
                    if fd != self._top:
                        os.close(fd)
                    fd = opened
                    continue
                if not self._names:
                    return
                parent = self._up(fd)
                os.close(fd)
                fd = parent
                self._remove_emptied(fd)
        except OSError as error:
            raise _error(error, self.where()) from None
        finally:
            if fd != self._top:
                os.close(fd)

    def _sweep(self, fd: int) -> str | None:
        """Unlink entries until the first directory, and return its name; None once empty."""
        keep = frozenset() if self._names else self._keep
        for _ in range(_SWEEPS):
            removed = False
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.name in keep:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        return entry.name
                    with suppress(FileNotFoundError, IsADirectoryError):
                        os.unlink(entry.name, dir_fd=fd)  # a directory by now: the next sweep
                        removed = True
            if not removed:
                return None
        raise WorkspaceError(field=self.where(), rule="kept changing while it was removed")

    def _enter(self, parent: int, name: str) -> int:
        entry = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(entry.st_mode):
            raise IdentityChanged(field=self.where(name), rule="was replaced during removal")
        if entry.st_dev != self._device:
            raise UnsafePath(
                field=self.where(name), rule="is another filesystem mounted here: not removed"
            )
        try:
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
            except PermissionError:
                _unlock(parent, name, entry, self.where(name))
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as error:
            if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            raise UnsafePath(
                field=self.where(name),
                rule=f"became {describe_mode(mode)} during removal: not followed",
            ) from None
        try:
            if _identity(os.fstat(fd)) != _identity(entry):
                raise IdentityChanged(field=self.where(name), rule="was replaced during removal")
            os.fchmod(fd, 0o700)
        except BaseException:
            os.close(fd)
            raise
        self._names.append(name)
        self._inodes.append(entry.st_ino)
        return fd

    def _up(self, fd: int) -> int:
        """The parent of the emptied directory ``fd``: the directory the walk came from."""
        if len(self._names) == 1:
            return self._top
        parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
        status = os.fstat(parent)
        if (status.st_dev, status.st_ino) != (self._device, self._inodes[-2]):
            os.close(parent)
            raise IdentityChanged(field=self.where(), rule="was moved during removal")
        return parent

    def _remove_emptied(self, parent: int) -> None:
        """Remove the directory just emptied from ``parent``, if it is still that directory."""
        name, inode = self._names.pop(), self._inodes.pop()
        try:
            entry = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if (entry.st_dev, entry.st_ino) == (self._device, inode):
                os.rmdir(name, dir_fd=parent)
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.ENOTEMPTY:
                raise
            self._refused += 1  # filled again meanwhile: the parent's next sweep enters it again
            if self._refused > _SWEEPS:
                raise WorkspaceError(
                    field=self.where(name), rule="kept changing while it was removed"
                ) from None


def _unlock(parent: int, name: str, entry: os.stat_result, field: str) -> None:
    """Give our own directory ``name`` back the permissions to empty it (the image may have
    made it 0000): through an ``O_PATH`` descriptor, which needs none, of that very directory."""
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        if _identity(os.fstat(fd)) != _identity(entry):
            raise IdentityChanged(field=field, rule="was replaced during removal")
        os.chmod(f"/proc/self/fd/{fd}", 0o700)  # noqa: PTH101 (the descriptor's own inode)
    finally:
        os.close(fd)


def _remove_entry(fd: int, name: str, field: str) -> None:
    """Unlink ``name`` below ``fd`` unless it is a directory or gone, and make that durable."""
    try:
        os.unlink(name, dir_fd=fd)
    except (FileNotFoundError, IsADirectoryError):
        return
    except OSError as error:
        raise _error(error, field) from None
    os.fsync(fd)

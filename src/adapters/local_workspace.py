"""The Workspace on a local or shared POSIX filesystem (docs/design.md, "The plan and staging"),
over the verified walk of ``LocalTree``.

Files are created ``O_CREAT|O_EXCL|O_NOFOLLOW`` relative to the verified parent descriptor and
fsynced, as is the directory entry. Reads look at the entry first (``lstat``: a FIFO is refused
without being opened), then open it ``O_NOFOLLOW|O_NONBLOCK`` and ``fstat`` the descriptor, which
must be the same regular file. A tree is removed by ``tree_removal``; the layer cache, which may
lie outside the root, by ``local_layer_cache``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Sequence
from contextlib import suppress

from slurm_image.adapters import local_layer_cache
from slurm_image.adapters.local_files import (
    NEW_FILE_FLAGS,
    READ_FLAGS,
    directories_to,
    identity_of,
    port_error,
    read_bounded,
)
from slurm_image.adapters.local_tree import LocalTree
from slurm_image.adapters.tree_removal import DirectoryEmptier, remove_entry
from slurm_image.domain import paths
from slurm_image.domain.file_kinds import describe_mode
from slurm_image.domain.identity import FileIdentity
from slurm_image.ports.workspace import (
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


class LocalWorkspace(LocalTree):
    """A ``Workspace`` (see ``ports.workspace``) rooted at ``root`` on this host."""

    def image_problem(self, path: str) -> str | None:
        """What lets someone but the user and root change the bytes at ``path`` (see the port)."""
        for directory in directories_to(path.rsplit("/", 1)[0] or "/"):
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
            if within is not None and identity_of(os.fstat(parent)) != within:
                raise IdentityChanged(
                    field=path.rsplit("/", 1)[0], rule=f"is no longer the directory {within}"
                )
            self._mkdir(parent, parts[-1], path, mode)
            fd = self._open_dir(parent, parts[-1], path)
            try:
                return identity_of(os.fstat(fd))
            finally:
                os.close(fd)

    def _create(
        self, parent: int, name: str, field: str, data: bytes, mode: int, *, gid: int = -1
    ) -> WrittenFile:
        """Create ``name`` exclusively, write, set the group ``gid`` (-1: keep) and ``mode``,
        fsync. Removed again on failure."""
        try:
            fd = os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=parent)
        except OSError as error:
            raise port_error(error, field) from None
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if gid != -1:
                    os.fchown(fd, -1, gid)
                os.fchmod(fd, mode)
                os.fsync(fd)
                status = os.fstat(fd)
            finally:
                os.close(fd)
        except BaseException as failure:
            with suppress(OSError):
                os.unlink(name, dir_fd=parent)
            if isinstance(failure, OSError):
                raise port_error(failure, field) from None
            raise
        return WrittenFile(
            identity=identity_of(status),
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
                raise port_error(error, path) from None
            os.fsync(parent)
            return written

    def read_verified(
        self, path: str, *, max_bytes: int, within: FileIdentity | None = None
    ) -> VerifiedRead:
        with self._parent(path, within) as (parent, name):
            try:
                entry = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError as error:
                raise port_error(error, path) from None
            if not stat.S_ISREG(entry.st_mode):
                raise NotRegularFile(
                    field=path, rule=f"is {describe_mode(entry.st_mode)}, not a regular file"
                )
            if entry.st_uid != self._uid:
                raise UnsafePath(
                    field=path, rule=f"is owned by uid {entry.st_uid}, not {self._uid}"
                )
            try:
                fd = os.open(name, READ_FLAGS, dir_fd=parent)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise NotRegularFile(
                        field=path, rule="is a symlink, not a regular file"
                    ) from None
                raise port_error(error, path) from None
            try:
                status = os.fstat(fd)
                if not stat.S_ISREG(status.st_mode):
                    raise NotRegularFile(
                        field=path, rule=f"is {describe_mode(status.st_mode)}, not a regular file"
                    )
                if identity_of(status) != identity_of(entry):
                    raise IdentityChanged(field=path, rule="was replaced while it was opened")
                if status.st_uid != self._uid:
                    raise UnsafePath(
                        field=path, rule=f"is owned by uid {status.st_uid}, not {self._uid}"
                    )
                if status.st_size > max_bytes:
                    raise TooLarge(field=path, rule=f"holds more than {max_bytes} bytes")
                data = read_bounded(fd, max_bytes, path)
            except OSError as error:
                raise port_error(error, path) from None
            finally:
                os.close(fd)
        return VerifiedRead(
            data=data, identity=identity_of(status), mode=stat.S_IMODE(status.st_mode)
        )

    def directory_identity(self, path: str) -> FileIdentity:
        with self._directory(self._components(path)) as fd:
            return identity_of(os.fstat(fd))

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
            raise port_error(error, path) from None

    def list_directory(self, path: str) -> Sequence[str]:
        with self._directory(self._components(path)) as fd:
            try:
                return sorted(os.listdir(fd))  # noqa: PTH208 (a descriptor, not a path)
            except OSError as error:
                raise port_error(error, path) from None

    def remove_file(self, path: str, *, within: FileIdentity | None = None) -> None:
        with self._parent(path, within) as (parent, name):
            try:
                if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                    raise WorkspaceError(field=path, rule="is a directory")
                os.unlink(name, dir_fd=parent)
                os.fsync(parent)
            except OSError as error:
                raise port_error(error, path) from None

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
                if identity_of(os.fstat(fd)) != expected:
                    raise IdentityChanged(field=path, rule=f"is no longer the directory {expected}")
                DirectoryEmptier(fd, path, keep=frozenset(last)).run()
                for entry in last:
                    remove_entry(fd, entry, f"{path}/{entry}")
                DirectoryEmptier(
                    fd, path
                ).run()  # a name of ``last`` that is a directory, or came back
            finally:
                os.close(fd)
            try:
                os.rmdir(name, dir_fd=parent)
                os.fsync(parent)
            except OSError as error:
                raise port_error(error, path) from None

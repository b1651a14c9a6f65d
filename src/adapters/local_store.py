"""The Store on a local or shared POSIX filesystem: ``LocalWorkspace`` plus publication
(docs/design.md, "Publication").

Everything below the root goes through the workspace's verified walk (``O_DIRECTORY|
O_NOFOLLOW`` per step, owner checked). A file is opened once, ``O_NOFOLLOW|O_NONBLOCK``, after
its entry was looked at (a FIFO is never opened), and its ``fstat`` before and after the read
must agree on identity, size and times. Artifacts enter the store by ``link`` (exclusive: an
existing entry is never replaced) and ``unlink``, not ``rename``, which would replace silently.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from slurm_image.adapters.local_files import (
    READ_FLAGS,
    group_id,
    identity_of,
    port_error,
    read_bounded,
)
from slurm_image.adapters.local_workspace import LocalWorkspace
from slurm_image.domain.file_kinds import EntryKind, describe_mode
from slurm_image.domain.file_kinds import entry_kind as file_kind
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.paths import own_file_problem
from slurm_image.domain.store_layout import RECORD_MODE
from slurm_image.ports.hasher import FileDigest
from slurm_image.ports.store import ChangedWhileRead, ChangeStamp
from slurm_image.ports.workspace import (
    AlreadyExists,
    NotFound,
    NotRegularFile,
    TooLarge,
    UnsafePath,
    VerifiedRead,
    WorkspaceError,
)

_BUFFER_BYTES = 1 << 20
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_STAMP_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _moment(status: os.stat_result) -> tuple[int, int, int, int, int]:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


class LocalStore(LocalWorkspace):
    """A ``Store`` (see ``ports.store``) rooted at ``root`` on this host."""

    @classmethod
    def reader(cls, root: str) -> LocalStore:
        """A store for resolving what is published, by anyone: it trusts the files and
        directories of the workspace root's owner (not of the caller), and is not written to."""
        try:
            owner = Path(root).stat().st_uid
        except OSError:
            owner = os.geteuid()
        return cls(root, uid=owner)

    def _below_root(self, path: str) -> bool:
        return path.startswith(self.root.rstrip("/") + "/")

    @contextmanager
    def _at(self, path: str) -> Iterator[tuple[int | None, str]]:
        """The verified parent descriptor and name of ``path``; outside the root (an inspected
        ``.sqsh``), no descriptor and the path itself."""
        if self._below_root(path):
            with self._parent(path, None) as (parent, name):
                yield parent, name
        else:
            yield None, path

    @contextmanager
    def _open_regular(self, path: str) -> Iterator[tuple[int, os.stat_result]]:
        with self._at(path) as (parent, name):
            try:
                entry = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError as error:
                raise port_error(error, path) from None
            if not stat.S_ISREG(entry.st_mode):
                raise NotRegularFile(
                    field=path, rule=f"is {describe_mode(entry.st_mode)}, not a regular file"
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
                if not stat.S_ISREG(status.st_mode) or identity_of(status) != identity_of(entry):
                    raise ChangedWhileRead(field=path, rule="was replaced while it was opened")
                yield fd, status
            finally:
                os.close(fd)

    def read_stable(self, path: str, *, max_bytes: int) -> VerifiedRead:
        with self._open_regular(path) as (fd, before):
            if before.st_uid != self._uid:
                raise UnsafePath(
                    field=path, rule=f"is owned by uid {before.st_uid}, not {self._uid}"
                )
            if before.st_size > max_bytes:
                raise TooLarge(field=path, rule=f"holds more than {max_bytes} bytes")
            try:
                data = read_bounded(fd, max_bytes, path)
                after = os.fstat(fd)
            except OSError as error:
                raise port_error(error, path) from None
        if _moment(before) != _moment(after) or len(data) != after.st_size:
            raise ChangedWhileRead(field=path, rule="changed while it was read")
        return VerifiedRead(
            data=data, identity=identity_of(after), mode=stat.S_IMODE(after.st_mode)
        )

    def digest(self, path: str) -> FileDigest:
        with self._open_regular(path) as (fd, before):
            digest = hashlib.sha256()
            buffer = bytearray(_BUFFER_BYTES)
            view = memoryview(buffer)
            size = 0
            try:
                while count := os.readv(fd, [buffer]):
                    digest.update(view[:count])
                    size += count
                after = os.fstat(fd)
            except OSError as error:
                raise port_error(error, path) from None
        if _moment(before) != _moment(after) or size != after.st_size:
            raise ChangedWhileRead(field=path, rule="changed while it was hashed")
        return FileDigest(
            sha256=digest.hexdigest(),
            size=size,
            identity=identity_of(after),
            mtime_ns=after.st_mtime_ns,
            ctime_ns=after.st_ctime_ns,
        )

    def entry_kind(self, path: str) -> EntryKind | None:
        try:
            with self._at(path) as (parent, name):
                return file_kind(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except (NotFound, FileNotFoundError):
            return None
        except OSError as error:
            raise port_error(error, path) from None

    def file_sizes(self, directory: str) -> dict[str, int]:
        sizes: dict[str, int] = {}
        with self._directory(self._components(directory)) as fd:
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        with suppress(FileNotFoundError):  # removed while listed
                            status = entry.stat(follow_symlinks=False)
                            if stat.S_ISREG(status.st_mode):
                                sizes[entry.name] = status.st_size
            except OSError as error:
                raise port_error(error, directory) from None
        return dict(sorted(sizes.items()))

    def ensure_directory(self, path: str, *, mode: int, group: str | None = None) -> FileIdentity:
        gid = -1 if group is None else group_id(group, path)
        try:
            with self._directory(self._components(path), create=True, mode=mode, widen=True) as fd:
                if group is not None:
                    os.fchown(fd, -1, gid)
                    os.fchmod(fd, mode)
                return identity_of(os.fstat(fd))
        except OSError as error:
            raise port_error(error, path) from None

    def set_link(self, path: str, target: str) -> None:
        with self._parent(path, None) as (parent, name):
            temporary = f".{name}.{secrets.token_hex(8)}.tmp"
            try:
                os.symlink(target, temporary, dir_fd=parent)
            except OSError as error:
                raise port_error(error, path) from None
            _rename_over(parent, temporary, parent, name, path)
            os.fsync(parent)

    def read_link(self, path: str) -> str | None:
        with self._parent(path, None) as (parent, name):
            try:
                return os.readlink(name, dir_fd=parent)
            except FileNotFoundError:
                return None
            except OSError as error:
                if error.errno == errno.EINVAL:
                    raise NotRegularFile(field=path, rule="is not a symlink") from None
                raise port_error(error, path) from None

    def install(
        self,
        source: str,
        destination: str,
        *,
        expected: FileDigest,
        mode: int,
        group: str | None = None,
    ) -> FileIdentity:
        gid = -1 if group is None else group_id(group, destination)
        with self._parent(source, None) as (source_dir, source_name):
            try:
                fd = os.open(source_name, READ_FLAGS, dir_fd=source_dir)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise NotRegularFile(
                        field=source, rule="is a symlink, not a regular file"
                    ) from None
                raise port_error(error, source) from None
            try:
                status = os.fstat(fd)
                seen = (
                    expected.identity.device,
                    expected.identity.inode,
                    expected.size,
                    expected.mtime_ns,
                    expected.ctime_ns,
                )
                if not stat.S_ISREG(status.st_mode) or _moment(status) != seen:
                    raise ChangedWhileRead(field=source, rule="is not the file that was verified")
                identity = identity_of(status)
                with self._parent(destination, None) as (target_dir, target_name):
                    with suppress(FileNotFoundError):
                        os.stat(target_name, dir_fd=target_dir, follow_symlinks=False)
                        raise AlreadyExists(field=destination, rule="already exists")
                    os.fchown(fd, -1, gid)
                    os.fchmod(fd, mode)
                    os.fsync(fd)
                    self._link(source_dir, source_name, target_dir, target_name, destination)
                    linked = os.stat(target_name, dir_fd=target_dir, follow_symlinks=False)
                    if identity_of(linked) != identity:
                        os.unlink(target_name, dir_fd=target_dir)
                        raise ChangedWhileRead(field=source, rule="was replaced while it was moved")
                    os.fsync(target_dir)
                left = os.stat(source_name, dir_fd=source_dir, follow_symlinks=False)
                if identity_of(left) == identity:
                    os.unlink(source_name, dir_fd=source_dir)
                    os.fsync(source_dir)
                return identity
            except OSError as error:
                raise port_error(error, source) from None
            finally:
                os.close(fd)

    def set_mode(self, path: str, *, mode: int) -> None:
        with self._open_regular(path) as (fd, _):
            try:
                os.fchmod(fd, mode)
                os.fsync(fd)
            except OSError as error:
                raise port_error(error, path) from None

    @staticmethod
    def _link(source_dir: int, source: str, target_dir: int, target: str, field: str) -> None:
        try:
            os.link(
                source, target, src_dir_fd=source_dir, dst_dir_fd=target_dir, follow_symlinks=False
            )
        except FileExistsError:
            raise AlreadyExists(field=field, rule="already exists") from None

    def publish_file(
        self, path: str, data: bytes, *, mode: int, staging: str, group: str | None = None
    ) -> None:
        gid = -1 if group is None else group_id(group, path)
        with (
            self._parent(path, None) as (parent, name),
            self._directory(self._components(staging)) as staging_fd,
        ):
            temporary = f"{name}.{secrets.token_hex(8)}.tmp"
            self._create(staging_fd, temporary, path, data, mode, gid=gid)
            _rename_over(staging_fd, temporary, parent, name, path)
            os.fsync(parent)
            os.fsync(staging_fd)

    def open_lock_file(self, path: str) -> int:
        """A read-write descriptor of the lock file ``path`` (created 0600, never through a
        symlink), for ``adapters.fcntl_lock``."""
        with self._parent(path, None) as (parent, name):
            try:
                fd = os.open(name, _LOCK_FLAGS, 0o600, dir_fd=parent)
            except OSError as error:
                raise port_error(error, path) from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise NotRegularFile(field=path, rule="is not a regular file")
            return fd

    def bump(self, path: str) -> None:
        fd = self.open_appending(path, mode=RECORD_MODE)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            os.write(fd, b".")
        except OSError as error:
            raise port_error(error, path) from None
        finally:
            os.close(fd)  # releases the lock

    def stamp(self, path: str) -> ChangeStamp | None:
        try:
            fd = os.open(path, _STAMP_FLAGS)
        except OSError:
            return None
        try:
            status = os.fstat(fd)
        finally:
            os.close(fd)
        if not stat.S_ISREG(status.st_mode):
            return None
        return ChangeStamp(status.st_dev, status.st_ino, status.st_size)

    def open_appending(self, path: str, *, mode: int) -> int:
        """A descriptor of the regular file ``path`` that writes only at its end (``O_APPEND``;
        readable, so that an appender can look at the last byte), for ``adapters.local_history``.
        Created exclusively with exactly ``mode`` when missing (the file and the directory
        fsynced); an existing one must be a regular file of the user's own that group and
        others cannot write. Never through a symlink, never a FIFO opened."""
        with self._parent(path, None) as (parent, name):
            try:
                fd = os.open(name, _APPEND_FLAGS | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=parent)
            except FileExistsError:
                fd = self._open_existing_appending(parent, name, path)
            except OSError as error:
                raise port_error(error, path) from None
            else:
                try:
                    os.fchmod(fd, mode)
                    os.fsync(fd)
                    os.fsync(parent)
                except OSError as error:
                    os.close(fd)
                    raise port_error(error, path) from None
            return fd

    def _open_existing_appending(self, parent: int, name: str, path: str) -> int:
        try:
            entry = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISREG(entry.st_mode):
                raise NotRegularFile(
                    field=path, rule=f"is {describe_mode(entry.st_mode)}, not a regular file"
                )
            fd = os.open(name, _APPEND_FLAGS, dir_fd=parent)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise NotRegularFile(field=path, rule="is a symlink, not a regular file") from None
            raise port_error(error, path) from None
        status = os.fstat(fd)
        problem = own_file_problem(status.st_mode, status.st_uid, self._uid)
        if not stat.S_ISREG(status.st_mode) or identity_of(status) != identity_of(entry):
            problem = "was replaced while it was opened"
        if problem is not None:
            os.close(fd)
            raise UnsafePath(field=path, rule=problem)
        return fd


def _rename_over(source_fd: int, temporary: str, parent: int, name: str, path: str) -> None:
    """Rename ``temporary`` (in ``source_fd``) over ``name`` (in ``parent``), the store's
    ``path``; on failure the temporary is removed, and a directory in the way is named."""
    try:
        os.rename(temporary, name, src_dir_fd=source_fd, dst_dir_fd=parent)
    except OSError as error:
        with suppress(OSError):
            os.unlink(temporary, dir_fd=source_fd)
        if error.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
            raise WorkspaceError(field=path, rule="is a directory") from None
        raise port_error(error, path) from None

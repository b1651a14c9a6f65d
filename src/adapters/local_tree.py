"""A directory tree rooted at ``root`` on a local or shared POSIX filesystem, walked one verified
descriptor at a time: the one walk down the tree that every operation of ``LocalWorkspace`` and
``LocalStore`` takes (docs/design.md, "The plan and staging").

Every directory below the root is opened ``O_DIRECTORY|O_NOFOLLOW`` relative to its parent's
descriptor (``dir_fd``), and its owner is checked on that descriptor, so a symlink or a directory
swapped in by someone else is never walked through.

The root and every directory on the way to it (as written and as resolved) must be changeable
by nobody but the user and root: owned by one of them, and sticky when group or others may write
(``paths.shared_directory_problem``); a root that is not a directory, or is not safe so, is an
``InvalidPath`` of ``workspace_root`` (a profile error). Directories below the root must be the
user's own, and sticky if group or others may write them (``paths.own_directory_problem``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

from slurm_image.adapters.local_files import DIR_FLAGS, directories_to, identity_of, port_error
from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.file_kinds import describe_mode
from slurm_image.domain.identity import FileIdentity
from slurm_image.ports.workspace import (
    AlreadyExists,
    IdentityChanged,
    NotFound,
    UnsafePath,
)


class LocalTree:
    """The verified walk below ``root`` on this host, as the user ``uid`` (default: ours)."""

    def __init__(self, root: str, *, uid: int | None = None) -> None:
        self.root = root
        self._uid = os.geteuid() if uid is None else uid

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
            raise port_error(error, self.root) from None

    def _check_root_chain(self) -> None:
        """The root and every directory on the way to it, as written and as resolved, may be
        changed by nobody but the user and root (``paths.shared_directory_problem``), and the
        root itself is closed to group and others (``paths.workspace_root_problem``): otherwise
        another user could exchange or pre-create ``images/``. A profile problem."""
        real = os.path.realpath(self.root)
        for directory in directories_to(self.root):
            try:
                status = os.stat(directory)  # noqa: PTH116 (one rule for every path here)
            except FileNotFoundError:
                continue  # reported by the open that follows, as NotFound
            except OSError as error:
                raise port_error(error, directory) from None
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

    def _open_dir(self, parent: int, name: str, field: str) -> int:
        """Open the directory ``name`` below ``parent``: no symlink, a directory, ours."""
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent)
        except OSError as error:
            if error.errno in (errno.ENOTDIR, errno.ELOOP):
                try:
                    mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
                except OSError:
                    mode = 0
                raise UnsafePath(
                    field=field, rule=f"is {describe_mode(mode)}, not a directory"
                ) from None
            raise port_error(error, field) from None
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
            if within is not None and identity_of(os.fstat(fd)) != within:
                parent = path.rsplit("/", 1)[0]
                raise IdentityChanged(field=parent, rule=f"is no longer the directory {within}")
            yield fd, parts[-1]

    def _mkdir(self, parent: int, name: str, field: str, mode: int) -> None:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            raise AlreadyExists(field=field, rule="already exists") from None
        except OSError as error:
            raise port_error(error, field) from None
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent)
        except OSError as error:
            raise port_error(error, field) from None
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.fsync(parent)

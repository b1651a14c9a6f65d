"""``MemoryStore``: a ``Store`` over ``MemoryFilesystem``."""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Callable

from slurm_image.adapters.memory.workspace import MemoryFilesystem, MemoryNode, MemoryWorkspace
from slurm_image.domain import paths
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.store_layout import RECORD_MODE
from slurm_image.ports.hasher import FileDigest
from slurm_image.ports.store import ChangedWhileRead, ChangeStamp, EntryKind
from slurm_image.ports.workspace import (
    AccessDenied,
    AlreadyExists,
    NotFound,
    NotRegularFile,
    TooLarge,
    UnsafePath,
    VerifiedRead,
    WorkspaceError,
)


class MemoryStore(MemoryWorkspace):
    """A ``Store`` (see ``ports.store``) over a ``MemoryFilesystem``, with the local adapter's
    observable rules. ``during_read``, when set, is called with the path in the middle of every
    ``read_stable`` and ``digest``: tests change the file there, as a writer racing the reader.
    """

    def __init__(
        self,
        root: str,
        filesystem: MemoryFilesystem,
        *,
        uid: int = 1000,
        groups: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(root, filesystem, uid=uid)
        self.during_read: Callable[[str], None] | None = None
        self.groups = groups
        """The groups files and directories may be given (``install``, ``publish_file``,
        ``ensure_directory``)."""

    def _below_root(self, path: str) -> bool:
        return path.startswith(self.root.rstrip("/") + "/")

    def _entry(self, path: str) -> MemoryNode | None:
        if self._below_root(path):
            try:
                parent, name = self._parent(path, None)
            except NotFound:
                return None
            return parent.entries.get(name)
        return self.filesystem.lookup(path)

    def _regular(self, path: str) -> MemoryNode:
        node = self._entry(path)
        if node is None:
            raise NotFound(field=path, rule="does not exist")
        if node.kind != "file":
            raise NotRegularFile(field=path, rule=f"is {node.describe()}, not a regular file")
        return node

    def _read_once(self, path: str) -> tuple[MemoryNode, bytes]:
        node = self._regular(path)
        data = bytes(node.data)
        if self.during_read is not None:
            self.during_read(path)
        if self._entry(path) is not node or bytes(node.data) != data:
            raise ChangedWhileRead(field=path, rule="changed while it was read")
        return node, data

    def read_stable(self, path: str, *, max_bytes: int) -> VerifiedRead:
        with self.filesystem.lock:
            node = self._regular(path)
            if node.uid != self._uid:
                raise UnsafePath(field=path, rule=f"is owned by uid {node.uid}, not {self._uid}")
            if len(node.data) > max_bytes:
                raise TooLarge(field=path, rule=f"holds more than {max_bytes} bytes")
        node, data = self._read_once(path)
        return VerifiedRead(data=data, identity=node.identity, mode=node.mode)

    def digest(self, path: str) -> FileDigest:
        node, data = self._read_once(path)
        return FileDigest(
            sha256=hashlib.sha256(data).hexdigest(),
            size=len(data),
            identity=node.identity,
            mtime_ns=0,
            ctime_ns=0,
        )

    def entry_kind(self, path: str) -> EntryKind | None:
        with self.filesystem.lock:
            node = self._entry(path)
            if node is None:
                return None
            return node.kind

    def file_sizes(self, directory: str) -> dict[str, int]:
        with self.filesystem.lock:
            node = self._directory(self._components(directory))
            if not self._may(node, 4):
                raise AccessDenied(field=directory, rule="Permission denied")
            return {
                name: len(child.data)
                for name, child in sorted(node.entries.items())
                if child.kind == "file"
            }

    def ensure_directory(self, path: str, *, mode: int, group: str | None = None) -> FileIdentity:
        with self.filesystem.lock:
            self._check_group(group, path)
            node = self._root()
            walked = self.root.rstrip("/")
            for part in self._components(path):
                walked = f"{walked}/{part}"
                child = node.entries.get(part)
                if child is None:
                    child = self._mkdir(node, part, walked, mode)
                if child.kind != "directory":
                    self._unsafe_top(walked, f"is {child.describe()}, not a directory")
                problem = paths.own_directory_problem(child.mode, child.uid, self._uid)
                if problem is not None:
                    self._unsafe_top(walked, problem)
                child.mode |= mode & 0o555
                node = child
            if group is not None:
                node.group = group
                node.mode = mode
            return node.identity

    def set_link(self, path: str, target: str) -> None:
        with self.filesystem.lock:
            parent, name = self._parent(path, None)
            existing = parent.entries.get(name)
            if existing is not None and existing.kind == "directory":
                raise WorkspaceError(field=path, rule="is a directory")
            self._writable(parent, path)
            node = self.filesystem.new_node("symlink", 0o777, self._uid)
            node.target = target
            parent.entries[name] = node

    def read_link(self, path: str) -> str | None:
        with self.filesystem.lock:
            parent, name = self._parent(path, None)
            node = parent.entries.get(name)
            if node is None:
                return None
            if node.kind != "symlink":
                raise NotRegularFile(field=path, rule="is not a symlink")
            return node.target

    def install(
        self,
        source: str,
        destination: str,
        *,
        expected: FileDigest,
        mode: int,
        group: str | None = None,
    ) -> FileIdentity:
        with self.filesystem.lock:
            source_dir, source_name = self._parent(source, None)
            node = self._regular(source)
            if node.identity != expected.identity or len(node.data) != expected.size:
                raise ChangedWhileRead(field=source, rule="is not the file that was verified")
            if hashlib.sha256(node.data).hexdigest() != expected.sha256:
                raise ChangedWhileRead(field=source, rule="is not the file that was verified")
            target_dir, target_name = self._parent(destination, None)
            if target_name in target_dir.entries:
                raise AlreadyExists(field=destination, rule="already exists")
            self._writable(target_dir, destination)
            self._writable(source_dir, source)
            self._check_group(group, destination)
            node.mode = mode
            node.group = group
            target_dir.entries[target_name] = node
            del source_dir.entries[source_name]
            return node.identity

    def set_mode(self, path: str, *, mode: int) -> None:
        with self.filesystem.lock:
            node = self._regular(path)
            if node.uid != self._uid:
                raise WorkspaceError(field=path, rule="is not the store owner's file")
            node.mode = mode

    def publish_file(
        self, path: str, data: bytes, *, mode: int, staging: str, group: str | None = None
    ) -> None:
        with self.filesystem.lock:
            self._check_group(group, path)
            parent, name = self._parent(path, None)
            self._directory(self._components(staging))
            existing = parent.entries.get(name)
            if existing is not None and existing.kind == "directory":
                raise WorkspaceError(field=path, rule="is a directory")
            self._writable(parent, path)
            node = self.filesystem.new_node("file", mode, self._uid)
            node.data[:] = data
            node.group = group
            parent.entries[name] = node

    def _check_group(self, group: str | None, field: str) -> None:
        if group is not None and group not in self.groups:
            raise WorkspaceError(field=field, rule=f"group {group} does not exist here")

    def bump(self, path: str) -> None:
        with self.filesystem.lock:
            self.appending(path, mode=RECORD_MODE).data.append(ord("."))

    def stamp(self, path: str) -> ChangeStamp | None:
        with self.filesystem.lock:
            try:
                node = self._entry(path)
            except WorkspaceError:
                return None
            if node is None or node.kind != "file":
                return None
            return ChangeStamp(node.identity.device, node.inode, len(node.data))

    def appending(self, path: str, *, mode: int) -> MemoryNode:
        """The regular file ``path`` to append to, as ``LocalStore.open_appending`` opens it:
        made with exactly ``mode`` when missing; an existing one must be a regular file of the
        user's own that group and others cannot write, never a symlink."""
        with self.filesystem.lock:
            parent, name = self._parent(path, None)
            node = parent.entries.get(name)
            if node is None:
                self._writable(parent, path)
                node = parent.entries[name] = self.filesystem.new_node("file", mode, self._uid)
                return node
            if node.kind != "file":
                raise NotRegularFile(field=path, rule=f"is {node.describe()}, not a regular file")
            problem = paths.own_file_problem(stat.S_IFREG | node.mode, node.uid, self._uid)
            if problem is not None:
                raise UnsafePath(field=path, rule=problem)
            if self.filesystem.read_only:
                raise AccessDenied(field=path, rule="Read-only file system")
            if not self._may(node, 2):
                raise AccessDenied(field=path, rule="Permission denied")
            return node

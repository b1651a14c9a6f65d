"""``MemoryWorkspace``: a ``Workspace`` over ``MemoryFilesystem``, a POSIX-like tree in memory."""

from __future__ import annotations

import hashlib
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NoReturn

from slurm_image.domain import layer_cache, paths
from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.file_kinds import WORDS
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

NOBODY = 65534  # the owner of a file the user does not own

_MEMORY_DEVICE = 0x6D656D
_NodeKind = Literal["directory", "file", "symlink", "fifo"]


@dataclass
class MemoryNode:
    """One entry of the in-memory filesystem."""

    kind: _NodeKind
    mode: int
    uid: int
    inode: int
    data: bytearray = field(default_factory=bytearray)
    entries: dict[str, MemoryNode] = field(default_factory=dict)
    target: str = ""
    group: str | None = None
    """The group set by ``install`` or ``publish_file`` (None: the owner's own)."""
    used_at: float = 0.0
    """The later of its last read and change, in seconds since the epoch (set by tests)."""

    @property
    def identity(self) -> FileIdentity:
        return FileIdentity(device=_MEMORY_DEVICE, inode=self.inode)

    def describe(self) -> str:
        return WORDS[self.kind]


class MemoryFilesystem:
    """A POSIX-like tree in memory: directories, regular files, symlinks and FIFOs, each with a
    mode, an owner and an inode.

    Its methods act like root at a shell (no permission or symlink checks beyond the path's own
    directories): they set up and tamper with the tree that ``MemoryWorkspace`` guards.
    ``read_only`` makes every change through a workspace fail, like a read-only mount.
    """

    def __init__(self, *, read_only: bool = False) -> None:
        self.read_only = read_only
        self._next_inode = 2
        self.top = MemoryNode("directory", 0o755, 0, 1)
        self.lock = threading.RLock()

    def new_node(self, kind: _NodeKind, mode: int, uid: int) -> MemoryNode:
        with self.lock:
            inode = self._next_inode
            self._next_inode += 1
        return MemoryNode(kind, mode, uid, inode)

    @staticmethod
    def split(path: str) -> list[str]:
        if not path.startswith("/"):
            raise ValueError(f"not an absolute path: {path!r}")
        return [part for part in path.split("/") if part]

    def parent_of(self, path: str) -> tuple[MemoryNode, str]:
        parts = self.split(path)
        node = self.top
        for part in parts[:-1]:
            child = node.entries.get(part)
            if child is None or child.kind != "directory":
                raise FileNotFoundError(path)
            node = child
        return node, parts[-1]

    def lookup(self, path: str) -> MemoryNode | None:
        """The entry at ``path`` (a symlink itself, not its target), or None."""
        if not self.split(path):
            return self.top
        try:
            parent, name = self.parent_of(path)
        except FileNotFoundError:
            return None
        return parent.entries.get(name)

    def _add(self, path: str, node: MemoryNode) -> MemoryNode:
        with self.lock:
            parent, name = self.parent_of(path)
            if name in parent.entries:
                raise FileExistsError(path)
            parent.entries[name] = node
            return node

    # -- acting on the tree like root at a shell ------------------------------------------

    def makedirs(self, path: str, *, mode: int = 0o755, uid: int = 0) -> None:
        node = self.top
        for part in self.split(path):
            child = node.entries.get(part)
            if child is None:
                child = node.entries[part] = self.new_node("directory", mode, uid)
            if child.kind != "directory":
                raise NotADirectoryError(path)
            node = child

    def mkdir(self, path: str, *, mode: int = 0o700, uid: int = 0) -> None:
        self._add(path, self.new_node("directory", mode, uid))

    def write(self, path: str, data: bytes, *, mode: int = 0o600, uid: int = 0) -> None:
        """Create a regular file, or overwrite the contents of one in place (same inode)."""
        node = self.lookup(path)
        if node is None:
            node = self._add(path, self.new_node("file", mode, uid))
        if node.kind != "file":
            raise IsADirectoryError(path)
        node.data[:] = data

    def append(self, path: str, data: bytes) -> None:
        node = self.lookup(path)
        if node is None or node.kind != "file":
            raise FileNotFoundError(path)
        node.data += data

    def read(self, path: str) -> bytes:
        node = self.lookup(path)
        if node is None or node.kind != "file":
            raise FileNotFoundError(path)
        return bytes(node.data)

    def symlink(self, target: str, path: str, *, uid: int = 0) -> None:
        node = self.new_node("symlink", 0o777, uid)
        node.target = target
        self._add(path, node)

    def mkfifo(self, path: str, *, mode: int = 0o600, uid: int = 0) -> None:
        self._add(path, self.new_node("fifo", mode, uid))

    def chown(self, path: str, uid: int) -> None:
        node = self.lookup(path)
        if node is None:
            raise FileNotFoundError(path)
        node.uid = uid

    def chmod(self, path: str, mode: int) -> None:
        node = self.lookup(path)
        if node is None:
            raise FileNotFoundError(path)
        node.mode = mode

    def rename(self, source: str, destination: str) -> None:
        with self.lock:
            old_parent, old_name = self.parent_of(source)
            new_parent, new_name = self.parent_of(destination)
            node = old_parent.entries.pop(old_name)
            new_parent.entries[new_name] = node

    def remove(self, path: str) -> None:
        with self.lock:
            parent, name = self.parent_of(path)
            del parent.entries[name]

    def copy(self, source: str, destination: str) -> None:
        """A deep copy under new inodes, as ``cp -a`` makes."""
        node = self.lookup(source)
        if node is None:
            raise FileNotFoundError(source)
        self._add(destination, self._clone(node))

    def _clone(self, node: MemoryNode) -> MemoryNode:
        twin = self.new_node(node.kind, node.mode, node.uid)
        twin.data = bytearray(node.data)
        twin.target = node.target
        twin.entries = {name: self._clone(child) for name, child in node.entries.items()}
        return twin


class MemoryWorkspace:
    """A ``Workspace`` over a ``MemoryFilesystem``, with the local adapter's observable rules:
    the same layout walk (no symlinks, our own directories only), exclusive creation, exact
    modes, identities, size bounds, FIFO and symlink refusal, permissions for a non-root ``uid``
    and a read-only filesystem. ``uid`` is the user the workspace acts as.
    """

    def __init__(self, root: str, filesystem: MemoryFilesystem, *, uid: int = 1000) -> None:
        self.root = root
        self.filesystem = filesystem
        self._uid = uid

    # -- walking -------------------------------------------------------------------------

    def _components(self, path: str) -> list[str]:
        prefix = self.root.rstrip("/") + "/"
        parts = path[len(prefix) :].split("/") if path.startswith(prefix) else []
        if not parts or any(part in ("", ".", "..") for part in parts):
            raise UnsafePath(
                field=path, rule=f"must lie strictly below the workspace root {self.root}"
            )
        return parts

    def _may(self, node: MemoryNode, bit: int) -> bool:
        """``bit``: 4 read, 2 write, 1 search; owner bits for the owner, else other bits."""
        if self._uid == 0:
            return True
        shift = 6 if node.uid == self._uid else 0
        return bool(node.mode & (bit << shift))

    def _root(self) -> MemoryNode:
        node = self.filesystem.lookup(self.root)
        for _ in range(40):
            if node is None or node.kind != "symlink":
                break
            node = self.filesystem.lookup(node.target)
        if node is None:
            raise NotFound(field=self.root, rule="does not exist")
        if node.kind != "directory":
            raise InvalidPath(field="workspace_root", rule="must be a directory", value=self.root)
        for directory in paths.ancestors(self.root)[:-1]:
            found = self.filesystem.lookup(directory)
            if found is None or found.kind != "directory":
                continue
            problem = paths.shared_directory_problem(found.mode, found.uid, self._uid)
            if problem is not None:
                raise InvalidPath(
                    field="workspace_root",
                    rule=f"{directory} {problem}; {paths.WORKSPACE_SETUP_HINT}",
                    value=self.root,
                )
        problem = paths.workspace_root_problem(node.mode, node.uid, self._uid)
        if problem is not None:
            raise InvalidPath(
                field="workspace_root",
                rule=f"{self.root} {problem}; {paths.OWN_ROOT_HINT}",
                value=self.root,
            )
        return node

    def _resolved(self, path: str) -> MemoryNode | None:
        node = self.filesystem.lookup(path)
        for _ in range(40):
            if node is None or node.kind != "symlink":
                return node
            node = self.filesystem.lookup(node.target)
        return None

    def image_problem(self, path: str) -> str | None:
        with self.filesystem.lock:
            for directory in paths.ancestors(path)[:-1]:
                found = self._resolved(directory)
                if found is None:
                    return f"{path} does not exist"
                if found.kind != "directory":
                    return f"{directory} is not a directory"
                problem = paths.shared_directory_problem(found.mode, found.uid, self._uid)
                if problem is not None:
                    return f"{directory} {problem}"
            node = self.filesystem.lookup(path)
            if node is None:
                return f"{path} does not exist"
            if node.kind != "file":
                return f"{path} is {node.describe()}, not a regular file"
            problem = paths.unchangeable_file_problem(stat.S_IFREG | node.mode, node.uid, self._uid)
            return None if problem is None else f"{path} {problem}"

    def _unsafe_top(self, walked: str, reason: str) -> NoReturn:
        """The root's own entry (``images/``) that is not the user's: the workspace is not set
        up for this user (``InvalidPath``, as the local adapter raises)."""
        if walked.rsplit("/", 1)[0] == self.root.rstrip("/"):
            raise InvalidPath(
                field="workspace_root",
                rule=f"{walked} {reason}; {paths.STORE_DIRECTORY_HINT}",
                value=walked,
            )
        raise UnsafePath(field=walked, rule=reason)

    def _directory(self, parts: Sequence[str], *, create: bool = False) -> MemoryNode:
        node = self._root()
        walked = self.root.rstrip("/")
        for part in parts:
            walked = f"{walked}/{part}"
            if not self._may(node, 1):
                raise AccessDenied(field=walked, rule="Permission denied")
            child = node.entries.get(part)
            if child is None:
                if not create:
                    raise NotFound(field=walked, rule="does not exist")
                child = self._mkdir(node, part, walked, 0o700)
            if child.kind != "directory":
                self._unsafe_top(walked, f"is {child.describe()}, not a directory")
            problem = paths.own_directory_problem(child.mode, child.uid, self._uid)
            if problem is not None:
                self._unsafe_top(walked, problem)
            node = child
        return node

    def _parent(self, path: str, within: FileIdentity | None) -> tuple[MemoryNode, str]:
        parts = self._components(path)
        parent = self._directory(parts[:-1])
        if within is not None and parent.identity != within:
            raise IdentityChanged(
                field=path.rsplit("/", 1)[0], rule=f"is no longer the directory {within}"
            )
        if not self._may(parent, 1):
            raise AccessDenied(field=path, rule="Permission denied")
        return parent, parts[-1]

    def _writable(self, parent: MemoryNode, field: str) -> None:
        if self.filesystem.read_only:
            raise AccessDenied(field=field, rule="Read-only file system")
        if not self._may(parent, 2):
            raise AccessDenied(field=field, rule="Permission denied")

    def _mkdir(self, parent: MemoryNode, name: str, field: str, mode: int) -> MemoryNode:
        with self.filesystem.lock:
            if name in parent.entries:
                raise AlreadyExists(field=field, rule="already exists")
            self._writable(parent, field)
            node = parent.entries[name] = self.filesystem.new_node("directory", mode, self._uid)
            return node

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
        with self.filesystem.lock:
            parent = self._directory(parts[:-1], create=parents)
            if within is not None and parent.identity != within:
                parent_path = path.rsplit("/", 1)[0]
                raise IdentityChanged(
                    field=parent_path, rule=f"is no longer the directory {within}"
                )
            return self._mkdir(parent, parts[-1], path, mode).identity

    def _create(self, parent: MemoryNode, name: str, field: str, data: bytes, mode: int) -> None:
        if name in parent.entries:
            raise AlreadyExists(field=field, rule="already exists")
        self._writable(parent, field)
        node = self.filesystem.new_node("file", mode, self._uid)
        node.data[:] = data
        parent.entries[name] = node

    def _written(self, node: MemoryNode) -> WrittenFile:
        return WrittenFile(
            identity=node.identity,
            size=len(node.data),
            mode=node.mode,
            sha256=hashlib.sha256(node.data).hexdigest(),
        )

    def write_new(
        self, path: str, data: bytes, *, mode: int, within: FileIdentity | None = None
    ) -> WrittenFile:
        with self.filesystem.lock:
            parent, name = self._parent(path, within)
            self._create(parent, name, path, data, mode)
            return self._written(parent.entries[name])

    def replace_file(
        self, path: str, data: bytes, *, mode: int = 0o600, within: FileIdentity | None = None
    ) -> WrittenFile:
        with self.filesystem.lock:
            parent, name = self._parent(path, within)
            existing = parent.entries.get(name)
            if existing is not None and existing.kind == "directory":
                raise WorkspaceError(field=path, rule="Is a directory")
            self._writable(parent, path)
            node = self.filesystem.new_node("file", mode, self._uid)
            node.data[:] = data
            parent.entries[name] = node
            return self._written(node)

    def read_verified(
        self, path: str, *, max_bytes: int, within: FileIdentity | None = None
    ) -> VerifiedRead:
        with self.filesystem.lock:
            parent, name = self._parent(path, within)
            node = parent.entries.get(name)
            if node is None:
                raise NotFound(field=path, rule="does not exist")
            if node.kind != "file":
                raise NotRegularFile(field=path, rule=f"is {node.describe()}, not a regular file")
            if node.uid != self._uid:
                raise UnsafePath(field=path, rule=f"is owned by uid {node.uid}, not {self._uid}")
            if not self._may(node, 4):
                raise AccessDenied(field=path, rule="Permission denied")
            if len(node.data) > max_bytes:
                raise TooLarge(field=path, rule=f"holds more than {max_bytes} bytes")
            return VerifiedRead(data=bytes(node.data), identity=node.identity, mode=node.mode)

    def directory_identity(self, path: str) -> FileIdentity:
        with self.filesystem.lock:
            return self._directory(self._components(path)).identity

    def exists(self, path: str) -> bool:
        with self.filesystem.lock:
            try:
                parent, name = self._parent(path, None)
            except NotFound:
                return False
            return name in parent.entries

    def list_directory(self, path: str) -> Sequence[str]:
        with self.filesystem.lock:
            node = self._directory(self._components(path))
            if not self._may(node, 4):
                raise AccessDenied(field=path, rule="Permission denied")
            return sorted(node.entries)

    def remove_file(self, path: str, *, within: FileIdentity | None = None) -> None:
        with self.filesystem.lock:
            parent, name = self._parent(path, within)
            node = parent.entries.get(name)
            if node is None:
                raise NotFound(field=path, rule="does not exist")
            if node.kind == "directory":
                raise WorkspaceError(field=path, rule="is a directory")
            self._writable(parent, path)
            del parent.entries[name]

    # -- the layer cache, which may lie outside the root -------------------------------------

    def cache_problem(self, directory: str) -> str | None:
        with self.filesystem.lock:
            real = self._real_path(directory)
            for chain in (paths.ancestors(directory)[:-1], paths.ancestors(real)[:-1]):
                for path in chain:
                    link = self.filesystem.lookup(path)
                    if link is None:
                        return None
                    if link.kind == "symlink" and link.uid not in (self._uid, 0):
                        return (
                            f"{path} is a symlink owned by uid {link.uid}, neither by uid"
                            f" {self._uid} nor by root"
                        )
                    found = self._resolved(path)
                    if found is None:
                        return None
                    if found.kind != "directory":
                        return f"{path} is {found.describe()}, not a directory"
                    problem = paths.shared_directory_problem(found.mode, found.uid, self._uid)
                    if problem is not None:
                        return f"{path} {problem}"
            for path in dict.fromkeys((directory, real)):
                node = self.filesystem.lookup(path)
                if node is None:
                    return None
                if node.kind != "directory":
                    return f"{path} is {node.describe()}, not a directory"
                problem = layer_cache.directory_problem(node.mode, node.uid, self._uid)
                if problem is not None:
                    return f"{path} {problem}"
            return None

    def _real_path(self, path: str) -> str:
        """``path`` with every symlink on the way resolved (as ``realpath``)."""
        resolved = "/"
        pending = self.filesystem.split(path)
        for _ in range(400):
            if not pending:
                return resolved
            part = pending.pop(0)
            candidate = resolved.rstrip("/") + "/" + part
            node = self.filesystem.lookup(candidate)
            if node is not None and node.kind == "symlink":
                target = node.target
                pending = self.filesystem.split(target) + pending
                if target.startswith("/"):
                    resolved = "/"
                continue
            resolved = candidate
        return resolved

    def _cache(self, directory: str) -> MemoryNode:
        problem = self.cache_problem(directory)
        if problem is not None:
            raise UnsafePath(field=directory, rule=problem)
        node = self.filesystem.lookup(directory)
        if node is None:
            raise NotFound(field=directory, rule="does not exist")
        return node

    def cache_entries(self, directory: str) -> Sequence[CacheEntry]:
        with self.filesystem.lock:
            node = self._cache(directory)
            found = []
            for name in sorted(node.entries):
                child = node.entries[name]
                found.append(CacheEntry(name, child.kind == "file", len(child.data), child.used_at))
                if child.kind == "directory" and layer_cache.TOKEN_DIRECTORY.fullmatch(name):
                    found.extend(
                        CacheEntry(
                            f"{name}/{inner}", token.kind == "file", len(token.data), token.used_at
                        )
                        for inner, token in sorted(child.entries.items())
                    )
            return found

    def remove_cache_file(self, directory: str, name: str) -> None:
        field = f"{directory}/{name}"
        parts = layer_cache.entry_parts(name)
        if parts is None:
            raise UnsafePath(field=field, rule="is no entry of the layer cache")
        with self.filesystem.lock:
            parent = self._cache(directory)
            if len(parts) == 2:
                inner = parent.entries.get(parts[0])
                if inner is None:
                    raise NotFound(field=field, rule="does not exist")
                if inner.kind != "directory":
                    raise UnsafePath(field=field, rule=f"{parts[0]} is {inner.describe()}")
                parent = inner
            node = parent.entries.get(parts[-1])
            if node is None:
                raise NotFound(field=field, rule="does not exist")
            if node.kind != "file":
                raise NotRegularFile(field=field, rule=f"is {node.describe()}, not a regular file")
            self._writable(parent, field)
            del parent.entries[parts[-1]]

    def remove_tree(self, path: str, *, expected: FileIdentity, last: Sequence[str] = ()) -> None:
        with self.filesystem.lock:
            parts = self._components(path)
            parent = self._directory(parts[:-1])
            node = self._directory(parts)
            if node.identity != expected:
                raise IdentityChanged(field=path, rule=f"is no longer the directory {expected}")
            self._writable(parent, path)
            kept = {name: node.entries.pop(name) for name in last if name in node.entries}
            try:
                self._empty(node, path)
            finally:
                node.entries.update(kept)
            for name in last:
                entry = node.entries.get(name)
                if entry is not None and entry.kind != "directory":
                    self._removing(f"{path}/{name}")
                    del node.entries[name]
            self._empty(node, path)
            self._removing(path)
            del parent.entries[parts[-1]]

    before_removal: Callable[[str], None] | None = None
    """Called with each path just before it is removed (a test seam: raise to interrupt)."""

    def _removing(self, path: str | Callable[[], str]) -> None:
        if self.before_removal is not None:
            self.before_removal(path if isinstance(path, str) else path())

    def _empty(self, top: MemoryNode, field: str) -> None:
        """Remove everything below ``top``, leaves first, without recursion: any depth."""
        trail: list[tuple[MemoryNode, str]] = [(top, field)]

        def below(*names: str) -> Callable[[], str]:
            return lambda: "/".join([name for _, name in trail] + list(names))

        while trail:
            node = trail[-1][0]
            if not node.entries:
                name = trail[-1][1]
                if len(trail) > 1:
                    self._removing(below())
                    del trail[-2][0].entries[name]
                trail.pop()
                continue
            name, child = node.entries.popitem()  # the last entry, in O(1) however wide
            node.entries[name] = child
            if child.kind == "directory" and child.entries:
                trail.append((child, name))
                continue
            self._removing(below(name))
            del node.entries[name]

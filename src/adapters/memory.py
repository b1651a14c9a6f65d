"""In-memory fakes of the ports, for behavioural tests and dry demos.

``MemoryWorkspace`` (over a ``MemoryFilesystem``) and ``FakeClock`` follow the FakeSubmitter.

``FakeSubmitter`` is a scheduler that accepts submissions and never runs them: tests drive each
job's state by hand and inject failures. It goes through the same retry and exactly-once rules
(``adapters.retry``) as the real submitters.
"""

from __future__ import annotations

import hashlib
import stat
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal, NoReturn

from slurm_image.adapters.retry import (
    RetryPolicy,
    TransientFailure,
    submit_spec_exactly_once,
    with_retries,
)
from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.job import JobSpec, JobState, JobStatus
from slurm_image.domain.partition import PartitionLimits
from slurm_image.ports.credentials import CredentialsFileError
from slurm_image.ports.filesystem import FilesystemError
from slurm_image.ports.hasher import FileDigest
from slurm_image.ports.lock import LockTimeout
from slurm_image.ports.store import ChangedWhileRead, EntryKind
from slurm_image.ports.submitter import SchedulerAuthError, SchedulerRejected, UnknownJob
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

NOBODY = 65534  # the owner of a file the user does not own
FailureKind = Literal["transient", "ambiguous", "permanent", "auth"]
"""What an injected failure does:

- ``transient``: the request never reached the scheduler (connection refused); retried.
- ``ambiguous``: the scheduler accepted the request, then the answer was lost (a dropped
  response); retried, and a submission is then found by its marker instead of repeated.
- ``permanent``: the scheduler refuses the request (``SchedulerRejected``); not retried.
- ``auth``: credentials refused (``SchedulerAuthError``); not retried.
"""

Operation = Literal["submit", "states", "cancel", "find_by_marker", "ping", "partition"]


@dataclass
class FakeJob:
    """One job the fake scheduler holds: the exact bytes and spec it was given, and its state."""

    job_id: str
    script: bytes
    spec: JobSpec
    state: JobState = JobState.PENDING
    reason: str | None = None
    exit_code: int | None = None

    def status(self) -> JobStatus:
        return JobStatus(
            job_id=self.job_id, state=self.state, reason=self.reason, exit_code=self.exit_code
        )


class FakeSubmitter:
    """An in-memory ``BatchSubmitter``.

    ``partitions`` (when given) is the set of partitions that exist: a spec naming another one is
    rejected, as Slurm does. ``max_cpus_per_task`` likewise bounds the CPUs a job may ask for.
    """

    name = "fake"

    def __init__(
        self,
        *,
        partitions: Collection[str] | None = None,
        max_cpus_per_task: int | None = None,
        first_job_id: int = 1,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self._partitions = frozenset(partitions) if partitions is not None else None
        self._max_cpus = max_cpus_per_task
        self._next_id = first_job_id
        self._retry = retry_policy if retry_policy is not None else RetryPolicy.immediate()
        self._jobs: dict[str, FakeJob] = {}
        self._failures: dict[Operation, list[FailureKind]] = {}
        self._lock = threading.RLock()
        self.calls: dict[Operation, int] = {
            "submit": 0,
            "states": 0,
            "cancel": 0,
            "find_by_marker": 0,
            "ping": 0,
            "partition": 0,
        }
        """Scheduler calls made per operation (attempts, retries included)."""
        self._limits: dict[str, PartitionLimits] = {}
        self.controller_up = True
        """False: the controller answers DOWN (``ping`` fails as unreachable)."""

    # -- test controls -------------------------------------------------------------------

    def fail_next(
        self, kind: FailureKind, *, operation: Operation = "submit", times: int = 1
    ) -> None:
        """Make the next ``times`` scheduler calls of ``operation`` fail as ``kind``."""
        with self._lock:
            self._failures.setdefault(operation, []).extend([kind] * times)

    @property
    def jobs(self) -> Mapping[str, FakeJob]:
        """Every job the scheduler holds, by id, in submission order."""
        with self._lock:
            return dict(self._jobs)

    def job(self, job_id: str) -> FakeJob:
        with self._lock:
            return self._jobs[job_id]

    def set_state(
        self,
        job_id: str,
        state: JobState,
        *,
        reason: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        """Move a job to ``state`` (any state, for tests). Raises ``KeyError`` for unknown ids."""
        with self._lock:
            job = self._jobs[job_id]
            job.state, job.reason, job.exit_code = state, reason, exit_code

    def start(self, job_id: str) -> None:
        self.set_state(job_id, JobState.RUNNING)

    def finish(self, job_id: str, exit_code: int = 0) -> None:
        """End a job: COMPLETED for exit code 0, FAILED (reason NonZeroExitCode) otherwise."""
        if exit_code == 0:
            self.set_state(job_id, JobState.COMPLETED, exit_code=0)
        else:
            self.set_state(job_id, JobState.FAILED, reason="NonZeroExitCode", exit_code=exit_code)

    def set_partition(self, limits: PartitionLimits) -> None:
        """Give a partition the limits ``partition`` reports (it then exists)."""
        with self._lock:
            self._limits[limits.name] = limits

    def forget(self, job_id: str) -> None:
        """Drop a job, as a scheduler purges old records: it becomes unknown."""
        with self._lock:
            del self._jobs[job_id]

    # -- the port ------------------------------------------------------------------------

    def submit(self, script: bytes, spec: JobSpec) -> str:
        return submit_spec_exactly_once(
            self._retry, spec, lambda: self._submit_once(bytes(script), spec), self._find_once
        )

    def states(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        return with_retries(self._retry, "states", lambda: self._states_once(job_ids))

    def cancel(self, job_id: str) -> None:
        with_retries(self._retry, f"cancel {job_id}", lambda: self._cancel_once(job_id))

    def find_by_marker(self, marker: str) -> str | None:
        return with_retries(self._retry, "find_by_marker", lambda: self._find_once(marker))

    def ping(self) -> str:
        return with_retries(self._retry, "ping", self._ping_once)

    def partition(self, name: str) -> PartitionLimits | None:
        return with_retries(self._retry, f"partition {name}", lambda: self._partition_once(name))

    # -- one scheduler call each ---------------------------------------------------------

    def _injected(self, operation: Operation) -> FailureKind | None:
        self.calls[operation] += 1
        pending = self._failures.get(operation)
        return pending.pop(0) if pending else None

    @staticmethod
    def _raise_unless_accepted(kind: FailureKind | None) -> None:
        if kind == "transient":
            raise TransientFailure("scheduler unreachable (injected)", ambiguous=False)
        if kind == "permanent":
            raise SchedulerRejected(field="submitter", rule="request refused (injected)")
        if kind == "auth":
            raise SchedulerAuthError(field="submitter", rule="credentials refused (injected)")

    def _submit_once(self, script: bytes, spec: JobSpec) -> str:
        with self._lock:
            kind = self._injected("submit")
            self._raise_unless_accepted(kind)
            if self._partitions is not None and spec.partition not in self._partitions:
                raise SchedulerRejected(
                    field="partition", rule=f"invalid partition name specified: {spec.partition!r}"
                )
            if self._max_cpus is not None and spec.cpus_per_task > self._max_cpus:
                raise SchedulerRejected(
                    field="cpus_per_task",
                    rule=f"more processors requested than permitted: {spec.cpus_per_task}",
                )
            job_id = str(self._next_id)
            self._next_id += 1
            self._jobs[job_id] = FakeJob(job_id=job_id, script=script, spec=spec)
            if kind == "ambiguous":
                raise TransientFailure("response lost after submission (injected)", ambiguous=True)
            return job_id

    def _states_once(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        with self._lock:
            kind = self._injected("states")
            self._raise_unless_accepted(kind)
            found = {i: self._jobs[i].status() for i in dict.fromkeys(job_ids) if i in self._jobs}
            if kind == "ambiguous":
                raise TransientFailure("response lost (injected)", ambiguous=True)
            return found

    def _cancel_once(self, job_id: str) -> None:
        with self._lock:
            kind = self._injected("cancel")
            self._raise_unless_accepted(kind)
            job = self._jobs.get(job_id)
            if job is None:
                raise UnknownJob(field="job_id", rule=f"invalid job id specified: {job_id}")
            if not job.state.is_terminal:
                job.state, job.reason = JobState.CANCELLED, None
            if kind == "ambiguous":
                raise TransientFailure("response lost after cancel (injected)", ambiguous=True)

    def _ping_once(self) -> str:
        with self._lock:
            self._raise_unless_accepted(self._injected("ping"))
            if not self.controller_up:
                raise TransientFailure("fake controller is DOWN", "controller", ambiguous=False)
            return "fake controller UP"

    def _partition_once(self, name: str) -> PartitionLimits | None:
        with self._lock:
            self._raise_unless_accepted(self._injected("partition"))
            if not self.controller_up:
                raise TransientFailure("fake controller is DOWN", "controller", ambiguous=False)
            if name in self._limits:
                return self._limits[name]
            if self._partitions is not None and name not in self._partitions:
                return None
            return PartitionLimits(name=name, state="UP", max_cpus_per_node=self._max_cpus)

    def _find_once(self, marker: str) -> str | None:
        with self._lock:
            kind = self._injected("find_by_marker")
            self._raise_unless_accepted(kind)
            if kind == "ambiguous":
                raise TransientFailure("response lost (injected)", ambiguous=True)
            for job in self._jobs.values():
                if job.spec.comment == marker:
                    return job.job_id
            return None


# -- the in-memory filesystem and Workspace ------------------------------------------------

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

    @property
    def identity(self) -> FileIdentity:
        return FileIdentity(device=_MEMORY_DEVICE, inode=self.inode)

    def describe(self) -> str:
        return {
            "directory": "a directory",
            "file": "a regular file",
            "symlink": "a symlink",
            "fifo": "a FIFO",
        }[self.kind]


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


# -- the settable clock --------------------------------------------------------------------


class FakeClock:
    """A ``Clock`` that stands still until it is set or advanced. Always aware UTC."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start if start is not None else datetime(2024, 1, 1, tzinfo=UTC)
        if self._now.utcoffset() is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = self._now.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def set(self, moment: datetime) -> None:
        if moment.utcoffset() is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = moment.astimezone(UTC)

    def advance(self, delta: timedelta) -> None:
        if delta < timedelta(0):
            raise ValueError("time does not run backwards")
        self._now += delta


class FakeFilesystems:
    """A ``Filesystems`` that names every path's filesystem ``type_name`` (None: it fails)."""

    def __init__(self, type_name: str | None = "memory") -> None:
        self.name = type_name

    def type_name(self, path: str) -> str:
        if self.name is None:
            raise FilesystemError(
                field="workspace_root", rule=f"cannot describe the filesystem of {path} (injected)"
            )
        return self.name


# -- the store and its locks ----------------------------------------------------------------


class MemoryStore(MemoryWorkspace):
    """A ``Store`` (see ``ports.store``) over a ``MemoryFilesystem``, with the local adapter's
    observable rules. ``during_read``, when set, is called with the path in the middle of every
    ``read_stable`` and ``digest``: tests change the file there, as a writer racing the reader.
    """

    def __init__(self, root: str, filesystem: MemoryFilesystem, *, uid: int = 1000) -> None:
        super().__init__(root, filesystem, uid=uid)
        self.during_read: Callable[[str], None] | None = None

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

    def ensure_directory(self, path: str, *, mode: int) -> FileIdentity:
        with self.filesystem.lock:
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
            return node.identity

    def install(
        self, source: str, destination: str, *, expected: FileDigest, mode: int
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
            node.mode = mode
            target_dir.entries[target_name] = node
            del source_dir.entries[source_name]
            return node.identity

    def publish_file(self, path: str, data: bytes, *, mode: int, staging: str) -> None:
        with self.filesystem.lock:
            parent, name = self._parent(path, None)
            self._directory(self._components(staging))
            existing = parent.entries.get(name)
            if existing is not None and existing.kind == "directory":
                raise WorkspaceError(field=path, rule="is a directory")
            self._writable(parent, path)
            node = self.filesystem.new_node("file", mode, self._uid)
            node.data[:] = data
            parent.entries[name] = node


class MemoryLocks:
    """A ``Locks`` (see ``ports.lock``) for threads of one process."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._writers: set[str] = set()
        self._readers: dict[str, int] = {}

    def _wait(self, name: str, free: Callable[[], bool], timeout_s: float) -> None:
        if not self._condition.wait_for(free, timeout=timeout_s):
            raise LockTimeout(
                field=f"lock {name}",
                rule=f"held by another process for more than {timeout_s:g} s;"
                " retry when it has finished",
            )

    @contextmanager
    def exclusive(self, name: str, *, timeout_s: float) -> Iterator[None]:
        with self._condition:
            self._wait(
                name,
                lambda: name not in self._writers and not self._readers.get(name),
                timeout_s,
            )
            self._writers.add(name)
        try:
            yield
        finally:
            with self._condition:
                self._writers.discard(name)
                self._condition.notify_all()

    @contextmanager
    def shared(self, name: str, *, timeout_s: float) -> Iterator[None]:
        with self._condition:
            self._wait(name, lambda: name not in self._writers, timeout_s)
            self._readers[name] = self._readers.get(name, 0) + 1
        try:
            yield
        finally:
            with self._condition:
                self._readers[name] -= 1
                self._condition.notify_all()


@dataclass
class MemoryCredentialsFile:
    """In-memory credentials files: path -> (bytes, mode, owned by the user)."""

    files: dict[str, tuple[bytes, int, bool]] = field(default_factory=dict)
    home: str = "/home/user"
    uid: int = 1000

    def read_credentials_file(self, path: str, *, max_bytes: int) -> bytes:
        expanded = self.home + path[1:] if path.startswith("~/") else path
        if expanded not in self.files:
            raise CredentialsFileError(
                field="enroot.credentials_file", rule=f"no file at {expanded}"
            )
        data, mode, owned = self.files[expanded]
        problem = paths.secret_file_problem(
            stat.S_IFREG | mode, self.uid if owned else NOBODY, self.uid
        )
        if problem is not None:
            raise CredentialsFileError(
                field="enroot.credentials_file", rule=f"{expanded} {problem}"
            )
        if len(data) > max_bytes:
            raise CredentialsFileError(
                field="enroot.credentials_file", rule=f"{expanded} is larger than {max_bytes} bytes"
            )
        return data

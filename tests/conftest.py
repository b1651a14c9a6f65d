"""Shared fixtures.

- The local Slurm cluster started by ``scripts/local-slurm up``: tests that need it use the
  ``local_slurm`` fixture (and the ``slurm`` marker). Without a running cluster they SKIP
  locally, and FAIL when ``CI=true``: CI must never silently skip them.
- A workspace of each kind, with a harness that tampers with it as root would:
  ``workspace_harness`` is parametrized over every Workspace adapter; a new adapter joins by
  adding its name to ``WORKSPACE_KINDS`` and a harness class below.
- Reproducible hypothesis profiles: derandomized under ``CI=true``.
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from clusters import Cluster, cluster
from parallel import check_cluster_ids, clusters_first, make_scheduler
from slurm_image.adapters.local_workspace import LocalWorkspace
from slurm_image.adapters.memory import MemoryFilesystem, MemoryWorkspace
from slurm_image.domain.profile import ProfileSelection, SiteProfile, parse_profile
from slurm_image.domain.request import Request, make_request
from slurm_image.domain.runtime import RuntimeFiles
from slurm_image.ports.workspace import Workspace, WorkspaceError
from suites import add_suite_option, select_suite
from support import unavailable

# CI runs derandomized so a failure reproduces from the log alone; locally examples vary.
settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    add_suite_option(parser)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    check_cluster_ids(items)
    select_suite(config, items)
    clusters_first(items)


if importlib.util.find_spec("xdist") is not None:

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        return make_scheduler(config, log)


@pytest.fixture(autouse=True)
def product_logger_as_found() -> Iterator[None]:
    """The command line run in-process configures the product's logger (its own handler, a
    level, no propagation); put it back, so that a later test's ``caplog`` still hears it."""
    logger = logging.getLogger("slurm_image")
    found = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = found


@pytest.fixture(scope="session")
def local_slurm() -> Cluster:
    """The Slurm 22.05 cluster (the integration suite runs every cluster: its conftest)."""
    return cluster("22.05")


# -- workspaces ----------------------------------------------------------------------------

WORKSPACE_KINDS = ["local", "memory"]
FOREIGN_UID = 4242
DIGEST = "a" * 64


class LocalHarness:
    """Acts on a real directory tree under /tmp as root at a shell."""

    kind = "local"

    def __init__(self, base: Path) -> None:
        self.root = str(base / "ws")
        Path(self.root).mkdir(mode=0o755)
        self.uid = os.geteuid()
        self.workspace: Workspace = LocalWorkspace(self.root)

    def with_uid(self, uid: int) -> Workspace:
        return LocalWorkspace(self.root, uid=uid)

    def mkdir(self, path: str, mode: int = 0o700) -> None:
        Path(path).mkdir(mode=mode)
        os.chmod(path, mode)

    def makedirs(self, path: str) -> None:
        Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)

    def write(self, path: str, data: bytes) -> None:
        """Overwrite in place (same inode) or create."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, data)
        finally:
            os.close(fd)

    def chown_link(self, path: str, uid: int) -> None:
        os.lchown(path, uid, uid)

    def set_used(self, path: str, when: float) -> None:
        """The times the layer cache reads (last read, last change) of the entry at ``path``."""
        os.utime(path, (when, when), follow_symlinks=False)

    def append(self, path: str, data: bytes) -> None:
        with open(path, "ab") as handle:
            handle.write(data)

    def read(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def symlink(self, target: str, path: str) -> None:
        os.symlink(target, path)

    def mkfifo(self, path: str) -> None:
        os.mkfifo(path, 0o600)

    def chown(self, path: str, uid: int) -> None:
        os.chown(path, uid, -1, follow_symlinks=False)

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(path, mode)

    def mode(self, path: str) -> int:
        return stat.S_IMODE(os.lstat(path).st_mode)

    def readlink(self, path: str) -> str:
        return os.readlink(path)

    def group_of(self, path: str) -> str:
        import grp

        return grp.getgrgid(os.lstat(path).st_gid).gr_name

    def kind_of(self, path: str) -> str:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            return "symlink"
        if stat.S_ISDIR(mode):
            return "directory"
        if stat.S_ISFIFO(mode):
            return "fifo"
        return "file"

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def rename(self, source: str, destination: str) -> None:
        os.rename(source, destination)

    def copy_tree(self, source: str, destination: str) -> None:
        shutil.copytree(source, destination, symlinks=True)

    def remove(self, path: str) -> None:
        os.unlink(path)

    def read_only(self, scenario: str, act: Callable[[Workspace], list[str]]) -> list[str]:
        """``act`` on this workspace made read-only by ``scenario`` (see below)."""
        return _local_read_only(self, scenario, act)

    def deep_tree(self, path: str, depth: int) -> None:
        """``depth`` nested directories ``d/d/...`` below ``path`` (far past PATH_MAX), a file
        at the bottom; made through descriptors, one at a time."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(depth):
                os.mkdir("d", 0o700, dir_fd=fd)
                child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = child
            os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        finally:
            os.close(fd)

    def wide_tree(self, path: str, files: int, directories: int) -> None:
        """``files`` empty files and ``directories`` directories holding one file each."""
        for n in range(files):
            Path(f"{path}/f{n}").touch(mode=0o600)
        for n in range(directories):
            Path(f"{path}/d{n}").mkdir(mode=0o700)
            Path(f"{path}/d{n}/f").touch(mode=0o600)

    @contextmanager
    def failing_removal(self, workspace: Workspace, below: str) -> Iterator[list[str]]:
        """The first removal of ``below`` or of an entry below it fails with EIO; yields what
        failed."""
        failed: list[str] = []
        originals = os.unlink, os.rmdir

        def failing(original: Callable[..., None]) -> Callable[..., None]:
            def remove(name: str, *, dir_fd: int | None = None) -> None:
                where = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else ""
                path = f"{where}/{name}" if where else name
                if not failed and (path == below or path.startswith(below + "/")):
                    failed.append(path)
                    raise OSError(errno.EIO, "Input/output error")
                original(name, dir_fd=dir_fd)

            return remove

        os.unlink, os.rmdir = failing(originals[0]), failing(originals[1])
        try:
            yield failed
        finally:
            os.unlink, os.rmdir = originals

    def listing(self) -> list[str]:
        """Every path below the root, sorted."""
        found = []
        for directory, dirs, files in os.walk(self.root):
            found += [os.path.join(directory, name) for name in dirs + files]
        return sorted(found)


class MemoryHarness:
    """Acts on a ``MemoryFilesystem`` as root at a shell."""

    kind = "memory"

    def __init__(self) -> None:
        self.filesystem = MemoryFilesystem()
        self.root = "/site/ws"
        self.uid = 1000
        self.filesystem.makedirs(self.root)
        self.filesystem.chown(self.root, self.uid)
        self.workspace: Workspace = MemoryWorkspace(self.root, self.filesystem, uid=self.uid)

    def with_uid(self, uid: int) -> Workspace:
        return MemoryWorkspace(self.root, self.filesystem, uid=uid)

    def mkdir(self, path: str, mode: int = 0o700) -> None:
        self.filesystem.mkdir(path, mode=mode, uid=self.uid)

    def makedirs(self, path: str) -> None:
        self.filesystem.makedirs(path, mode=0o700, uid=self.uid)

    def write(self, path: str, data: bytes) -> None:
        self.filesystem.write(path, data, uid=self.uid)

    def chown_link(self, path: str, uid: int) -> None:
        node = self.filesystem.lookup(path)
        assert node is not None, path
        node.uid = uid

    def set_used(self, path: str, when: float) -> None:
        node = self.filesystem.lookup(path)
        assert node is not None, path
        node.used_at = when

    def append(self, path: str, data: bytes) -> None:
        self.filesystem.append(path, data)

    def read(self, path: str) -> bytes:
        return self.filesystem.read(path)

    def symlink(self, target: str, path: str) -> None:
        self.filesystem.symlink(target, path, uid=self.uid)

    def mkfifo(self, path: str) -> None:
        self.filesystem.mkfifo(path, uid=self.uid)

    def chown(self, path: str, uid: int) -> None:
        self.filesystem.chown(path, uid)

    def chmod(self, path: str, mode: int) -> None:
        self.filesystem.chmod(path, mode)

    def mode(self, path: str) -> int:
        node = self.filesystem.lookup(path)
        assert node is not None, path
        return node.mode

    def readlink(self, path: str) -> str:
        node = self.filesystem.lookup(path)
        assert node is not None and node.kind == "symlink", path
        return node.target

    def group_of(self, path: str) -> str | None:
        node = self.filesystem.lookup(path)
        assert node is not None, path
        return node.group

    def kind_of(self, path: str) -> str:
        node = self.filesystem.lookup(path)
        assert node is not None, path
        return node.kind

    def exists(self, path: str) -> bool:
        return self.filesystem.lookup(path) is not None

    def rename(self, source: str, destination: str) -> None:
        self.filesystem.rename(source, destination)

    def copy_tree(self, source: str, destination: str) -> None:
        self.filesystem.copy(source, destination)

    def remove(self, path: str) -> None:
        self.filesystem.remove(path)

    def read_only(self, scenario: str, act: Callable[[Workspace], list[str]]) -> list[str]:
        return _memory_read_only(self, scenario, act)

    def deep_tree(self, path: str, depth: int) -> None:
        node = self.filesystem.lookup(path)
        assert node is not None and node.kind == "directory", path
        for _ in range(depth):
            child = self.filesystem.new_node("directory", 0o700, self.uid)
            node.entries["d"] = child
            node = child
        node.entries["bottom"] = self.filesystem.new_node("file", 0o600, self.uid)

    def wide_tree(self, path: str, files: int, directories: int) -> None:
        for n in range(files):
            self.write(f"{path}/f{n}", b"")
        for n in range(directories):
            self.mkdir(f"{path}/d{n}")
            self.write(f"{path}/d{n}/f", b"")

    @contextmanager
    def failing_removal(self, workspace: Workspace, below: str) -> Iterator[list[str]]:
        assert isinstance(workspace, MemoryWorkspace)
        failed: list[str] = []

        def removing(path: str) -> None:
            if not failed and (path == below or path.startswith(below + "/")):
                failed.append(path)
                raise WorkspaceError(field=path, rule="Input/output error")

        workspace.before_removal = removing
        try:
            yield failed
        finally:
            workspace.before_removal = None

    def listing(self) -> list[str]:
        found: list[str] = []

        def walk(prefix: str) -> None:
            node = self.filesystem.lookup(prefix)
            assert node is not None
            for name, child in node.entries.items():
                found.append(f"{prefix}/{name}")
                if child.kind == "directory":
                    walk(f"{prefix}/{name}")

        walk(self.root)
        return sorted(found)


Harness = LocalHarness | MemoryHarness


@pytest.fixture
def world_readable_tmp() -> Iterator[Path]:
    """A temporary directory others may traverse (pytest's own is 0700 for root)."""
    base = Path(tempfile.mkdtemp(prefix="slurm-image-test-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=WORKSPACE_KINDS)
def workspace_harness(request: pytest.FixtureRequest, world_readable_tmp: Path) -> Harness:
    if request.param == "local":
        return LocalHarness(world_readable_tmp)
    return MemoryHarness()


@pytest.fixture
def profile_for() -> Callable[..., tuple[SiteProfile, ProfileSelection]]:
    def build(root: str, **overrides: Any) -> tuple[SiteProfile, ProfileSelection]:
        data: dict[str, Any] = {
            "workspace_root": root,
            "image_build": {
                "partition": "cpu",
                "cpus_per_task": 2,
                "memory": "4G",
                "time_limit": "1:00:00",
            },
            "submitter": {"kind": "fake"},
        }
        data.update(overrides)
        profile = parse_profile(data)
        return profile, ProfileSelection(how="explicit", profile_sha256=profile.sha256())

    return build


@pytest.fixture
def import_request() -> Request:
    return make_request(
        "import_oci",
        name="alpine",
        role="client",
        source=f"docker.io/library/alpine:3.19@sha256:{DIGEST}",
    )


@pytest.fixture
def runtime_files() -> RuntimeFiles:
    return RuntimeFiles(inspector=b"print('facts')\n", rc=b'exec python3 -I -B "$@"\n')


# -- read-only workspaces --------------------------------------------------------------------
#
# Two ways a workspace is read-only, both reachable as root here without chattr:
# - "mount": the workspace root is bind-mounted read-only (EROFS). The local harness forks, and
#   the child enters a private mount namespace (unshare(CLONE_NEWNS), as `unshare -m` does) and
#   remounts the root read-only there: the host's mounts are untouched. Skipped where unshare is
#   not permitted.
# - "permissions": an ordinary user whose directories are 0500 (EACCES). The local harness forks,
#   and the child drops to that uid with setuid() before acting (root cannot be refused by modes).
# The memory harness models both: MemoryFilesystem(read_only=True) and a non-root uid.

READ_ONLY_UID = 65534
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18


def _run_forked(action: Callable[[], list[str]]) -> list[str] | None:
    """Run ``action`` in a forked child; its result as JSON, or None when it could not start."""
    import json

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read_end)
            result = action()
            os.write(write_end, json.dumps(result).encode())
        except _Unavailable:
            code = 3
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 3:
        return None
    assert code == 0, f"the child failed with {code}"
    return list(json.loads(b"".join(chunks)))


class _Unavailable(Exception):
    pass


def _enter_read_only_mount(root: str) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise _Unavailable
    target = root.encode()
    if (
        libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0
        or libc.mount(target, target, None, _MS_BIND, None) != 0
        or libc.mount(None, target, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY, None) != 0
    ):
        raise _Unavailable


def _local_read_only(
    self: LocalHarness, scenario: str, act: Callable[[Workspace], list[str]]
) -> list[str]:
    if scenario == "permissions":
        for path in [self.root, *self.listing()]:
            os.chown(path, READ_ONLY_UID, READ_ONLY_UID, follow_symlinks=False)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o500)

        def action() -> list[str]:
            os.setgid(READ_ONLY_UID)
            os.setuid(READ_ONLY_UID)
            return act(LocalWorkspace(self.root))

    else:

        def action() -> list[str]:
            _enter_read_only_mount(self.root)
            return act(LocalWorkspace(self.root))

    try:
        result = _run_forked(action)
    finally:
        for path in [self.root, *self.listing()]:
            os.chown(path, 0, 0, follow_symlinks=False)
            if os.path.isdir(path):
                os.chmod(path, 0o700)
    if result is None:
        unavailable("a private read-only mount is not permitted here (unshare)")
    return result


def _memory_read_only(
    self: MemoryHarness, scenario: str, act: Callable[[Workspace], list[str]]
) -> list[str]:
    if scenario == "permissions":
        for path in [self.root, *self.listing()]:
            self.filesystem.chown(path, READ_ONLY_UID)
            if self.kind_of(path) == "directory":
                self.filesystem.chmod(path, 0o500)
        return act(self.with_uid(READ_ONLY_UID))
    self.filesystem.read_only = True
    try:
        return act(self.workspace)
    finally:
        self.filesystem.read_only = False


@pytest.fixture
def local_harness() -> type[LocalHarness]:
    """The real-directory harness, for tests that build their own workspace under a given base."""
    return LocalHarness

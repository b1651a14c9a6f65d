"""Run the rendered batch script under bash, as slurmd would, with the Enroot stand-in (helpers
and fixtures; conftest.py re-exports the fixtures, tests import the helpers from here).

Each test gets its own stand-in directory (first in ``image_build.job_path``) with its own
``enroot-standin.json``; an attempt directory staged from a derived plan as design §4 says; and a
spool copy of the script executed directly (its ``#!/bin/bash -p`` line honoured) with the
``SLURM_*`` variables a batch step has.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from slurm_image.domain.plan import Plan, derive_plan
from slurm_image.domain.profile import select_cluster
from slurm_image.domain.request import make_request
from slurm_image.domain.runtime import RuntimeFiles
from slurm_image.domain.script import render_script
from slurm_image.entrypoints.runtime_files import load_runtime_files

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STANDIN = FIXTURES / "enroot" / "enroot"
DEFAULT_JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CI = os.environ.get("CI") == "true"
ROOTS = Path(
    os.environ.get("SLURM_IMAGE_ROOTS_CACHE", Path.home() / ".cache" / "slurm-image" / "roots")
)
TEST_IMAGES = Path(
    os.environ.get(
        "SLURM_IMAGE_TEST_IMAGES",
        Path.home() / ".cache" / "slurm-image" / "test-images" / "images.json",
    )
)
SQUASH_EXCLUDE = [
    "usr/share/doc",
    "usr/share/locale",
    "usr/share/man",
    "usr/share/info",
    "usr/share/zoneinfo",
    "var/lib/apt/lists",
    "var/cache/*",
    "var/log/*",
    ".slurm-image-root-complete",
]


def need(condition: bool, reason: str) -> None:
    """Skip locally when a prerequisite is missing; in CI (CI=true) that is a failure."""
    if condition:
        return
    if CI:
        pytest.fail(f"{reason} (required when CI=true)")
    pytest.skip(reason)


def need_squashfs_tools() -> None:
    need(
        bool(shutil.which("mksquashfs") and shutil.which("unsquashfs")),
        "squashfs-tools missing (apt-get install squashfs-tools)",
    )


class Standin:
    """The recording Enroot stand-in of one test, configured through the file next to it."""

    def __init__(self, directory: Path) -> None:
        self.bin = directory
        self.bin.mkdir(mode=0o700)
        (self.bin / "enroot").symlink_to(STANDIN)
        self.log = directory.parent / "enroot-calls.jsonl"
        self.config: dict[str, Any] = {"log": str(self.log)}
        self._write()

    def configure(self, **values: Any) -> None:
        self.config.update(values)
        self._write()

    def _write(self) -> None:
        (self.bin / "enroot-standin.json").write_text(json.dumps(self.config))

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def calls(self) -> list[dict[str, Any]]:
        return [entry for entry in self.records() if entry["event"] == "call"]

    def commands(self) -> list[str]:
        return [call["argv"][0] for call in self.calls()]

    def event(self, name: str) -> dict[str, Any]:
        found = [entry for entry in self.records() if entry["event"] == name]
        assert len(found) == 1, found
        return found[0]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


class Job:
    """One staged attempt and its spool copy of the script."""

    def __init__(
        self,
        tmp: Path,
        standin: Standin,
        *,
        operation: str,
        role: str,
        source: str,
        environment: dict[str, str] | None = None,
        local_scratch: bool = True,
        runtime: RuntimeFiles | None = None,
    ) -> None:
        self.tmp = tmp
        self.standin = standin
        self.workspace = tmp / "ws"
        self.workspace.mkdir(mode=0o700, exist_ok=True)
        self.scratch = tmp / "scratch"
        self.scratch.mkdir(mode=0o700, exist_ok=True)
        build: dict[str, Any] = {
            "partition": "build",
            "cpus_per_task": 2,
            "memory": "4G",
            "time_limit": "1:00:00",
            "job_path": f"{standin.bin}:{DEFAULT_JOB_PATH}",
        }
        if local_scratch:
            build["local_scratch"] = str(self.scratch)
        document: dict[str, Any] = {"workspace_root": str(self.workspace), "image_build": build}
        if environment:
            document["enroot"] = {"environment": environment}
        profile, selection = select_cluster(
            document, explicit=None, hostnames=["node1"], catalog_sha256="0" * 64
        )
        request = make_request(operation, name="test-image", role=role, source=source)  # type: ignore[arg-type]
        self.runtime = runtime or load_runtime_files()
        self.plan: Plan = derive_plan(
            request,
            profile,
            selection,
            lifecycle_id="img-" + uuid.uuid4().hex,
            created_at=datetime.now(UTC),
            runtime=self.runtime.digests(),
        )
        self.paths = self.plan.paths
        self.job_dir = Path(self.paths.job_dir)
        self.script = render_script(self.plan)
        self.job_id = str(random.randint(1000, 99_999_999))
        self.stage()

    def stage(self) -> None:
        """Design §4: every directory 0700, files O_EXCL|O_NOFOLLOW with their modes."""
        for directory in reversed(self.job_dir.parents):
            if self.workspace in directory.parents and not directory.exists():
                directory.mkdir(mode=0o700)
        self.job_dir.mkdir(mode=0o700)
        files = [
            (self.paths.plan, self.plan.canonical_bytes(), 0o600),
            (self.paths.script, self.script.encode(), 0o500),
            (self.paths.inspector, self.runtime.inspector, 0o500),
            (self.paths.rc, self.runtime.rc, 0o500),
        ]
        for path, data, mode in files:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                os.fsync(handle.fileno())
        Path(self.paths.output_dir).mkdir(mode=0o700)

    def environment(self, **extra: str) -> dict[str, str]:
        base = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.tmp),
            "USER": "root",
            "LANG": "C.UTF-8",
            "SLURM_JOB_ID": self.job_id,
            "SLURM_JOBID": self.job_id,
            "SLURM_CPUS_ON_NODE": "2",
            "SLURM_JOB_CPUS_PER_NODE": "2",
            "SLURM_RESTART_COUNT": "0",
            "SLURMD_NODENAME": "node1",
            "SLURM_SUBMIT_DIR": str(self.tmp),
        }
        base.update(extra)
        return base

    def run(
        self,
        env: dict[str, str] | None = None,
        *,
        unset: tuple[str, ...] = (),
        timeout: float = 300,
    ) -> Result:
        """Execute a spool copy of the script the way slurmd does (chdir, stdin /dev/null)."""
        spool = self.tmp / "spool" / f"job{self.job_id}" / "slurm_script"
        spool.parent.mkdir(parents=True, mode=0o700)
        spool.write_text(self.script)
        spool.chmod(0o500)
        environment = self.environment(**(env or {}))
        for key in unset:
            environment.pop(key, None)
        completed = subprocess.run(
            [str(spool)],
            cwd=self.job_dir,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Result(completed.returncode, completed.stdout, completed.stderr)

    def leftover_scratch(self) -> list[str]:
        return sorted(p.name for p in self.scratch.iterdir())


@pytest.fixture
def standin(tmp_path: Path) -> Standin:
    return Standin(tmp_path / "standin")


JobFactory = Callable[..., Job]


@pytest.fixture
def make_job(tmp_path: Path, standin: Standin) -> JobFactory:
    def factory(**kwargs: Any) -> Job:
        return Job(tmp_path, standin, **kwargs)

    return factory


# -- images ----------------------------------------------------------------------------------

FAKE_PYTHON = r"""#!/bin/sh
# python3 of a test image: answers the rc's version probe, then does what MODE says with the
# inspector's arguments (-I -B INSPECTOR ROLE SHA256 OUTPUT).
MODE=@MODE@
[ "$3" = "-c" ] && exit 0
out=$6
case $MODE in
silent) exit 0 ;;
empty) : >"$out"; exit 0 ;;
fail-after-writing) echo '{"partial": true}' >"$out"; exit 1 ;;
esac
{
    echo "argc=$#"
    for arg in "$@"; do echo "arg=$arg"; done
    echo "--- env"
    env
    echo "--- mountinfo"
    cat /proc/self/mountinfo
    echo "--- slurm-image"
    ls /.slurm-image
    echo "--- write probes"
    probe() { if (: >>"$2") 2>/dev/null; then echo "$1=writable"; else echo "$1=readonly"; fi; }
    probe inspector /.slurm-image/inspect_image.py
    probe root /root-probe
} >"$out"
"""

BUSYBOX_APPLETS = ["sh", "cat", "ls", "echo", "env", "mkdir", "test", "[", "printf", "touch"]


def busybox_root(root: Path, python: str | None, environment: list[str]) -> Path:
    """A root with Debian's busybox-static as /bin/sh and, optionally, a fake python3."""
    (root / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "tmp").mkdir()
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in BUSYBOX_APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "environment").write_text("".join(line + "\n" for line in environment))
    if python is not None:
        (root / "usr" / "bin").mkdir(parents=True)
        fake = root / "usr" / "bin" / "python3"
        fake.write_text(FAKE_PYTHON.replace("@MODE@", python))
        fake.chmod(0o755)
    return root


def mksquashfs(root: Path, image: Path, *extra: str) -> Path:
    subprocess.run(
        [
            *("mksquashfs", str(root), str(image), "-all-root", "-no-progress", "-quiet"),
            *("-noappend", "-comp", "lzo", "-noD", *extra),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return image


BUSYBOX_IMAGES = {
    # name: (fake python mode or None, /etc/environment)
    "report": ("report", ["PATH=/usr/bin:/bin", "NVIDIA_VISIBLE_DEVICES=all"]),
    "nopython": (None, ["PATH=/bin"]),
    "silent": ("silent", []),
    "empty": ("empty", []),
    "fail-after-writing": ("fail-after-writing", []),
}


@pytest.fixture(scope="session")
def busybox_images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny real squashfs images (built once): busybox-static plus a fake python3 or none."""
    need_squashfs_tools()
    need(Path("/bin/busybox").is_file(), "/bin/busybox missing (apt-get install busybox-static)")
    base = tmp_path_factory.mktemp("busybox-images")
    images = {}
    for name, (python, environment) in BUSYBOX_IMAGES.items():
        root = busybox_root(base / f"{name}-root", python, environment)
        images[name] = mksquashfs(root, base / f"{name}.sqsh")
    return images


@pytest.fixture
def image(tmp_path: Path, busybox_images: dict[str, Path]) -> Callable[[str], Path]:
    """A private copy of a busybox image, at an inspectable path of this test's own."""
    directory = tmp_path / "images"
    directory.mkdir(mode=0o700)

    def copy(name: str) -> Path:
        target = directory / f"{name}.sqsh"
        shutil.copy2(busybox_images[name], target)
        return target

    return copy


@pytest.fixture(scope="session")
def bookworm_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The Debian 12 root of scripts/debian-roots (python3 + apt's python3-pip), squashed."""
    need_squashfs_tools()
    root = ROOTS / "bookworm"
    need(
        (root / ".slurm-image-root-complete").is_file(),
        f"no Debian bookworm root at {root} (scripts/debian-roots bookworm)",
    )
    image = tmp_path_factory.mktemp("bookworm") / "bookworm.sqsh"
    mksquashfs(root, image, "-wildcards", "-e", *SQUASH_EXCLUDE)
    yield image


@pytest.fixture(scope="session")
def registry_images() -> dict[str, str]:
    """References of the images scripts/test-images pushed to the local registry."""
    need(shutil.which("mksquashfs") is not None, "squashfs-tools missing")
    need(
        TEST_IMAGES.is_file(),
        f"no test images recorded at {TEST_IMAGES} "
        "(scripts/local-registry up && scripts/test-images)",
    )
    images: dict[str, str] = json.loads(TEST_IMAGES.read_text())
    try:
        with urllib.request.urlopen("http://127.0.0.1:5000/v2/", timeout=3):
            pass
    except OSError:
        need(False, "no registry answers on 127.0.0.1:5000 (scripts/local-registry up)")
    return images


HTTP = {"ENROOT_ALLOW_HTTP": "yes"}

"""Run the rendered batch script under bash, as slurmd would, with the Enroot stand-in (helpers
and fixtures; conftest.py re-exports the fixtures, tests import the helpers from here).

Each test gets its own stand-in directory (first in ``image_build.job_path``) with its own
``enroot-standin.json``; an attempt directory staged from a derived plan as docs/design.md, "The
plan and staging", says; and a spool copy of the script executed directly (its ``#!/bin/bash -p``
line honoured) with the ``SLURM_*`` variables a batch step has.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from parallel import ordinary_uid
from slurm_image.composition.runtime_files import load_runtime_files
from slurm_image.domain.architecture import elf_machine
from slurm_image.domain.credentials import CREDENTIALS_NAME, RegistryCredentials
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.plan import Plan, derive_plan
from slurm_image.domain.profile import select_cluster
from slurm_image.domain.request import make_request
from slurm_image.domain.runtime import RuntimeFiles
from slurm_image.domain.script import BINFMT_MISC, render_script
from slurm_image.domain.shell import quote
from support import install_enroot_standin

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STANDIN = FIXTURES / "enroot" / "enroot"
DEFAULT_JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CI = os.environ.get("CI") == "true"
_SPAWN_LOCK = threading.Lock()
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
        self.log = directory.parent / "enroot-calls.jsonl"
        self.config: dict[str, Any] = {"log": str(self.log)}
        install_enroot_standin(self.bin, self.config)

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
        credentials: RegistryCredentials | None = None,
        architecture: str | None = None,
        system_path: str = DEFAULT_JOB_PATH,
        layer_cache: str | bool | None = None,
        importer: str | None = None,
    ) -> None:
        self.tmp = tmp
        self.standin = standin
        self.workspace = tmp / "ws"
        self.workspace.mkdir(mode=0o700, exist_ok=True)
        self.scratch = tmp / "scratch"
        self.scratch.mkdir(mode=0o711, exist_ok=True)  # as /tmp: walkable by the sandbox
        build: dict[str, Any] = {
            "partition": "build",
            "cpus_per_task": 2,
            "memory": "4G",
            "time_limit": "1:00:00",
            "job_path": f"{standin.bin}:{system_path}",
        }
        if local_scratch:
            build["local_scratch"] = str(self.scratch)
        if importer:
            build["importer"] = importer
        document: dict[str, Any] = {"workspace_root": str(self.workspace), "image_build": build}
        enroot: dict[str, Any] = {}
        if environment:
            enroot["environment"] = environment
        if layer_cache is not None:
            enroot["layer_cache"] = layer_cache
        if enroot:
            document["enroot"] = enroot
        profile, selection = select_cluster(
            document, explicit=None, hostnames=["node1"], catalog_sha256="0" * 64
        )
        request = make_request(
            operation,  # type: ignore[arg-type]
            name="test-image",
            role=role,
            source=source,
            architecture=architecture,
        )
        self.runtime = runtime or load_runtime_files()
        self.plan: Plan = derive_plan(
            request,
            profile,
            selection,
            lifecycle_id="img-" + uuid.uuid4().hex,
            created_at=datetime.now(UTC),
            runtime=self.runtime.digests(),
            credentials_host=credentials.host if credentials else None,
        )
        self.credentials = credentials
        self.paths = self.plan.paths
        self.job_dir = Path(self.paths.job_dir)
        self.script = render_script(self.plan)
        self.job_id = str(random.randint(1000, 99_999_999))
        self.stage()

    def stage(self) -> None:
        """docs/design.md, "The plan and staging": every directory 0700, files O_EXCL|O_NOFOLLOW
        with their modes."""
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
        if self.credentials is not None:
            self.stage_credentials(self.credentials.netrc_bytes())

    def stage_credentials(self, data: bytes) -> Path:
        """As Prepare does: ``enroot/config/.credentials`` 0600 in directories 0700."""
        config = Path(self.paths.enroot_config)
        config.parent.mkdir(mode=0o700, exist_ok=True)
        config.mkdir(mode=0o700, exist_ok=True)
        path = config / CREDENTIALS_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return path

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

    def command(self, inspection_path: str = "unpacked") -> list[str]:
        """The command that runs a spool copy of the script: as root (whose job unpacks), or, for
        ``"overlay"``, as ``ORDINARY_UID`` on a node whose /dev/fuse users may open (as udev
        makes it), the workspace and scratch made that user's."""
        spool = self.tmp / "spool" / f"job{self.job_id}" / "slurm_script"
        spool.parent.mkdir(parents=True, mode=0o755)
        spool.write_text(self.script)
        if inspection_path == "unpacked":
            spool.chmod(0o500)
            return [str(spool)]
        assert inspection_path == "overlay", inspection_path
        spool.chmod(0o555)
        owned = [self.workspace, self.scratch]
        image_shelf = Path(self.paths.sqsh).parent
        if self.plan.operation == "inspect_sqsh" and self.tmp in image_shelf.parents:
            owned.append(image_shelf)
        for path in owned:
            subprocess.run(["chown", "-R", f"{ORDINARY_UID}:{ORDINARY_UID}", str(path)], check=True)
        return as_user_with_fuse(self.tmp, [str(spool)])

    def run(
        self,
        env: dict[str, str] | None = None,
        *,
        unset: tuple[str, ...] = (),
        timeout: float = 300,
        inspection_path: str = "unpacked",
    ) -> Result:
        """Execute a spool copy of the script the way slurmd does (chdir, stdin /dev/null)."""
        environment = self.environment(**(env or {}))
        for key in unset:
            environment.pop(key, None)
        # A child forked by another thread while this spool file is open for writing keeps it
        # open, and exec then fails with ETXTBSY: write and spawn under one lock.
        with _SPAWN_LOCK:
            command = self.command(inspection_path)
            process = subprocess.Popen(
                command,
                cwd=self.job_dir,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
        return Result(process.returncode, stdout, stderr)

    def inspection_path_record(self) -> dict[str, str]:
        layout = AttemptLayout(self.plan.profile.workspace_root, self.plan.lifecycle_id)
        record: dict[str, str] = json.loads(Path(layout.inspection_path_record).read_text())
        return record

    def use_binfmt_misc(self, directory: Path) -> None:
        """Point the job's architecture rules at ``directory`` instead of the kernel's list."""
        self.script = point_at_binfmt_misc(self.script, directory)

    @property
    def architecture_record(self) -> Path:
        layout = AttemptLayout(self.plan.profile.workspace_root, self.plan.lifecycle_id)
        return Path(layout.architecture_record)

    def leftover_scratch(self) -> list[str]:
        return sorted(p.name for p in self.scratch.iterdir())


# -- the two inspection paths ------------------------------------------------------------------

# Root's job always unpacks; an ordinary user's job mounts the image through an overlay where
# the node lets users open /dev/fuse (README, Threat model).
INSPECTION_PATHS = ("unpacked", "overlay")
ORDINARY_UID = ordinary_uid()  # an id no account on the test machine has, one per worker
FUSE_TOOLS = ("squashfuse", "fuse-overlayfs", "fusermount3")
# Runs a command as another uid in a mount namespace whose /dev/fuse users may open (as udev
# makes it); bench/ runs the same file.
RUN_AS_FUSE_USER = Path(__file__).resolve().parents[1] / "fixtures" / "run-as-fuse-user"


def need_user_fuse() -> None:
    """The overlay path needs squashfuse, fuse-overlayfs and a FUSE device (CI: fuse3)."""
    need(os.geteuid() == 0, "running a job as another user needs root (CI runs as root)")
    missing = [tool for tool in FUSE_TOOLS if shutil.which(tool) is None]
    need(
        not missing,
        f"{', '.join(missing)} missing (scripts/test installs them as root: apt-get install"
        " squashfuse fuse-overlayfs fuse3)",
    )
    need(Path("/dev/fuse").exists(), "no /dev/fuse on this machine")


def path_without(directory: Path, *tools: str) -> str:
    """A ``job_path`` directory of links to every program of /usr/bin and /bin but ``tools``:
    a node without them. (/bin may be /usr/bin, and a link there may dangle.)"""
    directory.mkdir(mode=0o755)
    for source in (Path("/bin"), Path("/usr/bin")):
        for program in source.iterdir():
            link = directory / program.name
            if program.name not in tools and not os.path.lexists(link):
                link.symlink_to(program)
    return str(directory)


FAILING_RM = """#!/bin/sh
# rm of a node that cannot remove a path whose last component starts with @PREFIX@
for argument in "$@"; do
    case ${argument##*/} in
    @PREFIX@*) echo "rm: cannot remove '$argument': Operation not permitted" >&2; exit 1 ;;
    esac
done
exec /bin/rm "$@"
"""


def install_failing_rm(directory: Path, prefix: str) -> Path:
    """An ``rm`` in ``directory`` (first on a job's PATH) that fails for the paths whose name
    starts with ``prefix`` and is the system's for every other."""
    rm = directory / "rm"
    rm.write_text(FAILING_RM.replace("@PREFIX@", prefix))
    rm.chmod(0o755)
    return rm


def as_user_with_fuse(tmp: Path, command: list[str]) -> list[str]:
    need_user_fuse()
    node = tmp / "fuse-node"
    node.mkdir(exist_ok=True)
    return [str(RUN_AS_FUSE_USER), str(node), str(ORDINARY_UID), *command]


# The stand-in and the jobs live where everyone may walk (pytest's tmp_path is 0700 for root): a
# root job runs the image's side, Enroot included, as the unprivileged sandbox id.
@pytest.fixture
def standin(world_readable_tmp: Path) -> Standin:
    return Standin(world_readable_tmp / "standin")


JobFactory = Callable[..., Job]


@pytest.fixture
def make_job(world_readable_tmp: Path, standin: Standin) -> JobFactory:
    def factory(**kwargs: Any) -> Job:
        return Job(world_readable_tmp, standin, **kwargs)

    return factory


# -- binfmt_misc: handlers of a test's own ------------------------------------------------------

ELF64_LSB = "7f454c46020101000000000000000000"
# qemu-user-static's registration, as Debian's binfmt-support makes it (e_type ET_EXEC or ET_DYN)
QEMU_MASK = "ffffffffffffff00fffffffffffffffffeffffff"


def binfmt_magic(architecture: str) -> str:
    """The magic qemu-user-static registers for ``architecture``'s ELF64 LSB executables."""
    machine = elf_machine(architecture)
    return f"{ELF64_LSB}0200{machine & 255:02x}{machine >> 8:02x}"


def binfmt_handler(
    architecture: str,
    *,
    enabled: bool = True,
    flags: str = "PF",
    magic: str | None = None,
    mask: str | None = QEMU_MASK,
) -> str:
    """A handler's entry as the kernel lists it (qemu-user-static's for ``architecture``)."""
    lines = [
        "enabled" if enabled else "disabled",
        f"interpreter /usr/libexec/qemu-binfmt/{architecture}-binfmt-P",
        f"flags: {flags}",
        "offset 0",
        f"magic {magic or binfmt_magic(architecture)}",
    ]
    if mask is not None:
        lines.append(f"mask {mask}")
    return "\n".join(lines) + "\n"


def fake_binfmt_misc(directory: Path, status: str | None = "enabled", **handlers: str) -> Path:
    """``directory`` laid out as /proc/sys/fs/binfmt_misc: ``status``, ``register`` and the
    handlers given (name: entry); ``status=None``: binfmt_misc not mounted there. A job reads
    it once pointed at it (``Job.use_binfmt_misc``)."""
    directory.mkdir()
    if status is not None:
        (directory / "status").write_text(status + "\n")
        (directory / "register").write_text("")
    for name, text in handlers.items():
        (directory / name).write_text(text)
    return directory


def point_at_binfmt_misc(script: str, directory: Path) -> str:
    """``script`` (a job's or the doctor's) reading ``directory`` instead of the kernel's list."""
    line = f"readonly BINFMT_MISC={BINFMT_MISC}\n"
    assert script.count(line) == 1
    return script.replace(line, f"readonly BINFMT_MISC={quote(str(directory))}\n")


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


# -- the authenticated registry (scripts/local-registry: htpasswd over TLS, HTTP/2) ---------

AUTH_DIR = (
    Path(
        os.environ.get(
            "SLURM_IMAGE_REGISTRY_DIR", Path.home() / ".cache" / "slurm-image" / "registry"
        )
    )
    / "auth"
)
AUTH_REGISTRY = os.environ.get("SLURM_IMAGE_TEST_AUTH_REGISTRY", "127.0.0.1:5443")
AUTH_USER = os.environ.get("SLURM_IMAGE_TEST_AUTH_USER", "slurm-image-test")
V2S2 = "application/vnd.docker.distribution.manifest.v2+json"


@dataclass(frozen=True)
class AuthRegistry:
    """The htpasswd registry: its address, login, password (the tests' canary), CA, images."""

    address: str
    user: str
    password: str
    ca_file: Path
    images: dict[str, str]

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]


def _auth_context(ca_file: Path) -> Any:
    return ssl.create_default_context(cafile=str(ca_file))


def _auth_has(address: str, user: str, password: str, ca_file: Path, reference: str) -> bool:
    repository, _, digest = reference.split("/", 1)[1].partition("@")
    repository = repository.rsplit(":", 1)[0]
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(
        f"https://{address}/v2/{repository}/manifests/{digest}",
        method="HEAD",
        headers={"Accept": V2S2, "Authorization": f"Basic {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5, context=_auth_context(ca_file)) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="session")
def auth_registry(
    registry_images: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> AuthRegistry:
    """The authenticated registry of scripts/local-registry, holding copies (same digests) of
    the test images, made once with skopeo."""
    ca_file = Path(os.environ.get("SLURM_IMAGE_TEST_AUTH_CA", AUTH_DIR / "ca.crt"))
    secret = Path(os.environ.get("SLURM_IMAGE_TEST_AUTH_PASSWORD_FILE", AUTH_DIR / "password"))
    need(
        ca_file.is_file() and secret.is_file(),
        f"no authenticated registry set up in {AUTH_DIR} (scripts/local-registry up)",
    )
    password = secret.read_text().strip()
    try:
        urllib.request.urlopen(
            f"https://{AUTH_REGISTRY}/v2/", timeout=3, context=_auth_context(ca_file)
        )
    except urllib.error.HTTPError as error:
        need(error.code == 401, f"{AUTH_REGISTRY} answers {error.code}, not 401")
    except OSError:
        need(False, f"no registry answers on {AUTH_REGISTRY} (scripts/local-registry up)")
    images = {}
    for name in ("client", "nopython"):
        source = registry_images[name]
        target = AUTH_REGISTRY + "/" + source.split("/", 1)[1]
        images[name] = target
        if _auth_has(AUTH_REGISTRY, AUTH_USER, password, ca_file, target):
            continue
        need(shutil.which("skopeo") is not None, "skopeo missing (apt-get install skopeo)")
        work = tmp_path_factory.mktemp("skopeo")
        certs = work / "certs"
        certs.mkdir()
        shutil.copy(ca_file, certs / "ca.crt")
        auth = work / "auth.json"
        token = base64.b64encode(f"{AUTH_USER}:{password}".encode()).decode()
        auth.write_text(json.dumps({"auths": {AUTH_REGISTRY: {"auth": token}}}))
        auth.chmod(0o600)
        name_tag, _, digest = target.partition("@")
        source_by_digest = source.split("@", 1)[0].rsplit(":", 1)[0] + "@" + digest
        subprocess.run(
            ["skopeo", "copy", "--quiet", "--preserve-digests", "--format", "v2s2",
             "--src-tls-verify=false", "--dest-cert-dir", str(certs),
             "--dest-authfile", str(auth), f"docker://{source_by_digest}",
             f"docker://{name_tag}"],
            check=True,
            timeout=300,
        )  # fmt: skip
        auth.unlink()
        assert _auth_has(AUTH_REGISTRY, AUTH_USER, password, ca_file, target), target
    return AuthRegistry(AUTH_REGISTRY, AUTH_USER, password, ca_file, images)

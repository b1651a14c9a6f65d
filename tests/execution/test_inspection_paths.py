"""The two ways a job inspects an image (docs/design.md, "The batch job"): through an overlay
above the image it hashed, mounted read-only inside the sandbox (an ordinary user's job on a
node with squashfuse, fuse-overlayfs and a /dev/fuse users may open), else an unpacked copy
(root's job; a node without them; a mount that failed before the image ran). Either reads the
.sqsh in full once, says which it used, and leaves nothing mounted, also when the job is
cancelled or killed. The attacks of README's Threat model run on both paths in
test_untrusted_image.py."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from harness import (
    ORDINARY_UID,
    Job,
    JobFactory,
    Result,
    Standin,
    busybox_root,
    mksquashfs,
    need,
    need_squashfs_tools,
    path_without,
)

from slurm_image.domain.inspection import validate_inspection
from slurm_image.domain.paths import AttemptLayout

BIG_BYTES = 32 * 1024 * 1024
WAITING_PYTHON = r"""#!/bin/sh
# python3 of a test image: says it runs, then waits for the test's word before writing a result
[ "$3" = "-c" ] && exit 0
out=$6
: >"${out%/*}/running"
while [ ! -e "${out%/*}/go" ]; do sleep 0.05; done
echo '{}' >"$out"
"""
TAGGED_PYTHON = r"""#!/bin/sh
[ "$3" = "-c" ] && exit 0
echo "image=@TAG@" >"$6"
"""

MakeImage = Callable[..., Path]


@pytest.fixture
def shelf(world_readable_tmp: Path) -> Path:
    """Where an ordinary user's images lie (made that user's when its job runs)."""
    directory = world_readable_tmp / "images"
    directory.mkdir(mode=0o755)
    return directory


@pytest.fixture
def make_image(tmp_path: Path, shelf: Path) -> MakeImage:
    """A busybox image on the shelf whose python3 is ``python`` (the fake's text)."""
    need_squashfs_tools()
    need(Path("/bin/busybox").is_file(), "/bin/busybox missing (apt-get install busybox-static)")
    count = 0

    def make(python: str, *, big: bool = False, name: str | None = None) -> Path:
        nonlocal count
        count += 1
        root = busybox_root(tmp_path / f"root-{count}", None, ["PATH=/usr/bin:/bin"])
        (root / "bin" / "sleep").symlink_to("busybox")
        fake = root / "usr" / "bin" / "python3"
        fake.parent.mkdir(parents=True)
        fake.write_text(python)
        fake.chmod(0o755)
        if big:
            (root / "big").write_bytes(os.urandom(BIG_BYTES))  # incompressible, never read
        return mksquashfs(root, shelf / (name or f"image-{count}.sqsh"))

    return make


def inspect(make_job: JobFactory, source: Path, role: str = "serving", **options: str) -> Job:
    return make_job(operation="inspect_sqsh", role=role, source=str(source), **options)


def result_text(job: Job) -> str:
    path = Path(job.paths.result)
    return path.read_text() if path.is_file() else ""


# -- which path, and why -------------------------------------------------------------------


def test_an_ordinary_user_s_job_inspects_through_the_overlay(
    make_job: JobFactory, image: Callable[[str], Path], shelf: Path, standin: Standin
) -> None:
    source = shelf / "report.sqsh"
    shutil.copy2(image("report"), source)
    job = inspect(make_job, source)

    result = job.run(inspection_path="overlay")

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record() == {"path": "overlay", "reason": "fuse-overlayfs"}
    assert "inspecting the mounted image through an overlay (fuse-overlayfs)" in result.stderr
    assert "create" not in standin.commands()
    report = result_text(job)
    assert "arg=serving" in report
    root = report.split("--- mountinfo\n", 1)[1].splitlines()[0]
    assert root.split()[4] == "/"
    assert root.split(" - ")[1].split()[0] == "fuse.fuse-overlayfs"  # the image's root
    assert job.leftover_scratch() == []


def test_root_s_job_unpacks_and_says_why(
    make_job: JobFactory, image: Callable[[str], Path], standin: Standin
) -> None:
    need(os.geteuid() == 0, "the root job's case needs root (CI runs as root)")
    job = inspect(make_job, image("report"))

    result = job.run()

    assert result.returncode == 0, result.stderr
    reason = "root's job (its FUSE daemons would run as host root)"
    assert job.inspection_path_record() == {"path": "unpacked", "reason": reason}
    assert f"inspecting an unpacked copy of the image ({reason})" in result.stderr
    assert standin.commands() == ["version", "create", "start", "remove"]


def test_a_node_without_squashfuse_unpacks_an_ordinary_user_s_image(
    make_job: JobFactory, make_image: MakeImage, standin: Standin, world_readable_tmp: Path
) -> None:
    system = path_without(world_readable_tmp / "bin", "squashfuse")
    job = inspect(make_job, make_image(TAGGED_PYTHON.replace("@TAG@", "A")), system_path=system)

    result = job.run(inspection_path="overlay")

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record() == {
        "path": "unpacked",
        "reason": f"no squashfuse on {standin.bin}:{system}",
    }
    assert "create" in standin.commands()
    assert result_text(job) == "image=A\n"


def test_an_overlay_that_cannot_be_mounted_falls_back_to_unpacking_before_the_image_runs(
    make_job: JobFactory, make_image: MakeImage, standin: Standin
) -> None:
    failing = standin.bin / "fuse-overlayfs"
    failing.write_text("#!/bin/sh\necho 'fuse: device not found' >&2\nexit 1\n")
    failing.chmod(0o755)
    job = inspect(make_job, make_image(TAGGED_PYTHON.replace("@TAG@", "A")))

    result = job.run(inspection_path="overlay")

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record() == {
        "path": "unpacked",
        "reason": "the overlay could not be mounted (status 1)",
    }
    assert [c for c in standin.commands() if c in ("create", "start")] == ["create", "start"]
    assert result_text(job) == "image=A\n"
    assert job.leftover_scratch() == []


def test_the_image_sees_no_fuse_daemon_and_no_process_of_the_job(
    make_job: JobFactory, make_image: MakeImage
) -> None:
    """The FUSE daemons (whose root is the host's) live in the sandbox's outer PID namespace;
    the image runs in one nested inside it."""
    listing = TAGGED_PYTHON.replace(
        'echo "image=@TAG@" >"$6"', 'for c in /proc/[0-9]*/comm; do cat "$c"; done >"$6"'
    )
    job = inspect(make_job, make_image(listing))

    result = job.run(inspection_path="overlay")

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record()["path"] == "overlay"
    seen = result_text(job).split()
    assert "python3" in seen or "sh" in seen, seen
    assert not {"squashfuse", "fuse-overlayfs", "bash", "unshare", "slurm_script"} & set(seen)


@pytest.mark.parametrize("change", ["touched", "swapped", "renamed-away-and-back"])
def test_an_image_changed_while_mounted_exits_74(
    make_job: JobFactory, make_image: MakeImage, standin: Standin, shelf: Path, change: str
) -> None:
    source = make_image(TAGGED_PYTHON.replace("@TAG@", "A"))
    quoted = shlex.quote(str(source))
    standin.configure(
        hooks={
            "start": {
                "touched": f"sleep 0.01; touch {quoted}",
                "swapped": f"cp {quoted} {quoted}.new && mv {quoted}.new {quoted}",
                "renamed-away-and-back": f"mv {quoted} {quoted}.away && mv {quoted}.away {quoted}",
            }[change]
        }
    )
    job = inspect(make_job, source)

    result = job.run(inspection_path="overlay")

    assert result.returncode == 74, result.stderr
    assert job.inspection_path_record()["path"] == "overlay"
    assert not Path(job.paths.result).exists()
    assert job.leftover_scratch() == []


def test_an_image_without_python_exits_69_on_the_overlay_path_too(
    make_job: JobFactory, image: Callable[[str], Path], shelf: Path, standin: Standin
) -> None:
    source = shelf / "nopython.sqsh"
    shutil.copy2(image("nopython"), source)
    job = inspect(make_job, source)

    result = job.run(inspection_path="overlay")

    assert result.returncode == 69, result.stderr
    assert "no python3" in result.stderr
    assert standin.commands() == ["version", "start"]
    assert job.inspection_path_record()["path"] == "overlay"
    assert job.leftover_scratch() == []


# -- one full read -----------------------------------------------------------------------------


def bytes_read(job: Job, inspection_path: str) -> tuple[Result, int]:
    """The job's run, and the bytes its whole process tree read (``rchar``: the kernel adds a
    reaped child's counts to its parent's, so the shell waiting for the job counts them all)."""
    counts = job.tmp / "rchar"
    measure = 'exec 3>"$0"; "$@" 3>&-; status=$?; grep "^rchar:" /proc/$$/io >&3; exit $status'
    command = ["/bin/sh", "-c", measure, str(counts), *job.command(inspection_path)]
    done = subprocess.run(
        command,
        cwd=job.job_dir,
        env=job.environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Result(done.returncode, done.stdout, done.stderr), int(counts.read_text().split()[1])


def test_the_overlay_path_reads_the_image_once_and_never_the_part_the_inspector_skips(
    make_job: JobFactory, image: Callable[[str], Path], make_image: MakeImage
) -> None:
    """A 32 MiB incompressible file no inspector reads: the overlay path reads the image once
    (its digest) and little else, the unpack path the image and its copy (and unpacks it)."""
    need(os.geteuid() == 0, "the root job's case needs root (CI runs as root)")
    source = make_image(TAGGED_PYTHON.replace("@TAG@", "big"), big=True)
    size = source.stat().st_size
    assert size > BIG_BYTES

    unpacked = inspect(make_job, source)  # root's job first: the other makes ws another's
    result, unpacked_read = bytes_read(unpacked, "unpacked")
    assert result.returncode == 0, result.stderr
    assert unpacked.inspection_path_record()["path"] == "unpacked"

    lazy = inspect(make_job, source)
    result, lazy_read = bytes_read(lazy, "overlay")
    assert result.returncode == 0, result.stderr
    assert lazy.inspection_path_record()["path"] == "overlay"

    assert size <= lazy_read < size + BIG_BYTES // 2, (lazy_read, size)
    assert unpacked_read > 2 * size, (unpacked_read, size)


# -- the mounted bytes are the hashed bytes ------------------------------------------------------


def test_exchanging_a_parent_directory_before_the_mount_mounts_the_hashed_bytes_still(
    make_job: JobFactory, make_image: MakeImage, standin: Standin, shelf: Path
) -> None:
    """squashfuse mounts /dev/fd/9, the file the job hashed: with `current` exchanged for a
    directory holding image B just before it mounts (and exchanged back before the job checks
    the path again), a mount by path would bind B's facts to A's digest."""
    (shelf / "current").mkdir()
    (shelf / "other").mkdir()
    source = make_image(TAGGED_PYTHON.replace("@TAG@", "A"), name="current/img.sqsh")
    make_image(TAGGED_PYTHON.replace("@TAG@", "B"), name="other/img.sqsh")
    swap = (
        f"mv {shelf}/current {shelf}/swap && mv {shelf}/other {shelf}/current"
        f" && mv {shelf}/swap {shelf}/other"
    )
    swapped = shelf / "swapped-before-the-mount"
    wrapper = standin.bin / "squashfuse"
    wrapper.write_text(
        f'#!/bin/sh\n{swap} && : >{swapped}\nexec {shutil.which("squashfuse")} "$@"\n'
    )
    wrapper.chmod(0o755)
    standin.configure(hooks={"start": swap})
    subprocess.run(["chown", "-R", f"{ORDINARY_UID}:{ORDINARY_UID}", str(shelf)], check=True)
    job = inspect(make_job, source)

    result = job.run(inspection_path="overlay")

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record()["path"] == "overlay"
    assert swapped.exists()
    hooks = [entry for entry in standin.records() if entry["event"] == "hook"]
    assert [(entry["hook"], entry["status"]) for entry in hooks] == [("start", 0)]
    assert result_text(job) == "image=A\n"
    assert (shelf / "current" / "img.sqsh").stat().st_ino == source.stat().st_ino


# -- nothing stays mounted, nothing survives -----------------------------------------------------


def mounts_under(pid: int | str, directory: Path) -> list[str]:
    """The mounts process ``pid`` sees at or below ``directory``."""
    try:
        lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    except OSError:
        return []
    return [line for line in lines if line.split()[4].startswith(str(directory))]


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def no_processes_of(uid: int) -> bool:
    """Whether ``uid`` runs no process, once those ending have ended (the kernel kills the
    processes of a namespace whose init died asynchronously)."""
    deadline = time.monotonic() + 10
    while processes_of(uid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@pytest.fixture
def no_stragglers() -> Iterator[None]:
    yield
    for pid in processes_of(ORDINARY_UID):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("ending", ["finished", "SIGTERM", "SIGKILL"])
def test_the_overlay_is_mounted_only_inside_the_sandbox_and_gone_after_the_job(
    make_job: JobFactory, make_image: MakeImage, ending: str, no_stragglers: None
) -> None:
    assert no_processes_of(ORDINARY_UID), "a job of an earlier test is still ending"
    job = inspect(make_job, make_image(WAITING_PYTHON))
    process = subprocess.Popen(
        job.command("overlay"),
        cwd=job.job_dir,
        env=job.environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # as a batch step: Slurm signals every process of it
    )
    try:
        deadline = time.monotonic() + 60
        while not (running := list(job.scratch.glob("*/sandbox/output/running"))):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the image never ran"
            time.sleep(0.05)
        script = os.fsencode(job.tmp / "spool" / f"job{job.job_id}" / "slurm_script")
        job_shells = [p for p in processes_of(ORDINARY_UID) if script in cmdline(p)]
        daemons = [p for p in processes_of(ORDINARY_UID) if comm(p) == "squashfuse"]

        assert job_shells
        assert mounts_under("self", job.scratch) == []
        assert all(mounts_under(pid, job.scratch) == [] for pid in job_shells)
        assert len(daemons) == 1
        inside = mounts_under(daemons[0], job.scratch)
        assert [line.split(" - ")[1].split()[0] for line in inside] == [
            "fuse.squashfuse",
            "fuse.fuse-overlayfs",
        ]

        if ending == "finished":
            (running[0].parent / "go").touch()
            assert process.wait(timeout=60) == 0
        else:
            os.killpg(process.pid, getattr(signal, ending))
            process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    assert no_processes_of(ORDINARY_UID), processes_of(ORDINARY_UID)
    assert [line for pid in os.listdir("/proc") if pid.isdigit()
            for line in mounts_under(pid, job.scratch)] == []  # fmt: skip
    if ending != "SIGKILL":  # a killed job leaves its scratch, as a killed Enroot does
        assert job.leftover_scratch() == []


@pytest.mark.parametrize("planted", ["file", "symlink"])
def test_an_inspection_path_record_that_exists_is_never_overwritten(
    make_job: JobFactory, image: Callable[[str], Path], standin: Standin, planted: str
) -> None:
    job = inspect(make_job, image("report"))
    layout = AttemptLayout(job.plan.profile.workspace_root, job.plan.lifecycle_id)
    record = Path(layout.inspection_path_record)
    if planted == "file":
        record.write_text("planted\n")
    else:
        record.symlink_to(job.tmp / "elsewhere")

    result = job.run()

    assert result.returncode == 73, result.stderr
    assert f"{record} already exists" in result.stderr
    assert not (job.tmp / "elsewhere").exists()
    assert "start" not in standin.commands()


def test_without_fuse_overlayfs_the_kernel_s_overlay_is_used(
    make_job: JobFactory, make_image: MakeImage, standin: Standin, world_readable_tmp: Path
) -> None:
    need("overlay" in Path("/proc/filesystems").read_text().split(), "no overlayfs in the kernel")
    system = path_without(world_readable_tmp / "bin", "fuse-overlayfs")
    listing = TAGGED_PYTHON.replace('echo "image=@TAG@" >"$6"', 'cat /proc/self/mountinfo >"$6"')
    job = inspect(make_job, make_image(listing), system_path=system)

    result = job.run(inspection_path="overlay")

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record() == {"path": "overlay", "reason": "native"}
    root = result_text(job).splitlines()[0]
    assert root.split()[4] == "/"
    assert root.split(" - ")[1].split()[0] == "overlay"


@pytest.mark.e2e
def test_the_real_inspector_reads_a_debian_root_through_the_overlay(
    make_job: JobFactory, standin: Standin, bookworm_image: Path, shelf: Path
) -> None:
    source = shelf / "bookworm.sqsh"
    shutil.copy2(bookworm_image, source)
    job = inspect(make_job, source, role="client")

    result = job.run(inspection_path="overlay")

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record() == {"path": "overlay", "reason": "fuse-overlayfs"}
    assert standin.commands() == ["version", "start"]
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    record = validate_inspection(
        Path(job.paths.result).read_bytes(), role="client", sqsh_sha256=digest
    )
    facts = record.model_dump()["facts"]
    assert facts["installer"]["path"] == "/usr/bin/pip"
    assert facts["python"]["version"].startswith("3.11.")
    assert job.leftover_scratch() == []

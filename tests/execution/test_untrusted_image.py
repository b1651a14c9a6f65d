"""An image is untrusted input: it configures nothing on the host (docs/design.md, "Containing an
untrusted image").

Each case is an attack Enroot 4.1.2 let through (docs/enroot.md, "What an untrusted image can make
Enroot do"). The stand-in applies an image's etc/fstab and etc/environment and runs its stock
hooks (10-shadow, 10-localtime, 10-aptfix, 98-nvidia) on the host's view of paths, so each test
fails against a job that hands the root to ``enroot start`` as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from harness import (
    INSPECTION_PATHS,
    ORDINARY_UID,
    Job,
    JobFactory,
    Result,
    Standin,
    busybox_root,
    mksquashfs,
    need,
    need_squashfs_tools,
)

from survivors import build_survivor, end_survivors, survivors

ATTACK_PYTHON = r"""#!/bin/sh
# python3 of an attacking image: answers the rc's version probe, runs the payload, then writes
# a result so the job completes.
[ "$3" = "-c" ] && exit 0
out=$6
@PAYLOAD@
{ echo "--- env"; env; } >>"$out"
"""
DEFAULT_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
APPLETS = [
    "cp",
    "ln",
    "grep",
    "id",
    "cat",
    "sleep",
    "setsid",
    "sh",
    "rm",
    "chroot",
    "head",
    "tr",
    "yes",
    "truncate",
    "nc",
    "wc",
    "dd",
]

Build = Callable[[Path], None]
AttackImage = Callable[..., Path]


@pytest.fixture
def attack_image(tmp_path: Path, world_readable_tmp: Path) -> AttackImage:
    """A busybox root whose python3 runs ``payload``; ``build`` shapes the root before squashing."""
    need_squashfs_tools()
    need(Path("/bin/busybox").is_file(), "/bin/busybox missing (apt-get install busybox-static)")
    count = 0

    def make(
        payload: str = ":",
        *,
        environment: tuple[str, ...] = (),
        build: Build | None = None,
        python_dir: str = "usr/bin",
    ) -> Path:
        nonlocal count
        count += 1
        root = busybox_root(tmp_path / f"attack-root-{count}", None, list(environment))
        for applet in APPLETS:
            if not (root / "bin" / applet).exists():
                (root / "bin" / applet).symlink_to("busybox")
        python = root / python_dir / "python3"
        python.parent.mkdir(parents=True, exist_ok=True)
        python.write_text(ATTACK_PYTHON.replace("@PAYLOAD@", payload))
        python.chmod(0o755)
        if build is not None:
            build(root)
        images = world_readable_tmp / "attack-images"  # an ordinary user's job reads it too
        images.mkdir(mode=0o755, exist_ok=True)
        return mksquashfs(root, images / f"attack-{count}.sqsh")

    return make


def inspect(make_job: JobFactory, source: Path) -> Job:
    return make_job(operation="inspect_sqsh", role="serving", source=str(source))


@pytest.fixture(params=INSPECTION_PATHS)
def inspection_path(request: pytest.FixtureRequest) -> str:
    """Each attack on both paths: root's job unpacks, an ordinary user's mounts an overlay."""
    return str(request.param)


def run(job: Job, inspection_path: str) -> Result:
    result = job.run(inspection_path=inspection_path)
    if result.returncode == 0:
        assert job.inspection_path_record()["path"] == inspection_path
    return result


def result_text(job: Job) -> str:
    path = Path(job.paths.result)
    return path.read_text() if path.is_file() else ""


def host_directory(tmp_path: Path, name: str) -> Path:
    directory = tmp_path / name
    directory.mkdir(mode=0o777)
    directory.chmod(0o777)
    return directory


# -- etc/fstab ----------------------------------------------------------------------------


def test_an_image_fstab_binds_no_host_directory_into_the_image(
    make_job: JobFactory, attack_image: AttackImage, world_readable_tmp: Path, inspection_path: str
) -> None:
    outside = host_directory(world_readable_tmp, "outside")

    def build(root: Path) -> None:
        (root / "etc" / "fstab").write_text(
            f"{outside} /mnt/outside none x-create=dir,bind,rw\n"
            # ${HOME} is the attempt's home: two levels up is the workspace's jobs/ directory
            "${HOME}/../.. /mnt/jobs none x-create=dir,bind,rw\n"
        )

    source = attack_image(
        "echo planted >/mnt/outside/planted; echo planted >/mnt/jobs/planted", build=build
    )
    job = inspect(make_job, source)

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    assert not (outside / "planted").exists()
    assert not (job.job_dir.parent / "planted").exists()


def test_an_image_fstab_cannot_plant_a_hook_that_runs_on_the_host(
    make_job: JobFactory, attack_image: AttackImage, world_readable_tmp: Path, inspection_path: str
) -> None:
    marker = host_directory(world_readable_tmp, "hook-out") / "hook-ran"

    def build(root: Path) -> None:
        (root / "etc" / "fstab").write_text("${HOME}/.. /mnt/attempt none x-create=dir,bind,rw\n")

    # the image writes a user-configuration hook into its own attempt; a second start (or any
    # other attempt it can reach) would run it on the host
    payload = (
        "mkdir -p /mnt/attempt/enroot/config/hooks.d && "
        f"printf 'touch {marker}\\n' >/mnt/attempt/enroot/config/hooks.d/50-planted.sh"
    )
    job = inspect(make_job, attack_image(payload, build=build))
    config_hooks = Path(job.paths.enroot_config) / "hooks.d"
    config_hooks.mkdir(parents=True, mode=0o700)
    (config_hooks / "40-already-there.sh").write_text(f"touch {marker}\n")

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    assert not (config_hooks / "50-planted.sh").exists()


# -- etc/environment ----------------------------------------------------------------------


def test_an_image_environment_adds_nothing_but_its_path(
    make_job: JobFactory, attack_image: AttackImage, inspection_path: str
) -> None:
    environment = (
        "FROM_IMAGE=yes",
        "COPIED_HOME=${HOME}",
        "LD_PRELOAD=/lib/evil.so",
        "PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin",
        "NVIDIA_VISIBLE_DEVICES=all",
        "MELLANOX_VISIBLE_DEVICES=all",
    )
    # python3 only on the image's own PATH (a venv), so that PATH must still reach the rc
    job = inspect(make_job, attack_image(environment=environment, python_dir="opt/venv/bin"))

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    env = result_text(job).split("--- env\n", 1)[1].splitlines()
    assert not [line for line in env if line.startswith(("FROM_IMAGE=", "COPIED_HOME="))]
    assert not [line for line in env if line.startswith("LD_PRELOAD=")]
    assert next(line for line in env if line.startswith("PATH=")).startswith(
        "PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin"
    )


@pytest.mark.parametrize(
    "path_line",
    ["PATH=/opt/bin:$HOME", "PATH=/opt/bin:${SLURM_JOB_ID}", "PATH=relative:/bin", "PATH=/a b"],
)
def test_an_image_path_that_is_not_plain_absolute_directories_is_dropped(
    make_job: JobFactory, attack_image: AttackImage, path_line: str, inspection_path: str
) -> None:
    job = inspect(make_job, attack_image(environment=(path_line,)))

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    env = result_text(job).split("--- env\n", 1)[1].splitlines()
    path = next(line for line in env if line.startswith("PATH="))
    assert path.startswith(f"PATH={DEFAULT_IMAGE_PATH}:"), path


# -- the stock hooks and symlinks out of the root -------------------------------------------


def test_an_image_whose_etc_is_a_host_directory_gets_nothing_written_there(
    make_job: JobFactory, attack_image: AttackImage, world_readable_tmp: Path, inspection_path: str
) -> None:
    outside = host_directory(world_readable_tmp, "host-etc")
    (outside / "fstab").write_text(f"{outside} /mnt/again none x-create=dir,bind,rw\n")
    (outside / "environment").write_text("FROM_HOST_DIR=yes\n")

    def build(root: Path) -> None:
        for entry in (root / "etc").iterdir():
            entry.unlink()
        (root / "etc").rmdir()
        (root / "etc").symlink_to(outside)

    job = inspect(make_job, attack_image("echo planted >/mnt/again/planted", build=build))

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["environment", "fstab"]
    assert (outside / "fstab").read_text().startswith(str(outside))  # read, never removed
    assert "FROM_HOST_DIR" not in result_text(job)


def test_no_stock_hook_follows_the_image_symlinks_out_of_the_root(
    make_job: JobFactory, attack_image: AttackImage, world_readable_tmp: Path, inspection_path: str
) -> None:
    secret = world_readable_tmp / "secret"
    secret.write_text("host-secret-bytes\n")
    secret.chmod(0o644)
    victim = world_readable_tmp / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o666)
    apt = host_directory(world_readable_tmp, "host-apt")

    def build(root: Path) -> None:
        etc = root / "etc"
        (etc / "passwd").symlink_to(secret)  # read by 10-shadow
        (etc / "group").symlink_to(secret)
        (etc / "localtime").symlink_to(victim)  # written through by 10-localtime
        (etc / "debian_version").write_text("12.0\n")
        (etc / "apt").mkdir()
        (etc / "apt" / "apt.conf.d").symlink_to(apt)  # written into by 10-aptfix
        (etc / "skel").mkdir()
        (etc / "skel" / ".profile").symlink_to(secret)  # cp -Lpr into the new home
        (root / ".lock").symlink_to(victim)  # Enroot truncates the root's lock file

    payload = 'cat /etc/passwd /etc/group /root/.profile /home/*/.profile >>"$out" 2>&1'
    job = inspect(make_job, attack_image(payload, build=build))

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "precious\n"
    assert list(apt.iterdir()) == []
    assert "host-secret-bytes" not in result_text(job)


def test_the_stock_hooks_run_under_the_stand_in_when_no_configuration_is_chosen(
    tmp_path: Path, standin: Standin, attack_image: AttackImage
) -> None:
    """The fixture of the tests above: without the job's private configuration the stand-in's
    stock hooks DO write through an image's symlinks (what Enroot 4.1.2 did)."""
    import os
    import subprocess

    victim = tmp_path / "victim"
    victim.write_text("precious\n")

    def build(root: Path) -> None:
        (root / "etc" / "localtime").symlink_to(victim)
        (root / "etc" / "rc").write_text('"$@"\n')

    image = attack_image(build=build)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ENROOT_DATA_PATH": str(tmp_path / "data"),
        "ENROOT_CACHE_PATH": str(tmp_path / "cache"),
        "ENROOT_RUNTIME_PATH": str(tmp_path / "runtime"),
        "ENROOT_CONFIG_PATH": str(tmp_path / "config"),
    }
    enroot = str(standin.bin / "enroot")
    subprocess.run([enroot, "create", "-n", "c", str(image)], env=env, check=True)
    started = subprocess.run(
        [enroot, "start", *(["--root"] if os.geteuid() == 0 else []), "c", "/bin/echo", "ok"],
        env=env,
        capture_output=True,
        text=True,
    )

    assert started.returncode == 0, started.stderr
    assert victim.read_text() != "precious\n"


def test_the_start_configuration_is_private_to_the_job(
    make_job: JobFactory, attack_image: AttackImage, standin: Standin, inspection_path: str
) -> None:
    job = inspect(make_job, attack_image())

    assert run(job, inspection_path).returncode == 0
    start = next(call for call in standin.calls() if call["argv"][0] == "start")
    sysconf = Path(start["env"]["ENROOT_SYSCONF_PATH"])
    config = Path(start["env"]["ENROOT_CONFIG_PATH"])
    private = Path(start["env"]["ENROOT_DATA_PATH"]).parent
    assert sysconf.parent.parent == private
    assert config.parent.parent == private
    others = [call for call in standin.calls() if call["argv"][0] != "start"]
    assert all("ENROOT_SYSCONF_PATH" not in call["env"] for call in others)
    assert json.dumps(start["env"]).count(job.paths.enroot_config) == 0


# -- nothing of the image outlives the inspection --------------------------------------------


def image_sleepers(seconds: str) -> list[int]:
    """Processes running ``sleep SECONDS`` (the marker a test image starts)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", seconds.encode()]:
            found.append(int(entry.name))
    return found


@pytest.fixture
def sleepers() -> Iterator[Callable[[str], list[int]]]:
    yield image_sleepers
    for seconds in ("313", "317", "319"):
        for pid in image_sleepers(seconds):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_process_the_image_leaves_behind_is_killed_before_the_result_counts(
    make_job: JobFactory,
    attack_image: AttackImage,
    sleepers: Callable[[str], list[int]],
    inspection_path: str,
) -> None:
    # detached (setsid, no terminal, stdio elsewhere) and double-forked, like a daemon
    payload = (
        "setsid sh -c 'sleep 313 </dev/null >/dev/null 2>&1 &' </dev/null >/dev/null 2>&1; "
        "cd /tmp 2>/dev/null; setsid sleep 317 </dev/null >/dev/null 2>&1 &"
    )
    job = inspect(make_job, attack_image(payload))

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    assert sleepers("313") == []
    assert sleepers("317") == []
    assert job.leftover_scratch() == []


# -- the unpacked bytes are the hashed bytes -------------------------------------------------


def test_exchanging_a_parent_directory_during_create_unpacks_the_hashed_bytes_still(
    make_job: JobFactory, attack_image: AttackImage, standin: Standin, tmp_path: Path
) -> None:
    # Enroot reopens the image by path: with `current` exchanged for a directory holding image B
    # while it unpacks, and exchanged back before the job re-checks the file, the facts of B
    # would be bound to A's digest. The file's own identity never changes.
    shelf = tmp_path / "shelf"
    (shelf / "current").mkdir(parents=True)
    (shelf / "other").mkdir()
    image_a = attack_image('echo "image=A" >>"$out"')
    image_b = attack_image('echo "image=B" >>"$out"')
    source = shelf / "current" / "img.sqsh"
    image_a.rename(source)
    image_b.rename(shelf / "other" / "img.sqsh")
    swap = (
        f"mv {shelf}/current {shelf}/swap && mv {shelf}/other {shelf}/current"
        f" && mv {shelf}/swap {shelf}/other"
    )
    standin.configure(hooks={"create_before": swap, "create": swap})
    job = inspect(make_job, source)

    result = job.run()

    assert result.returncode == 0, result.stderr
    assert "image=A" in result_text(job)
    assert "image=B" not in result_text(job)
    assert (shelf / "current" / "img.sqsh").stat().st_ino == source.stat().st_ino
    assert job.leftover_scratch() == []


def test_a_process_that_chrooted_deeper_into_the_image_is_killed_too(
    make_job: JobFactory,
    attack_image: AttackImage,
    sleepers: Callable[[str], list[int]],
    inspection_path: str,
) -> None:
    def build(root: Path) -> None:
        jail = root / "jail" / "bin"
        jail.mkdir(parents=True)
        (jail / "busybox").hardlink_to(root / "bin" / "busybox")
        (jail / "sleep").symlink_to("busybox")

    payload = "setsid chroot /jail /bin/sleep 319 </dev/null >/dev/null 2>&1 &"
    job = inspect(make_job, attack_image(payload, build=build))

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    assert sleepers("319") == []


# -- root is no way out, and nothing of the image survives (README, Threat model) -------------

DOMAINNAME = Path("/proc/sys/kernel/domainname")
MARKER = "slurm-image-attack"
WRITE_DOMAINNAME = (
    f'if echo {MARKER} >{DOMAINNAME}; then echo "domainname=written" >>"$out"; '
    'else echo "domainname=denied" >>"$out"; fi'
)


@pytest.fixture
def domainname() -> Iterator[str]:
    """The host's kernel.domainname, restored whatever the test did to it."""
    need(os.geteuid() == 0, "the root job's case needs root (CI runs as root)")
    original = DOMAINNAME.read_text()
    try:
        yield original
    finally:
        DOMAINNAME.write_text(original)


@pytest.fixture
def survivor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The survivor helper, and no process of it left once the test is over."""
    yield build_survivor(tmp_path_factory.mktemp("survivor"))
    end_survivors()


def start_alone(
    tmp_path: Path, standin: Standin, image: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    """``image`` created and started by the stand-in alone, as root's job ran Enroot before it
    had a sandbox: ``enroot start --root``, the stock configuration, the image's python3 run as
    the rc runs it, its output to /dev/null."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ENROOT_DATA_PATH": str(tmp_path / "data"),
        "ENROOT_CACHE_PATH": str(tmp_path / "cache"),
        "ENROOT_RUNTIME_PATH": str(tmp_path / "runtime"),
        "ENROOT_CONFIG_PATH": str(tmp_path / "config"),
        "NVIDIA_VISIBLE_DEVICES": "void",
    }
    enroot = str(standin.bin / "enroot")
    subprocess.run([enroot, "create", "-n", "alone", str(image)], env=env, check=True)
    rc = tmp_path / "rc"
    rc.write_text('"$@"\n')
    python = ["/usr/bin/python3", "-I", "-B", "/inspect_image.py", "serving", "0" * 64]
    return subprocess.run(
        [enroot, "start", "--root", "--rc", str(rc), *options, "alone", *python, "/dev/null"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_under_the_stand_in_alone_root_s_image_rewrites_a_host_kernel_setting(
    tmp_path: Path, standin: Standin, attack_image: AttackImage, domainname: str
) -> None:
    """What Enroot 4.1.2 let root's image do: the container's root is host root, /proc is
    writable, and a sysctl checks the global root uid."""
    started = start_alone(tmp_path, standin, attack_image(WRITE_DOMAINNAME))

    assert started.returncode == 0, started.stderr
    assert DOMAINNAME.read_text().strip() == MARKER


def test_root_s_image_cannot_change_a_host_kernel_setting(
    make_job: JobFactory, attack_image: AttackImage, domainname: str, inspection_path: str
) -> None:
    payload = f'{WRITE_DOMAINNAME}; echo "uid=$(id -u)" >>"$out"'
    job = inspect(make_job, attack_image(payload))

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    assert DOMAINNAME.read_text() == domainname
    assert "domainname=denied" in result_text(job)
    assert "uid=0\n" in result_text(job)  # root inside: an unprivileged id outside


def leave_survivors(directory: str) -> str:
    """A payload leaving a zombie-leader survivor and a chroot("/proc") one, each writing into
    a file of ``directory`` (a shell expression) through a descriptor it opened first."""
    return (
        f'/bin/survivor zombie-leader "{directory}/ticks-zombie" && '
        f'/bin/survivor chroot-proc "{directory}/ticks-chroot"'
    )


def with_survivor(binary: Path) -> Build:
    def build(root: Path) -> None:
        shutil.copy2(binary, root / "bin" / "survivor")

    return build


def test_under_the_stand_in_alone_the_survivors_outlive_enroot_start(
    tmp_path: Path, standin: Standin, attack_image: AttackImage, survivor: Path,
    world_readable_tmp: Path,
) -> None:  # fmt: skip
    """The fixture of the test below: the two survivors are real, and outlive ``enroot
    start`` (Enroot makes no PID namespace), writing on."""
    ticks = host_directory(world_readable_tmp, "ticks")
    image = attack_image(leave_survivors("/ticks"), build=with_survivor(survivor))

    started = start_alone(tmp_path, standin, image, "-m", f"{ticks}:/ticks:x-create=dir,bind,rw")

    assert started.returncode == 0, started.stderr
    time.sleep(1)
    alive = survivors()
    assert len(alive) == 2, alive
    states = [Path(f"/proc/{pid}/status").read_text() for pid in alive]
    assert any("State:\tZ" in state and "Threads:\t2" in state for state in states), states
    sizes = {path.name: path.stat().st_size for path in ticks.iterdir()}
    time.sleep(0.5)
    assert all(path.stat().st_size > sizes[path.name] for path in ticks.iterdir())


def test_no_process_of_the_image_survives_the_job_whatever_its_leader_or_root(
    make_job: JobFactory, attack_image: AttackImage, survivor: Path, inspection_path: str
) -> None:
    image = attack_image(leave_survivors("${out%/*}"), build=with_survivor(survivor))
    job = inspect(make_job, image)

    result = run(job, inspection_path)

    assert result.returncode == 0, result.stderr
    output = Path(job.paths.output_dir)
    written = {path.name: path.read_bytes() for path in output.iterdir()}
    time.sleep(1)
    assert survivors() == []
    assert {path.name: path.read_bytes() for path in output.iterdir()} == written
    assert list(written) == ["inspection.json"]
    assert job.leftover_scratch() == []


def test_an_ordinary_user_s_job_sandboxes_the_image_as_that_user(
    make_job: JobFactory, attack_image: AttackImage, survivor: Path, world_readable_tmp: Path
) -> None:
    """The same job, run by a user who is not root: nothing in it assumes root."""
    need(os.geteuid() == 0, "switching to another user needs root (CI runs as root)")
    shelf = world_readable_tmp / "images"
    shelf.mkdir()
    source = attack_image(
        leave_survivors("${out%/*}") + '; echo "uid=$(id -u)" >>"$out"',
        build=with_survivor(survivor),
    ).rename(shelf / "attack.sqsh")
    job = inspect(make_job, source)
    for path in (job.workspace, job.scratch, shelf):
        subprocess.run(["chown", "-R", f"{ORDINARY_UID}:{ORDINARY_UID}", str(path)], check=True)
    spool = job.tmp / "spool"
    spool.mkdir(mode=0o755)
    script = spool / "slurm_script"
    script.write_text(job.script)
    script.chmod(0o555)

    result = subprocess.run(
        ["setpriv", f"--reuid={ORDINARY_UID}", f"--regid={ORDINARY_UID}", "--clear-groups",
         str(script)],
        cwd=job.job_dir, env=job.environment(USER="someone"), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert "uid=0\n" in result_text(job)
    assert Path(job.paths.result).stat().st_uid == ORDINARY_UID
    time.sleep(1)
    assert survivors() == []
    assert job.leftover_scratch() == []


def test_under_the_stand_in_alone_a_started_image_file_obeys_its_fstab_and_environment(
    tmp_path: Path, standin: Standin, attack_image: AttackImage, world_readable_tmp: Path
) -> None:
    """The fixture of the overlay path: `enroot start IMAGE.sqsh` mounts the image (squashfuse
    and fuse-overlayfs, as Enroot 4.1.2 does) and reads its etc/fstab and etc/environment from
    that root, as a directory start does; the job's overlay path above gives them nothing."""
    for tool in ("squashfuse", "fuse-overlayfs"):
        need(shutil.which(tool) is not None, f"{tool} missing (apt-get install {tool})")
    outside = host_directory(world_readable_tmp, "outside")

    def build(root: Path) -> None:
        (root / "etc" / "fstab").write_text(f"{outside} /mnt/outside none x-create=dir,bind,rw\n")

    image = attack_image(
        "echo planted >/mnt/outside/planted", environment=("FROM_IMAGE=yes",), build=build
    )
    runtime = tmp_path / "runtime"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ENROOT_DATA_PATH": str(tmp_path / "data"),
        "ENROOT_CACHE_PATH": str(tmp_path / "cache"),
        "ENROOT_RUNTIME_PATH": str(runtime),
        "ENROOT_CONFIG_PATH": str(tmp_path / "config"),
        "NVIDIA_VISIBLE_DEVICES": "void",
    }
    rc = tmp_path / "rc"
    rc.write_text('"$@"\n')
    python = ["/usr/bin/python3", "-I", "-B", "/inspect_image.py", "serving", "0" * 64]
    started = subprocess.run(
        [str(standin.bin / "enroot"), "start", "--root", "--rc", str(rc), str(image), *python,
         "/mnt/outside/result"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert started.returncode == 0, started.stderr
    assert (outside / "planted").read_text() == "planted\n"
    assert "FROM_IMAGE=yes" in (outside / "result").read_text().splitlines()
    assert "create" not in standin.commands()
    assert str(runtime) not in Path("/proc/self/mountinfo").read_text()
    deadline = time.monotonic() + 10
    while (daemons := processes_naming(image)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the orphaned FUSE daemons end on their SIGHUP
    assert daemons == []


def processes_naming(path: Path) -> list[int]:
    """Live processes with ``path`` among their arguments."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if os.fsencode(path) in (entry / "cmdline").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found

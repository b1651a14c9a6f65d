"""The doctor's batch script under bash, as slurmd runs it, with the Enroot stand-in on its
``job_path``: the same isolation as a lifecycle's job, and the report the login node reads."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest
from harness import (
    ORDINARY_UID,
    Standin,
    as_user_with_fuse,
    binfmt_handler,
    fake_binfmt_misc,
    install_failing_rm,
    need,
    path_without,
    point_at_binfmt_misc,
)

from slurm_image.domain.architecture import ARCHITECTURES
from slurm_image.domain.doctor_script import (
    DoctorJob,
    doctor_job,
    parse_report,
    render_doctor_script,
)
from slurm_image.domain.profile import parse_profile
from support import profile_data

DOCTOR_ID = "doctor-0123456789abcdef"


def run_doctor_job(
    tmp_path: Path,
    standin: Standin,
    binfmt: Path | None = None,
    *,
    system_path: str = "/usr/bin:/bin",
    as_user: bool = False,
    **image_build: str,
) -> tuple[DoctorJob, str]:
    if as_user:
        scratch = tmp_path / "user-scratch"
        scratch.mkdir(mode=0o700)
        os.chown(scratch, ORDINARY_UID, ORDINARY_UID)
        image_build.setdefault("local_scratch", str(scratch))
    data = profile_data(job_path=f"{standin.bin}:{system_path}", **image_build)
    data["workspace_root"] = str(tmp_path / "ws")
    profile = parse_profile(data)
    job = doctor_job(profile, DOCTOR_ID)
    Path(job.job_dir).mkdir(parents=True, mode=0o700)
    spool = tmp_path / "spool" / "slurm_script"
    spool.parent.mkdir()
    script = render_doctor_script(job, profile)
    spool.write_text(script if binfmt is None else point_at_binfmt_misc(script, binfmt))
    spool.chmod(0o500)
    command = [str(spool)]
    if as_user:
        spool.chmod(0o555)
        spool.parent.chmod(0o755)
        subprocess.run(["chown", "-R", f"{ORDINARY_UID}:{ORDINARY_UID}", data["workspace_root"]])
        command = as_user_with_fuse(tmp_path, command)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_IMAGE_PROFILE": "/elsewhere.toml",
        "LEAK": "from the submitting shell",
        "TMPDIR": str(tmp_path),
    }
    done = subprocess.run(
        command,
        cwd=job.job_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "command not found" not in done.stderr  # every function its trap calls is defined
    return job, done.stdout


def test_the_doctor_job_runs_enroot_in_the_real_jobs_isolation(
    tmp_path: Path, standin: Standin
) -> None:
    standin.configure(version="4.0.3")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    job, stdout = run_doctor_job(tmp_path, standin, local_scratch=str(scratch))
    report = parse_report(stdout)
    assert report.enroot_version == "4.0.3"
    assert report.enroot == str(standin.bin / "enroot")
    assert (report.node, report.scratch) == (os.uname().nodename, str(scratch))
    assert report.scratch_free_bytes is not None and report.scratch_free_bytes > 0
    assert report.scratch_filesystem
    for tool in ("mksquashfs", "unsquashfs", "tar2sqfs", "python3"):
        assert getattr(report, tool) == (shutil.which(tool, path="/usr/bin:/bin") or "")

    (call,) = standin.calls()
    assert call["argv"][:1] == ["version"]
    environment = call["env"]
    assert environment["PATH"] == f"{standin.bin}:/usr/bin:/bin"
    assert environment["HOME"] == job.home
    assert environment["ENROOT_CONFIG_PATH"] == job.enroot_config
    for key in ("ENROOT_CACHE_PATH", "ENROOT_DATA_PATH", "ENROOT_TEMP_PATH"):
        assert environment[key].startswith(f"{scratch}/slurm-image-42.")
    assert "LEAK" not in environment
    assert not any(key.startswith("SLURM_IMAGE_") for key in environment)
    assert list(scratch.iterdir()) == []  # the job's scratch is gone when it ends


def test_without_local_scratch_the_doctor_job_uses_the_nodes_tmpdir(
    tmp_path: Path, standin: Standin
) -> None:
    _, stdout = run_doctor_job(tmp_path, standin)
    assert parse_report(stdout).scratch == str(tmp_path)


def test_the_doctor_job_reports_the_sandbox_the_image_gets(
    world_readable_tmp: Path, standin: Standin
) -> None:
    scratch = world_readable_tmp / "scratch"
    scratch.mkdir()
    _, stdout = run_doctor_job(world_readable_tmp, standin, local_scratch=str(scratch))
    report = parse_report(stdout)
    assert report.sandbox == "ok"
    assert report.job_uid == str(os.geteuid())
    # root's job runs the image as the unprivileged id; anyone else's as themselves
    assert report.sandbox_uid == ("65534" if os.geteuid() == 0 else str(os.geteuid()))


def test_the_doctor_job_names_a_scratch_the_sandbox_cannot_reach(
    world_readable_tmp: Path, standin: Standin
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root's job runs the image as another id")
    private = world_readable_tmp / "private"
    private.mkdir(mode=0o700)
    scratch = private / "scratch"
    scratch.mkdir()
    _, stdout = run_doctor_job(world_readable_tmp, standin, local_scratch=str(scratch))
    report = parse_report(stdout)
    assert report.sandbox.startswith(f"uid 65534 cannot walk to the scratch {scratch}/")


def test_the_doctor_job_reports_the_nodes_architecture_and_what_else_it_runs(
    tmp_path: Path, standin: Standin
) -> None:
    native = platform.machine()
    runs, without_f, *_ = [name for name in ARCHITECTURES if name != native]
    binfmt = fake_binfmt_misc(
        tmp_path / "binfmt_misc",
        good=binfmt_handler(runs),
        no_f=binfmt_handler(without_f, flags="P"),
    )
    _, stdout = run_doctor_job(tmp_path, standin, binfmt)
    report = parse_report(stdout)
    assert report.architecture == native
    assert report.runs_architectures == (runs,)
    assert report.foreign[without_f].endswith(
        "no_f has no flag F (its interpreter would be looked up in the image)"
    )


def test_the_doctor_job_reads_the_kernels_binfmt_misc_by_default(
    tmp_path: Path, standin: Standin
) -> None:
    _, stdout = run_doctor_job(tmp_path, standin)
    report = parse_report(stdout)
    assert report.architecture == platform.machine()
    assert set(report.foreign) == set(ARCHITECTURES) - {platform.machine()}
    mounted = Path("/proc/sys/fs/binfmt_misc/status").is_file()
    for verdict in report.foreign.values():
        assert verdict == "ok" or ("not mounted" in verdict) != mounted


# -- which inspection path the node gives this user's jobs (the job's own rule) ----------------


def test_root_s_doctor_job_reports_the_unpack_path(
    world_readable_tmp: Path, standin: Standin
) -> None:
    need(os.geteuid() == 0, "the root job's case needs root (CI runs as root)")
    _, stdout = run_doctor_job(world_readable_tmp, standin)

    assert parse_report(stdout).inspection_path == (
        "unpacked: root's job (its FUSE daemons would run as host root)"
    )


def test_an_ordinary_user_s_doctor_job_reports_the_overlay_path(
    world_readable_tmp: Path, standin: Standin
) -> None:
    _, stdout = run_doctor_job(world_readable_tmp, standin, as_user=True)

    assert parse_report(stdout).inspection_path == "overlay: fuse-overlayfs"


@pytest.mark.parametrize("as_user", [False, True], ids=["root", "ordinary-user"])
def test_the_doctor_job_removes_a_scratch_holding_a_mode_0_directory_and_says_so(
    world_readable_tmp: Path, standin: Standin, as_user: bool
) -> None:
    # the job plants what Enroot and fuse-overlayfs leave in a real job's scratch
    _, stdout = run_doctor_job(world_readable_tmp, standin, as_user=as_user)

    report = parse_report(stdout)
    assert report.scratch_removed == "ok"
    assert list(Path(report.scratch).glob("slurm-image-42.*")) == []


def test_the_doctor_job_reports_a_scratch_it_could_not_remove(
    world_readable_tmp: Path, standin: Standin
) -> None:
    # a node whose rm cannot remove the scratch (first on job_path)
    install_failing_rm(standin.bin, "slurm-image-42.")

    _, stdout = run_doctor_job(world_readable_tmp, standin, as_user=True)

    report = parse_report(stdout)
    assert report.scratch_removed.startswith("no: ")
    assert report.scratch_removed.endswith(" entries left")


def test_the_doctor_job_reports_a_node_without_tar2sqfs(
    tmp_path: Path, world_readable_tmp: Path, standin: Standin
) -> None:
    need(shutil.which("tar2sqfs", path="/usr/bin:/bin") is not None, "tar2sqfs missing")
    system = path_without(world_readable_tmp / "bin", "tar2sqfs")
    _, stdout = run_doctor_job(tmp_path, standin, system_path=system)
    report = parse_report(stdout)
    assert report.tar2sqfs == ""
    assert report.python3 == f"{system}/python3"

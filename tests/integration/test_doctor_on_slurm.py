"""``slurm-image doctor`` against the local cluster, through each real submitter.

The compute node has no Enroot: the stand-in (tests/fixtures/enroot/enroot) is put first on the
profile's ``job_path``, set to report a version of its own, so the version the doctor prints can
only have come from the job on the node.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support import install_enroot_standin, run_cli

pytestmark = pytest.mark.slurm

KINDS = ["sbatch", "rest-tcp", "rest-unix"]


def _site(tmp_path: Path, kind: str, local: Any, *, job_path: str, **build: str) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    tmp_path.chmod(0o755)
    values = {
        "partition": '"build"',
        "cpus_per_task": "1",
        "memory": '"200M"',
        "time_limit": '"0:05:00"',
        "job_path": f'"{job_path}"',
        **build,
    }
    profile = tmp_path / "site.toml"
    profile.write_text(
        f'workspace_root = "{workspace}"\n[image_build]\n'
        + "".join(f"{key} = {value}\n" for key, value in values.items())
        + local.submitter_table(kind)
    )
    return profile


def _standin(walkable: Path, version: str) -> str:
    """The stand-in where a root job's sandbox id can run it too."""
    bin_dir = install_enroot_standin(walkable / "bin", {"version": version})
    return f"{bin_dir}:/usr/bin:/bin"


def _doctor(profile: Path, local: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"SLURM_CONF": local.slurm_conf, "HOME": str(profile.parent)}
    return run_cli(
        *("--profile", str(profile), "doctor", "--timeout", "120", *args),
        cwd=profile.parent,
        env=env,
        inherit=False,
        timeout=300,
    )


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_doctor_reports_the_compute_nodes_enroot_and_the_submitters_reachability(
    tmp_path: Path, world_readable_tmp: Path, kind: str, local_slurm: Any
) -> None:
    profile = _site(tmp_path, kind, local_slurm, job_path=_standin(world_readable_tmp, "4.0.7"))
    done = _doctor(profile, local_slurm, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    checks = {check["name"]: check for check in report["checks"]}
    assert all(check["ok"] for check in report["checks"]), report
    assert report["enroot_version"] == "4.0.7"
    assert checks["enroot"]["detail"].startswith(f"Enroot 4.0.7 at {world_readable_tmp}/bin/enroot")
    assert "UP" in checks["submitter"]["detail"]
    assert checks["submitter"]["detail"].startswith("sbatch:" if kind == "sbatch" else "rest:")
    assert str(profile) in checks["profile"]["detail"]
    assert "/usr/bin/mksquashfs" in checks["squashfs_tools"]["detail"]
    assert "GiB free" in checks["local_scratch"]["detail"]
    runs_as = "uid 65534, never as root" if os.geteuid() == 0 else "that uid"
    assert f"the image runs as {runs_as}" in checks["sandbox"]["detail"]
    if os.geteuid() == 0:  # the local cluster runs the user's jobs as that user
        assert checks["inspection_path"]["detail"] == (
            "unpacked copy: root's job (its FUSE daemons would run as host root)"
        )
    assert report["architecture"] == platform.machine()  # the local cluster's nodes are this host
    job = local_slurm.show_job(report["job_id"])
    assert (job["Partition"], job["JobState"]) == ("build", "COMPLETED")
    assert job["Comment"].startswith("slurm-image:doctor-")
    assert not (tmp_path / "ws" / "images" / ".tmp" / "doctor" / job["Comment"][12:]).exists()


def test_doctor_one_line_per_check_and_exit_4_without_enroot_on_the_node(
    tmp_path: Path, kind: str, local_slurm: Any
) -> None:
    profile = _site(tmp_path, kind, local_slurm, job_path="/usr/bin:/bin")
    done = _doctor(profile, local_slurm)
    assert done.returncode == 4, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines] == [
        "profile",
        "submitter",
        "partition",
        "workspace",
        "layer_cache",
        "stable_paths",
        "job",
        "enroot",
        "squashfs_tools",
        "importer",
        "local_scratch",
        "sandbox",
        "inspection_path",
        "architecture",
    ]
    assert [line.split()[0] for line in lines] == (
        ["ok"] * 7 + ["FAIL", "ok", "ok", "ok", "FAIL", "ok", "ok"]
    )
    assert "no alias is published for you to see yet" in lines[5]
    assert "enroot version printed nothing (job_path /usr/bin:/bin)" in lines[7]
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("build", "words"),
    [
        ({"partition": '"nosuchpart"'}, "nosuchpart: the scheduler has no such partition"),
        ({"cpus_per_task": "64"}, "cpus_per_task 64 exceeds the node limit of 2"),
    ],
)
def test_doctor_exits_3_when_the_partition_cannot_take_the_profile(
    tmp_path: Path, kind: str, local_slurm: Any, build: dict[str, str], words: str
) -> None:
    profile = _site(tmp_path, kind, local_slurm, job_path="/usr/bin:/bin", **build)
    done = _doctor(profile, local_slurm)
    assert done.returncode == 3, done.stdout + done.stderr
    partition = next(line for line in done.stdout.splitlines() if " partition " in line)
    assert partition.startswith("FAIL") and words in partition
    job = next(line for line in done.stdout.splitlines() if " job " in line)
    assert job.startswith("FAIL") and "not run" in job  # nothing was submitted


def _submitter_line(done: subprocess.CompletedProcess[str]) -> str:
    return next(line for line in done.stdout.splitlines() if line.split()[1:2] == ["submitter"])


@pytest.mark.full_only
def test_doctor_tells_a_refused_token_from_a_controller_that_is_down(
    tmp_path: Path, local_slurm: Any
) -> None:
    # Stops the cluster's controller for a while: see docs/local-slurm.md, "Several test runs".
    bad = tmp_path / "bad-token"
    bad.write_text("eyJhbGciOiJIUzI1NiJ9.e30.not-a-valid-signature\n")
    bad.chmod(0o600)
    profile = _site(tmp_path, "rest-tcp", local_slurm, job_path="/usr/bin:/bin")
    good = profile.read_text()
    profile.write_text(good.replace(local_slurm.token_file, str(bad)))
    refused = _doctor(profile, local_slurm)
    profile.write_text(good)
    local_slurm.run("controller", "stop")
    try:
        down = _doctor(profile, local_slurm)
    finally:
        local_slurm.run("controller", "start")
    assert (refused.returncode, down.returncode) == (3, 3), refused.stdout + down.stdout
    said_refused, said_down = _submitter_line(refused), _submitter_line(down)
    assert said_refused.startswith("FAIL") and said_down.startswith("FAIL")
    assert "credentials:" not in said_down
    assert "controller:" in said_down
    if local_slurm.series == "22.05":
        # slurmrestd 22.05 answers a refused token on every read as it answers a controller
        # that is down (-1): the doctor names both causes (docs/slurm.md, "Errors").
        assert "when the token is refused" in said_refused
    else:
        assert "rest: credentials: ping: HTTP 511" in said_refused
        # the ping's own report (the controller DOWN) or slurmrestd's 1800 (connect failure)
        assert "DOWN" in said_down or "1800" in said_down

"""The CLI against the local cluster, through each real submitter: plain ``import`` lands in the
profile's partition with its limits, ``status`` reports the job's own exit code, ``cancel``
works, and a partition the cluster lacks exits 3 naming it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support import install_enroot_standin, run_cli

pytestmark = pytest.mark.slurm

SOURCE = "registry.example.org/team/app:1.0@sha256:" + "c" * 64
KINDS = ["sbatch", "rest-tcp", "rest-unix"]


class Site:
    def __init__(self, base: Path, kind: str, local: Any, job_path: str, partition: str) -> None:
        self.base = base
        self.workspace = base / "ws"
        self.workspace.mkdir()
        self.local = local
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            f'partition = "{partition}"\ncpus_per_task = 1\nmemory = "200M"\n'
            f'time_limit = "0:05:00"\njob_path = "{job_path}"\n' + local.submitter_table(kind)
        )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"SLURM_CONF": self.local.slurm_conf, "HOME": str(self.base)}
        return run_cli(*args, cwd=self.base, env=env, inherit=False, timeout=120)

    def json(self, *args: str) -> dict[str, Any]:
        result = self.run(*args, "--json")
        assert result.returncode == 0, result.stderr
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    def status(self, lifecycle_id: str) -> dict[str, Any]:
        lifecycles: list[dict[str, Any]] = self.json("status", lifecycle_id)["lifecycles"]
        return lifecycles[0]

    def wait_for(
        self, lifecycle_id: str, states: set[str], timeout_s: float = 90
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.status(lifecycle_id)
            if status["state"] in states or time.monotonic() > deadline:
                return status
            time.sleep(0.5)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_import_lands_with_the_profile_limits_and_status_reports_the_jobs_exit(
    tmp_path: Path, kind: str, local_slurm: Any
) -> None:
    # No Enroot on this node: the job must stop at its version gate with exit 78.
    site = Site(tmp_path, kind, local_slurm, job_path="/usr/bin:/bin", partition="build")
    submitted = site.json("import", SOURCE, "--name", "app", "--role", "client")
    lifecycle_id, job_id = submitted["lifecycle_id"], submitted["job_id"]
    assert submitted["state"] == "SUBMITTED"

    job = local_slurm.show_job(job_id)
    job_dir = f"{site.workspace}/images/.tmp/jobs/{lifecycle_id}"
    assert job["Partition"] == "build"
    assert job["JobName"] == "slurm-image-client"
    assert job["TimeLimit"] == "00:05:00"
    assert job["MinMemoryNode"] == "200M"
    assert job["Comment"] == f"slurm-image:{lifecycle_id}"
    assert job["WorkDir"] == job_dir
    assert job["StdOut"] == f"{job_dir}/slurm-{job_id}.out"

    status = site.wait_for(lifecycle_id, {"FAILED", "COMPLETED"})
    assert (status["job_id"], status["state"], status["exit_code"]) == (job_id, "FAILED", 78)
    assert "Enroot" in status["reason"]
    log = Path(f"{job_dir}/slurm-{job_id}.err").read_text()
    assert "enroot version failed" in log


def test_cancel_stops_a_running_job(tmp_path: Path, kind: str, local_slurm: Any) -> None:
    standin = tmp_path / "bin"
    standin.mkdir()
    (standin / "enroot").write_text("#!/bin/sh\nexec sleep 300\n")
    (standin / "enroot").chmod(0o755)
    site = Site(tmp_path, kind, local_slurm, job_path=f"{standin}:/usr/bin:/bin", partition="build")
    lifecycle_id = site.json("import", SOURCE, "--name", "app", "--role", "client")["lifecycle_id"]
    assert site.wait_for(lifecycle_id, {"RUNNING"})["state"] == "RUNNING"

    cancelled = site.json("cancel", lifecycle_id)
    assert cancelled["lifecycle_id"] == lifecycle_id
    assert site.wait_for(lifecycle_id, {"CANCELLED"})["state"] == "CANCELLED"


def test_a_partition_the_cluster_lacks_exits_3_naming_it(
    tmp_path: Path, kind: str, local_slurm: Any
) -> None:
    site = Site(tmp_path, kind, local_slurm, job_path="/usr/bin:/bin", partition="nosuchpart")
    result = site.run("import", SOURCE, "--name", "app", "--role", "client")
    assert result.returncode == 3, result.stderr
    assert "nosuchpart" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_status_of_a_staged_lifecycle_asks_the_scheduler_nothing(
    tmp_path: Path, local_slurm: Any
) -> None:
    site = Site(tmp_path, "sbatch", local_slurm, job_path="/usr/bin:/bin", partition="build")
    staged = site.json("import", SOURCE, "--name", "app", "--role", "client", "--no-submit")
    status = site.status(staged["lifecycle_id"])
    assert (status["state"], status["job_id"]) == ("STAGED", None)


TEST_IMAGES = Path(
    os.environ.get(
        "SLURM_IMAGE_TEST_IMAGES",
        Path.home() / ".cache" / "slurm-image" / "test-images" / "images.json",
    )
)


@pytest.mark.full_only
def test_an_import_completes_on_the_node_with_the_enroot_standin(
    tmp_path: Path, world_readable_tmp: Path, local_slurm: Any
) -> None:
    # The workspace and the stand-in are the same files on this host and on the node (on
    # Slurm 24.11 the node is a chroot with these paths bound: docs/local-slurm.md).
    if not TEST_IMAGES.is_file():
        message = (
            f"no test images at {TEST_IMAGES} (scripts/local-registry up && scripts/test-images)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    reference = json.loads(TEST_IMAGES.read_text())["client"]
    tmp_path.chmod(0o755)
    standin = install_enroot_standin(world_readable_tmp / "bin")
    site = Site(
        tmp_path, "sbatch", local_slurm, job_path=f"{standin}:/usr/bin:/bin", partition="build"
    )
    profile = tmp_path / "slurm-image.toml"
    profile.write_text(
        profile.read_text().replace(
            "[submitter]", '[enroot]\nenvironment = { ENROOT_ALLOW_HTTP = "yes" }\n[submitter]'
        )
    )
    lifecycle_id = site.json("import", reference, "--name", "app", "--role", "client")[
        "lifecycle_id"
    ]
    status = site.wait_for(lifecycle_id, {"COMPLETED", "FAILED", "CANCELLED"}, timeout_s=240)
    job_dir = site.workspace / "images" / ".tmp" / "jobs" / lifecycle_id
    assert (status["state"], status["exit_code"]) == ("COMPLETED", 0), status
    assert (job_dir / "candidate.sqsh").stat().st_size > 0
    record = json.loads((job_dir / "output" / "inspection.json").read_text())
    assert record["facts"]["python"]

"""The REST submitter against every OpenAPI version each local slurmrestd serves, and ``auto``.

Slurm 22.05 serves v0.0.38; Slurm 24.11 serves v0.0.40, v0.0.41 and v0.0.42; Slurm 26.05 serves
v0.0.42 to v0.0.45 (docs/local-slurm.md).
For each: the real rendered job (``slurm-image import``) lands with the profile's limits and its
exit code is read back, a job is found by its marker exactly once, cancel works (and names an
unknown job), a job's start and end times are read, and an unknown partition and a refused
token are the errors they should be.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_cli_on_slurm import SOURCE, Site

from clusters import Cluster, cluster
from slurm_image.adapters.slurmrest import RestSubmitter
from slurm_image.domain.job import JobSpec, JobState, JobStatus
from slurm_image.ports.submitter import SchedulerAuthError, SchedulerRejected, UnknownJob
from slurm_image.submitters import RetryPolicy

pytestmark = pytest.mark.slurm

FAST = RetryPolicy.immediate(attempts=2)
SERVED = {
    "22.05": ("v0.0.38",),
    "24.11": ("v0.0.40", "v0.0.41", "v0.0.42"),
    "26.05": ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"),
}
CASES = [
    (series, version) for series, versions in SERVED.items() for version in (*versions, "auto")
]


@pytest.fixture(params=CASES, ids=[f"slurm-{s}-{v}" for s, v in CASES])
def served(request: pytest.FixtureRequest) -> tuple[Cluster, str]:
    series, version = request.param
    local = cluster(series)
    assert local.rest_versions == SERVED[series], "the versions slurmrestd serves changed"
    return local, version


def _submitter(local: Cluster, version: str, token_file: str | None = None) -> RestSubmitter:
    return RestSubmitter(
        url=local.rest_url,
        user=local.rest_user,
        token_file=token_file or local.token_file,
        api_version=version,
        retry_policy=FAST,
    )


def _spec(workdir: Path, **changes: Any) -> JobSpec:
    values: dict[str, Any] = {
        "name": "slurm-image-client",
        "partition": "build",
        "cpus_per_task": 1,
        "memory": "100M",
        "time_limit": "0:03:00",
        "working_directory": str(workdir),
        "standard_output": str(workdir / "slurm-%j.out"),
        "standard_error": str(workdir / "slurm-%j.err"),
        "comment": f"slurm-image:img-{uuid.uuid4().hex}",
    }
    values.update(changes)
    return JobSpec.model_validate(values)


def _wait(submitter: RestSubmitter, job_id: str, until: set[JobState]) -> JobStatus:
    deadline = time.monotonic() + 60
    while True:
        status = submitter.states([job_id]).get(job_id)
        assert status is not None, f"job {job_id} vanished"
        if status.state in until or time.monotonic() > deadline:
            return status
        time.sleep(0.3)


def test_the_rendered_job_lands_and_reports_its_exit_code(
    served: tuple[Cluster, str], tmp_path: Path
) -> None:
    local, version = served
    site = Site(tmp_path, "rest-tcp", local, job_path="/usr/bin:/bin", partition="build")
    profile = tmp_path / "slurm-image.toml"
    profile.write_text(
        profile.read_text().replace('api_version = "auto"', f'api_version = "{version}"')
    )
    submitted = site.json("import", SOURCE, "--name", "app", "--role", "client")
    lifecycle_id, job_id = submitted["lifecycle_id"], submitted["job_id"]
    job = local.show_job(job_id)
    assert (job["Partition"], job["TimeLimit"], job["MinMemoryNode"]) == (
        "build",
        "00:05:00",
        "200M",
    )
    assert job["Comment"] == f"slurm-image:{lifecycle_id}"
    # No Enroot on the node: the job stops at its version gate with exit 78.
    status = site.wait_for(lifecycle_id, {"FAILED", "COMPLETED"})
    assert (status["state"], status["exit_code"]) == ("FAILED", 78)


def test_marker_lookup_states_and_cancel(served: tuple[Cluster, str], tmp_path: Path) -> None:
    local, version = served
    tmp_path.chmod(0o755)
    submitter = _submitter(local, version)
    expected = local.rest_versions[-1] if version == "auto" else version
    spec = _spec(tmp_path)
    assert submitter.find_by_marker(spec.comment) is None
    job_id = submitter.submit(b"#!/bin/bash -p\nsleep 120\n", spec)
    assert submitter.api_version == expected
    assert submitter.find_by_marker(spec.comment) == job_id
    assert local.jobs_with_comment(spec.comment) == [job_id]
    running = _wait(submitter, job_id, {JobState.RUNNING})
    assert running.state is JobState.RUNNING
    assert running.started_at is not None and running.ended_at is None  # its end is a limit

    submitter.cancel(job_id)
    cancelled = _wait(submitter, job_id, {JobState.CANCELLED})
    assert cancelled.state is JobState.CANCELLED
    assert cancelled.started_at == running.started_at
    assert cancelled.ended_at is not None and cancelled.ended_at >= running.started_at
    submitter.cancel(job_id)  # cancelling a finished job is harmless
    # 999999: never reached here; v0.0.40/41 answer its cancel 200 and the adapter looks it up.
    # 4294967295: an id Slurm reserves (24.11 answers 422).
    for unknown in ("999999", "4294967295"):
        with pytest.raises(UnknownJob):
            submitter.cancel(unknown)
    assert submitter.states(["4294967295"]) == {}

    failed_spec = _spec(tmp_path)
    failed = submitter.submit(b"#!/bin/bash -p\nexit 3\n", failed_spec)
    status = _wait(submitter, failed, {JobState.FAILED, JobState.COMPLETED})
    assert (status.state, status.exit_code) == (JobState.FAILED, 3)
    assert status.run_seconds is not None and status.run_seconds >= 0  # every version's times
    killed = submitter.submit(b"#!/bin/bash -p\nkill -9 $$\n", _spec(tmp_path))
    assert _wait(submitter, killed, {JobState.FAILED}).exit_code == 128 + 9


def test_an_unknown_partition_and_a_refused_token(
    served: tuple[Cluster, str], tmp_path: Path
) -> None:
    local, version = served
    tmp_path.chmod(0o755)
    spec = _spec(tmp_path, partition="nosuchpart")
    with pytest.raises(SchedulerRejected) as refused:
        _submitter(local, version).submit(b"#!/bin/bash -p\ntrue\n", spec)
    assert refused.value.field == "partition"
    assert "nosuchpart" in str(refused.value)
    assert local.jobs_with_comment(spec.comment) == []

    bad = tmp_path / "bad-token"
    bad.write_text("eyJhbGciOiJIUzI1NiJ9.e30.not-a-valid-signature\n")
    bad.chmod(0o600)
    spec = _spec(tmp_path)
    with pytest.raises(SchedulerAuthError):
        _submitter(local, version, str(bad)).submit(b"#!/bin/bash -p\ntrue\n", spec)
    assert local.jobs_with_comment(spec.comment) == []


@pytest.mark.parametrize("series", SERVED, ids=[f"slurm-{s}" for s in SERVED])
def test_auto_over_the_unix_socket_picks_the_newest_served_version(
    series: str, tmp_path: Path
) -> None:
    local = cluster(series)
    submitter = RestSubmitter(url=f"unix://{local.rest_socket}", retry_policy=FAST)
    tmp_path.chmod(0o755)
    job_id = submitter.submit(b"#!/bin/bash -p\nexit 4\n", _spec(tmp_path))
    assert submitter.api_version == SERVED[series][-1]
    status = _wait(submitter, job_id, {JobState.FAILED, JobState.COMPLETED})
    assert (status.state, status.exit_code) == (JobState.FAILED, 4)

"""The BatchSubmitter contract, run against every adapter: fake, sbatch, rest-tcp, rest-unix.

The real adapters run against every local cluster (``scripts/local-slurm [--slurm 24.11] up``:
Slurm 22.05 and 24.11, each with its own slurmrestd), whose partitions
are ``cpu`` (default) and ``build``; every job here goes to ``build`` so a spec's partition is
seen to be honoured.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clusters import CLUSTERS, cluster
from slurm_image.adapters.memory import FakeSubmitter
from slurm_image.adapters.retry import RetryPolicy
from slurm_image.adapters.sbatch import SbatchSubmitter
from slurm_image.adapters.slurmrest import RestSubmitter
from slurm_image.domain.job import JobSpec, JobState, JobStatus
from slurm_image.domain.partition import fit_problems
from slurm_image.ports.submitter import (
    BatchSubmitter,
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnknownJob,
)


def live(*kinds: str) -> list[Any]:
    """``kind@series`` of each real adapter against every local cluster (tests/clusters.py)."""
    return [
        pytest.param(f"{kind}@{series}", marks=pytest.mark.slurm, id=f"{kind}-slurm-{series}")
        for kind in kinds
        for series in CLUSTERS
    ]


KINDS = ["fake", *live("sbatch", "rest-tcp", "rest-unix")]
FAST = RetryPolicy.immediate(attempts=2)


def script(body: str) -> bytes:
    return f"#!/bin/bash -p\n{body}\n".encode()


@dataclass
class Harness:
    """One adapter under test, plus what the test needs to drive or inspect its scheduler."""

    kind: str
    make: Callable[..., BatchSubmitter]
    """Build the adapter; keyword ``broken_auth=True`` gives it credentials that are refused."""
    workdir: Path
    local: object | None = None
    fake: FakeSubmitter | None = None
    submitter: BatchSubmitter = field(init=False)

    def __post_init__(self) -> None:
        self.submitter = self.make()

    def spec(self, **changes: object) -> JobSpec:
        values: dict[str, object] = {
            "name": "slurm-image-client",
            "partition": "build",
            "cpus_per_task": 2,
            "memory": "200M",
            "time_limit": "0:05:00",
            "working_directory": str(self.workdir),
            "standard_output": str(self.workdir / "slurm-%j.out"),
            "standard_error": str(self.workdir / "slurm-%j.err"),
            "comment": f"slurm-image:img-{uuid.uuid4().hex}",
        }
        values.update(changes)
        return JobSpec.model_validate(values)

    def finish(self, job_id: str, exit_code: int) -> None:
        """Fake only: play the job to its end (real jobs end by themselves)."""
        if self.fake is not None:
            self.fake.start(job_id)
            self.fake.finish(job_id, exit_code)

    def wait_terminal(self, job_id: str, timeout_s: float = 60) -> tuple[JobStatus, set[JobState]]:
        seen: set[JobState] = set()
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.submitter.states([job_id]).get(job_id)
            assert status is not None, f"job {job_id} vanished"
            seen.add(status.state)
            if status.state.is_terminal or time.monotonic() > deadline:
                return status, seen
            time.sleep(0.3)


@pytest.fixture(params=KINDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    kind, _, series = str(request.param).partition("@")
    if kind == "fake":
        fake = FakeSubmitter(partitions={"cpu", "build"}, max_cpus_per_task=2, retry_policy=FAST)
        yield Harness(kind, lambda **_: fake, tmp_path, fake=fake)
        return
    local = cluster(series)
    tmp_path.chmod(0o755)

    def make(broken_auth: bool = False, retry: RetryPolicy = FAST) -> BatchSubmitter:
        if kind == "sbatch":
            return SbatchSubmitter(
                sbatch=local.sbatch,
                timeout_s=30,
                retry_policy=retry,
                environ={"SLURM_CONF": local.slurm_conf},
            )
        if kind == "rest-tcp":
            token_file = local.token_file
            if broken_auth:
                bad = tmp_path / "bad-token"
                bad.write_text("eyJhbGciOiJIUzI1NiJ9.e30.not-a-valid-signature\n")
                bad.chmod(0o600)  # a private file, so the server is what refuses it
                token_file = str(bad)
            return RestSubmitter(
                url=local.rest_url,
                user=local.rest_user,
                token_file=token_file,
                retry_policy=retry,
            )
        return RestSubmitter(url=f"unix://{local.rest_socket}", retry_policy=retry)

    yield Harness(kind, make, tmp_path, local=local)


def test_submitter_satisfies_the_port(harness: Harness) -> None:
    assert isinstance(harness.submitter, BatchSubmitter)
    assert harness.submitter.name in {"fake", "sbatch", "rest"}


def test_job_lands_with_every_value_of_the_spec(harness: Harness) -> None:
    spec = harness.spec()
    payload = script("echo landed")
    job_id = harness.submitter.submit(payload, spec)
    assert job_id.isdigit()
    if harness.fake is not None:
        assert harness.fake.job(job_id).script == payload
        assert harness.fake.job(job_id).spec == spec
        return
    job = harness.local.show_job(job_id)  # type: ignore[attr-defined]
    assert job["Partition"] == "build"
    assert job["NumCPUs"] == "2"
    assert job["MinMemoryNode"] == "200M"
    assert job["TimeLimit"] == "00:05:00"
    assert job["JobName"] == "slurm-image-client"
    assert job["WorkDir"] == str(harness.workdir)
    assert job["StdOut"] == str(harness.workdir / f"slurm-{job_id}.out")
    assert job["StdErr"] == str(harness.workdir / f"slurm-{job_id}.err")
    assert job["Comment"] == spec.comment
    assert job["NumNodes"] in {"1", "1-1"}  # a pending job shows the requested range
    assert job["NumTasks"] == "1"


def test_a_completed_job_is_observed(harness: Harness) -> None:
    job_id = harness.submitter.submit(script("echo done"), harness.spec())
    first = harness.submitter.states([job_id])[job_id]
    assert first.state in {JobState.PENDING, JobState.RUNNING, JobState.COMPLETED}
    harness.finish(job_id, 0)
    status, seen = harness.wait_terminal(job_id)
    assert status.state is JobState.COMPLETED
    assert status.exit_code == 0
    assert seen <= {JobState.PENDING, JobState.RUNNING, JobState.COMPLETING, JobState.COMPLETED}


def test_a_failed_job_reports_its_exit_code(harness: Harness) -> None:
    job_id = harness.submitter.submit(script("exit 3"), harness.spec())
    harness.finish(job_id, 3)
    status, _ = harness.wait_terminal(job_id)
    assert status.state is JobState.FAILED
    assert status.exit_code == 3


def test_states_of_many_jobs_in_one_call_leave_unknown_ids_out(harness: Harness) -> None:
    first = harness.submitter.submit(script("true"), harness.spec())
    second = harness.submitter.submit(script("true"), harness.spec())
    if harness.fake is not None:
        before = harness.fake.calls["states"]
    states = harness.submitter.states([first, second, "4294967295", "not-an-id"])
    assert set(states) == {first, second}
    assert states[first].job_id == first
    if harness.fake is not None:
        assert harness.fake.calls["states"] == before + 1


def test_states_of_an_unknown_job_is_empty(harness: Harness) -> None:
    assert harness.submitter.states(["4294967295"]) == {}
    assert harness.submitter.states([]) == {}


def test_cancel_stops_a_job(harness: Harness) -> None:
    job_id = harness.submitter.submit(script("sleep 120"), harness.spec())
    harness.submitter.cancel(job_id)
    status, _ = harness.wait_terminal(job_id)
    assert status.state is JobState.CANCELLED
    harness.submitter.cancel(job_id)  # cancelling a finished job is harmless


def test_cancel_of_an_unknown_job_raises_unknown_job(harness: Harness) -> None:
    with pytest.raises(UnknownJob) as caught:
        harness.submitter.cancel("4294967295")
    assert caught.value.field == "job_id"


def test_a_submission_is_found_by_its_marker(harness: Harness) -> None:
    spec = harness.spec()
    assert harness.submitter.find_by_marker(spec.comment) is None
    job_id = harness.submitter.submit(script("true"), spec)
    assert harness.submitter.find_by_marker(spec.comment) == job_id


def test_a_partition_the_cluster_lacks_is_refused_naming_it(harness: Harness) -> None:
    # Permanent refusals are never retried (tests/unit/test_retry.py), hence "in seconds".
    spec = harness.spec(partition="no-such-partition")
    with pytest.raises(SchedulerRejected) as caught:
        harness.submitter.submit(script("true"), spec)
    assert caught.value.field == "partition"
    assert "no-such-partition" in str(caught.value)
    assert harness.submitter.find_by_marker(spec.comment) is None


def test_too_many_cpus_is_refused(harness: Harness) -> None:
    with pytest.raises(SchedulerRejected):
        harness.submitter.submit(script("true"), harness.spec(cpus_per_task=64))


# sbatch and rest over the unix socket authenticate as the calling user: no credentials to refuse.
@pytest.mark.parametrize("harness", ["fake", *live("rest-tcp")], indirect=True)
def test_refused_credentials_raise_an_auth_error(harness: Harness) -> None:
    if harness.fake is not None:
        harness.fake.fail_next("auth")
        submitter = harness.submitter
    else:
        submitter = harness.make(broken_auth=True)
    with pytest.raises(SchedulerAuthError):
        submitter.submit(script("true"), harness.spec())


def test_an_unreachable_controller_is_retried_then_reported(harness: Harness) -> None:
    spec = harness.spec()
    if harness.fake is not None:
        harness.fake.fail_next("transient", times=FAST.attempts)
        with pytest.raises(SchedulerUnavailable):
            harness.submitter.submit(script("true"), spec)
        assert harness.fake.calls["submit"] == FAST.attempts
        assert harness.fake.jobs == {}
        return
    local = harness.local
    local.run("controller", "stop")  # type: ignore[attr-defined]
    try:
        with pytest.raises(SchedulerUnavailable) as caught:
            harness.submitter.submit(script("true"), spec)
        assert f"after {FAST.attempts} attempt" in caught.value.reason
    finally:
        local.run("controller", "start")  # type: ignore[attr-defined]
    assert harness.submitter.find_by_marker(spec.comment) is None


# -- ping and partition (doctor) ------------------------------------------------------------


def test_ping_names_the_controller_that_answered_up(harness: Harness) -> None:
    answer = harness.submitter.ping()
    assert answer.endswith("UP")
    if harness.fake is None:
        assert "primary" in answer.lower()


def test_an_existing_partition_reports_limits_the_spec_fits(harness: Harness) -> None:
    limits = harness.submitter.partition("build")
    assert limits is not None
    assert (limits.name, limits.state) == ("build", "UP")
    assert fit_problems(harness.spec(), limits) == []
    too_big = fit_problems(harness.spec(cpus_per_task=64), limits)
    assert too_big and "cpus_per_task 64" in too_big[0]
    if harness.fake is None:  # the local cluster's one node: 2 CPUs, unlimited partition
        assert limits.node_cpus == 2
        assert limits.node_memory_mib is not None and limits.node_memory_mib > 200
        assert limits.max_time_minutes is None


def test_an_unknown_partition_is_none(harness: Harness) -> None:
    assert harness.submitter.partition("no-such-partition") is None


def test_ping_of_an_unreachable_controller_is_retried_then_reported(
    harness: Harness, tmp_path: Path
) -> None:
    if harness.fake is not None:
        harness.fake.controller_up = False
        submitter = harness.submitter
    elif harness.kind == "sbatch":
        # The controller stays up for everyone else: this client is told a port nobody serves.
        conf = Path(harness.local.slurm_conf).read_text()  # type: ignore[attr-defined]
        lines = [
            "SlurmctldPort=9" if line.startswith("SlurmctldPort=") else line
            for line in conf.splitlines()
        ]
        (tmp_path / "slurm.conf").write_text("\n".join(lines) + "\n")
        submitter = SbatchSubmitter(
            sbatch=harness.local.sbatch,  # type: ignore[attr-defined]
            timeout_s=30,
            retry_policy=FAST,
            environ={"SLURM_CONF": str(tmp_path / "slurm.conf")},
        )
    elif harness.kind == "rest-tcp":
        submitter = RestSubmitter(
            url="http://127.0.0.1:9",
            user="root",
            token_file=harness.local.token_file,  # type: ignore[attr-defined]
            retry_policy=FAST,
        )
    else:
        submitter = RestSubmitter(url=f"unix://{tmp_path}/absent.sock", retry_policy=FAST)
    with pytest.raises(SchedulerUnavailable) as caught:
        submitter.ping()
    assert f"after {FAST.attempts} attempt" in caught.value.reason
    with pytest.raises(SchedulerUnavailable):
        submitter.partition("build")


@pytest.mark.parametrize("harness", ["fake", *live("rest-tcp")], indirect=True)
def test_ping_with_refused_credentials_raises_an_auth_error(harness: Harness) -> None:
    if harness.fake is not None:
        harness.fake.fail_next("auth", operation="ping")
        submitter = harness.submitter
    else:
        submitter = harness.make(broken_auth=True)
    # slurmrestd 22.05 answers a refused token on /ping as it answers a down controller (-1):
    # the error must then say that it may be either. 24.11 answers 200 with the controller
    # DOWN; the adapter's authenticated read then finds the refusal (tests/unit/test_rest_ping.py).
    with pytest.raises((SchedulerAuthError, SchedulerUnavailable)) as caught:
        submitter.ping()
    if isinstance(caught.value, SchedulerUnavailable):
        assert "token is refused" in caught.value.reason
        assert harness.local.series == "22.05"  # type: ignore[attr-defined]


# The real adapters meet real ambiguous failures in tests/integration/test_exactly_once.py.
@pytest.mark.parametrize("harness", ["fake"], indirect=True)
def test_an_ambiguous_failure_does_not_submit_twice(harness: Harness) -> None:
    assert harness.fake is not None
    spec = harness.spec()
    harness.fake.fail_next("ambiguous")
    job_id = harness.submitter.submit(script("true"), spec)
    assert list(harness.fake.jobs) == [job_id]

"""The ``BatchSubmitter`` contract (``ports.submitter``) as test classes an adapter's tests reuse.

A submitter's test module subclasses the contract classes and overrides one fixture,
``scheduler``, which returns a ``Scheduler``: how to build the submitter under test and how to
drive and inspect the scheduler behind it (docs/site-submitter.md has a whole example)::

    from slurm_image.testing.submitter_contract import Scheduler, SubmitterContract

    class MySiteScheduler(Scheduler):
        ...  # make_submitter, unreachable_submitter, controller_down, landed, jobs_with_marker

    class TestMySiteSubmitter(SubmitterContract):
        @pytest.fixture
        def scheduler(self, tmp_path):
            return MySiteScheduler(tmp_path)

``SubmitterContract`` holds what every submitter must do. ``RefusedCredentialsContract`` is for
a submitter that sends credentials a scheduler can refuse, and ``LostAnswerContract`` for a
scheduler whose answers a test can make it lose; a class mixes in the ones that apply. The
other fixtures (``retry_policy``, ``submitter``, ``job_directory``, ``job_spec``) have defaults a
subclass may override too: ``job_directory`` must be a directory the compute nodes can write.
"""

from __future__ import annotations

import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurm_image.domain.job import JobSpec, JobState, JobStatus
from slurm_image.domain.partition import fit_problems
from slurm_image.ports.submitter import (
    BatchSubmitter,
    Preflight,
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnknownJob,
)
from slurm_image.submitters import RetryPolicy

UNKNOWN_JOB_ID = "4294967295"
"""A job id no scheduler under test knows (the largest Slurm may print)."""


@dataclass(frozen=True)
class Landed:
    """What the scheduler holds of a submitted job, as it reports it.

    ``time_limit`` in ``[D-]H:MM:SS``; ``standard_output`` and ``standard_error`` with ``%j``
    replaced by the job id, as Slurm names the files; ``script`` None when the scheduler does
    not show a job's script.
    """

    name: str
    partition: str
    cpus_per_task: int
    memory: str
    time_limit: str
    working_directory: str
    standard_output: str
    standard_error: str
    comment: str
    script: bytes | None = None


class Scheduler(ABC):
    """The scheduler behind the submitter under test, as the contract drives and inspects it.

    The spec every test submits asks for ``partition``, ``cpus_per_task``, ``memory`` and
    ``time_limit``: the scheduler must accept that. ``too_many_cpus`` is a CPU count it must
    refuse.
    """

    partition = "build"
    cpus_per_task = 2
    memory = "200M"
    time_limit = "0:05:00"
    too_many_cpus = 64

    @abstractmethod
    def make_submitter(self, *, retry_policy: RetryPolicy) -> BatchSubmitter:
        """The submitter under test, retrying as ``retry_policy`` says."""

    @abstractmethod
    def unreachable_submitter(self, *, retry_policy: RetryPolicy) -> BatchSubmitter:
        """A submitter of the same kind that reaches no controller (e.g. a port nobody serves),
        while the scheduler stays up for everyone else."""

    @abstractmethod
    def controller_down(self) -> AbstractContextManager[None]:
        """A context inside which the scheduler's controller answers nobody; on leaving it the
        controller answers again."""

    @abstractmethod
    def landed(self, job_id: str) -> Landed:
        """What the scheduler holds of job ``job_id``."""

    @abstractmethod
    def jobs_with_marker(self, marker: str) -> list[str]:
        """The ids of every job the scheduler holds whose comment is ``marker``, read without
        the submitter under test."""

    def finish(self, job_id: str, exit_code: int) -> None:  # noqa: B027 (optional hook)
        """Play job ``job_id`` to its end with ``exit_code``, for a scheduler that does not run
        jobs (a fake). A real scheduler runs the script, which exits with that code: nothing
        to do."""

    def refused_credentials_submitter(self, *, retry_policy: RetryPolicy) -> BatchSubmitter:
        """For ``RefusedCredentialsContract``: a submitter whose credentials the scheduler
        refuses."""
        raise NotImplementedError(f"{type(self).__name__} has no refused_credentials_submitter")

    def lose_next_submit_answer(self) -> None:
        """For ``LostAnswerContract``: the scheduler accepts the next submission, then the
        answer to it is lost (the submitter sees an ambiguous failure)."""
        raise NotImplementedError(f"{type(self).__name__} has no lose_next_submit_answer")


def script(body: str) -> bytes:
    """A batch script running ``body`` under bash."""
    return f"#!/bin/bash -p\n{body}\n".encode()


def seconds(time_limit: str) -> int:
    """``[D-]H:MM:SS`` in seconds."""
    days, _, clock = time_limit.rpartition("-")
    hours, minutes, secs = (int(part) for part in clock.split(":"))
    return (int(days or 0) * 24 + hours) * 3600 + minutes * 60 + secs


def wait_terminal(
    submitter: BatchSubmitter, job_id: str, timeout_s: float = 60
) -> tuple[JobStatus, set[JobState]]:
    """Poll ``job_id`` until it ends (or ``timeout_s`` passes): its last status and every
    state seen on the way."""
    seen: set[JobState] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        status = submitter.states([job_id]).get(job_id)
        assert status is not None, f"job {job_id} vanished"
        seen.add(status.state)
        if status.state.is_terminal or time.monotonic() > deadline:
            return status, seen
        time.sleep(0.3)


class SubmitterFixtures:
    """The fixtures of the contract; a subclass overrides ``scheduler`` (and may override the
    others)."""

    @pytest.fixture
    def scheduler(self) -> Scheduler:
        raise NotImplementedError("override the scheduler fixture: return your Scheduler")

    @pytest.fixture
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy.immediate(attempts=2)

    @pytest.fixture
    def submitter(self, scheduler: Scheduler, retry_policy: RetryPolicy) -> BatchSubmitter:
        return scheduler.make_submitter(retry_policy=retry_policy)

    @pytest.fixture
    def job_directory(self, tmp_path: Path) -> Path:
        tmp_path.chmod(0o755)
        return tmp_path

    @pytest.fixture
    def job_spec(self, scheduler: Scheduler, job_directory: Path) -> Callable[..., JobSpec]:
        """``job_spec(**changes)``: a spec the scheduler accepts, with a fresh marker."""

        def make(**changes: object) -> JobSpec:
            values: dict[str, object] = {
                "name": "slurm-image-client",
                "partition": scheduler.partition,
                "cpus_per_task": scheduler.cpus_per_task,
                "memory": scheduler.memory,
                "time_limit": scheduler.time_limit,
                "working_directory": str(job_directory),
                "standard_output": str(job_directory / "slurm-%j.out"),
                "standard_error": str(job_directory / "slurm-%j.err"),
                "comment": f"slurm-image:img-{uuid.uuid4().hex}",
            }
            values.update(changes)
            return JobSpec.model_validate(values)

        return make


Spec = Callable[..., JobSpec]


class SubmitterContract(SubmitterFixtures):
    """What every ``BatchSubmitter`` does."""

    def test_submitter_satisfies_the_port(self, submitter: BatchSubmitter) -> None:
        assert isinstance(submitter, BatchSubmitter)
        assert isinstance(submitter.name, str) and submitter.name

    def test_preflight_passes_where_the_scheduler_works(self, submitter: BatchSubmitter) -> None:
        if isinstance(submitter, Preflight):
            submitter.preflight()
        assert submitter.ping()

    def test_job_lands_with_every_value_of_the_spec(
        self, submitter: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        spec = job_spec()
        payload = script("echo landed")
        job_id = submitter.submit(payload, spec)
        assert job_id.isdigit()
        job = scheduler.landed(job_id)
        assert job.name == spec.name
        assert job.partition == spec.partition
        assert job.cpus_per_task == spec.cpus_per_task
        assert job.memory == spec.memory
        assert seconds(job.time_limit) == seconds(spec.time_limit)
        assert job.working_directory == spec.working_directory
        assert job.standard_output == spec.standard_output.replace("%j", job_id)
        assert job.standard_error == spec.standard_error.replace("%j", job_id)
        assert job.comment == spec.comment
        assert job.script in (None, payload)

    def test_a_completed_job_is_observed(
        self, submitter: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        job_id = submitter.submit(script("echo done"), job_spec())
        first = submitter.states([job_id])[job_id]
        assert first.state in {JobState.PENDING, JobState.RUNNING, JobState.COMPLETED}
        scheduler.finish(job_id, 0)
        status, seen = wait_terminal(submitter, job_id)
        assert status.state is JobState.COMPLETED
        assert status.exit_code == 0
        assert seen <= {JobState.PENDING, JobState.RUNNING, JobState.COMPLETING, JobState.COMPLETED}

    def test_a_failed_job_reports_its_exit_code(
        self, submitter: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        job_id = submitter.submit(script("exit 3"), job_spec())
        scheduler.finish(job_id, 3)
        status, _ = wait_terminal(submitter, job_id)
        assert status.state is JobState.FAILED
        assert status.exit_code == 3

    def test_states_of_many_jobs_in_one_call_leave_unknown_ids_out(
        self, submitter: BatchSubmitter, job_spec: Spec
    ) -> None:
        first = submitter.submit(script("true"), job_spec())
        second = submitter.submit(script("true"), job_spec())
        states = submitter.states([first, second, UNKNOWN_JOB_ID, "not-an-id"])
        assert set(states) == {first, second}
        assert states[first].job_id == first
        assert states[second].job_id == second

    def test_states_of_an_unknown_job_is_empty(self, submitter: BatchSubmitter) -> None:
        assert submitter.states([UNKNOWN_JOB_ID]) == {}
        assert submitter.states([]) == {}

    def test_cancel_stops_a_job(self, submitter: BatchSubmitter, job_spec: Spec) -> None:
        job_id = submitter.submit(script("sleep 120"), job_spec())
        submitter.cancel(job_id)
        status, _ = wait_terminal(submitter, job_id)
        assert status.state is JobState.CANCELLED
        submitter.cancel(job_id)  # cancelling a finished job is harmless

    def test_cancel_of_an_unknown_job_raises_unknown_job(self, submitter: BatchSubmitter) -> None:
        with pytest.raises(UnknownJob) as caught:
            submitter.cancel(UNKNOWN_JOB_ID)
        assert caught.value.field == "job_id"

    def test_a_submission_is_found_by_its_marker(
        self, submitter: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        spec = job_spec()
        assert submitter.find_by_marker(spec.comment) is None
        job_id = submitter.submit(script("true"), spec)
        assert submitter.find_by_marker(spec.comment) == job_id
        assert scheduler.jobs_with_marker(spec.comment) == [job_id]

    def test_a_partition_the_cluster_lacks_is_refused_naming_it(
        self, submitter: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        spec = job_spec(partition="no-such-partition")
        with pytest.raises(SchedulerRejected) as caught:
            submitter.submit(script("true"), spec)
        assert caught.value.field == "partition"
        assert "no-such-partition" in str(caught.value)
        assert submitter.find_by_marker(spec.comment) is None
        assert scheduler.jobs_with_marker(spec.comment) == []

    def test_too_many_cpus_is_refused(
        self, submitter: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        spec = job_spec(cpus_per_task=scheduler.too_many_cpus)
        with pytest.raises(SchedulerRejected):
            submitter.submit(script("true"), spec)
        assert scheduler.jobs_with_marker(spec.comment) == []

    def test_an_unreachable_controller_is_retried_then_reported(
        self,
        submitter: BatchSubmitter,
        scheduler: Scheduler,
        job_spec: Spec,
        retry_policy: RetryPolicy,
    ) -> None:
        spec = job_spec()
        with scheduler.controller_down(), pytest.raises(SchedulerUnavailable) as caught:
            submitter.submit(script("true"), spec)
        assert f"after {retry_policy.attempts} attempt" in caught.value.reason
        assert submitter.find_by_marker(spec.comment) is None
        assert scheduler.jobs_with_marker(spec.comment) == []

    # -- ping and partition (doctor) --------------------------------------------------------

    def test_ping_says_who_answered(self, submitter: BatchSubmitter) -> None:
        answer = submitter.ping()
        assert isinstance(answer, str) and answer.strip()

    def test_an_existing_partition_reports_limits_the_spec_fits(
        self, submitter: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        limits = submitter.partition(scheduler.partition)
        assert limits is not None
        assert (limits.name, limits.state) == (scheduler.partition, "UP")
        assert fit_problems(job_spec(), limits) == []
        too_big = fit_problems(job_spec(cpus_per_task=scheduler.too_many_cpus), limits)
        assert too_big and f"cpus_per_task {scheduler.too_many_cpus}" in too_big[0]

    def test_an_unknown_partition_is_none(self, submitter: BatchSubmitter) -> None:
        assert submitter.partition("no-such-partition") is None

    def test_ping_of_an_unreachable_controller_is_retried_then_reported(
        self, scheduler: Scheduler, retry_policy: RetryPolicy
    ) -> None:
        unreachable = scheduler.unreachable_submitter(retry_policy=retry_policy)
        with pytest.raises(SchedulerUnavailable) as caught:
            unreachable.ping()
        assert f"after {retry_policy.attempts} attempt" in caught.value.reason
        with pytest.raises(SchedulerUnavailable):
            unreachable.partition(scheduler.partition)


class RefusedCredentialsContract(SubmitterFixtures):
    """For a submitter that sends credentials: the scheduler's refusal is an auth error, never
    retried. Needs ``Scheduler.refused_credentials_submitter``."""

    @pytest.fixture
    def refused(self, scheduler: Scheduler, retry_policy: RetryPolicy) -> BatchSubmitter:
        return scheduler.refused_credentials_submitter(retry_policy=retry_policy)

    def test_refused_credentials_raise_an_auth_error(
        self, refused: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        spec = job_spec()
        with pytest.raises(SchedulerAuthError):
            refused.submit(script("true"), spec)
        assert scheduler.jobs_with_marker(spec.comment) == []

    def test_ping_with_refused_credentials_raises_an_auth_error(
        self, refused: BatchSubmitter
    ) -> None:
        with pytest.raises(SchedulerAuthError):
            refused.ping()


class LostAnswerContract(SubmitterFixtures):
    """Exactly once: a submission whose answer was lost is found by its marker, not repeated.
    Needs ``Scheduler.lose_next_submit_answer``."""

    def test_an_ambiguous_failure_does_not_submit_twice(
        self, submitter: BatchSubmitter, scheduler: Scheduler, job_spec: Spec
    ) -> None:
        spec = job_spec()
        scheduler.lose_next_submit_answer()
        job_id = submitter.submit(script("true"), spec)
        assert scheduler.jobs_with_marker(spec.comment) == [job_id]

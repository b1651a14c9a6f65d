"""The submitter kit's base class (slurm_image.submitters.Submitter), without a scheduler."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from slurm_image.domain.job import JobSpec, JobState, JobStatus
from slurm_image.domain.partition import PartitionLimits
from slurm_image.ports.submitter import (
    BatchSubmitter,
    Preflight,
    SchedulerRejected,
    SchedulerUnavailable,
    UnknownJob,
)
from slurm_image.submitters import RetryPolicy, Submitter, TransientFailure

SPEC = JobSpec(
    name="n",
    partition="cpu",
    cpus_per_task=1,
    memory="1G",
    time_limit="0:10:00",
    working_directory="/w",
    standard_output="/w/o",
    standard_error="/w/e",
    comment="slurm-image:img-1",
)


class Scripted(Submitter):
    """Single attempts that follow a script of outcomes and record every call."""

    name = "scripted"

    def __init__(self, *outcomes: object, usable: bool = True) -> None:
        super().__init__(retry_policy=RetryPolicy.immediate(attempts=3))
        self.outcomes = list(outcomes)
        self.calls: list[str] = []
        self.jobs: dict[str, str] = {}
        self.usable = usable

    def _next(self, call: str) -> None:
        self.calls.append(call)
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if isinstance(outcome, Exception):
            raise outcome

    def check(self) -> None:
        if not self.usable:
            raise SchedulerRejected(field="client", rule="no client")

    def submit_once(self, script: bytes, spec: JobSpec) -> str:
        self.jobs[str(len(self.jobs) + 1)] = spec.comment
        self._next("submit")
        return str(len(self.jobs))

    def states_once(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        self._next(f"states {','.join(job_ids)}")
        return {i: JobStatus(job_id=i, state=JobState.PENDING) for i in job_ids if i in self.jobs}

    def cancel_once(self, job_id: str) -> None:
        self._next(f"cancel {job_id}")

    def find_once(self, marker: str) -> str | None:
        self._next("find")
        return next((i for i, comment in self.jobs.items() if comment == marker), None)

    def ping_once(self) -> str:
        self._next("ping")
        return "UP"

    def partition_once(self, name: str) -> PartitionLimits | None:
        self._next("partition")
        return None


def test_a_kit_submitter_is_a_batch_submitter_with_a_preflight() -> None:
    submitter = Scripted()
    assert isinstance(submitter, BatchSubmitter)
    assert isinstance(submitter, Preflight)
    submitter.preflight()
    with pytest.raises(SchedulerRejected) as refused:
        Scripted(usable=False).preflight()
    assert refused.value.field == "client"
    assert submitter.calls == []  # the preflight sends nothing


def test_after_a_lost_answer_the_marker_is_looked_up_before_any_resubmission() -> None:
    submitter = Scripted(TransientFailure("answer lost", ambiguous=True))
    assert submitter.submit(b"#!/bin/bash\n", SPEC) == "1"
    assert submitter.calls == ["submit", "find"]
    assert list(submitter.jobs) == ["1"]


def test_a_failure_that_sent_nothing_is_resubmitted_without_a_look_up() -> None:
    submitter = Scripted(TransientFailure("refused", ambiguous=False))
    submitter.jobs["0"] = "another marker"
    submitter.submit(b"#!/bin/bash\n", SPEC)
    assert submitter.calls == ["submit", "submit"]


def test_transient_failures_end_in_unavailable_after_the_policy_s_attempts() -> None:
    down = [TransientFailure("down", "controller", ambiguous=False)] * 3
    submitter = Scripted(*down)
    with pytest.raises(SchedulerUnavailable) as caught:
        submitter.ping()
    assert submitter.calls == ["ping"] * 3
    assert caught.value.field == "controller"


def test_a_refusal_names_the_spec_value_and_is_not_retried() -> None:
    submitter = Scripted(SchedulerRejected(field="partition", rule="invalid partition"))
    with pytest.raises(SchedulerRejected) as caught:
        submitter.submit(b"#!/bin/bash\n", SPEC)
    assert "partition='cpu'" in caught.value.reason
    assert submitter.calls == ["submit"]


def test_ids_that_cannot_name_a_job_never_reach_the_scheduler() -> None:
    submitter = Scripted()
    assert submitter.states(["x", "", "01"]) == {}
    with pytest.raises(UnknownJob) as caught:
        submitter.cancel("12a")
    assert caught.value.field == "job_id"
    assert submitter.calls == []
    submitter.states(["7", "7", "x", "8"])
    assert submitter.calls == ["states 7,8"]


def test_a_subclass_that_skips_init_retries_by_the_default_policy() -> None:
    class Bare(Scripted):
        def __init__(self) -> None:
            self.outcomes, self.calls, self.jobs, self.usable = [], [], {}, True

    assert Bare().retry_policy == RetryPolicy()
    assert Bare().ping() == "UP"

"""Observe and Cancel against both workspaces and the fake scheduler."""

from __future__ import annotations

from typing import Any

import pytest

from slurm_image.adapters.memory import FakeClock, FakeSubmitter
from slurm_image.application.cancel import Cancel
from slurm_image.application.errors import (
    NotSubmitted,
    SubmitterMismatch,
    UnknownLifecycle,
    VerificationFailed,
)
from slurm_image.application.observe import Observe
from slurm_image.application.prepare import Prepare
from slurm_image.application.submit import Submit
from slurm_image.domain.errors import InvalidIdentifier
from slurm_image.domain.job import JobState
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.paths import AttemptLayout

IDS = [f"img-{n:032x}" for n in range(1, 4)]


class Lab:
    def __init__(self, harness: Any, profile_for: Any, request: Any, runtime: Any) -> None:
        self.harness = harness
        self.scheduler = FakeSubmitter()
        self.profile, self.selection = profile_for(harness.root)
        clock = FakeClock()
        self.prepare = Prepare(clock, runtime, harness.workspace)
        self.submit = Submit(harness.workspace, self.scheduler, clock)
        self.observe = Observe(harness.workspace, self.scheduler)
        self.cancel = Cancel(harness.workspace, self.scheduler)
        self.request = request

    def staged(self, lifecycle_id: str) -> None:
        self.prepare(self.request, self.profile, self.selection, lifecycle_id)

    def submitted(self, lifecycle_id: str) -> str:
        self.staged(lifecycle_id)
        return self.submit.staged(lifecycle_id).job_id


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, import_request: Any, runtime_files: Any) -> Lab:
    return Lab(workspace_harness, profile_for, import_request, runtime_files)


def test_status_of_many_lifecycles_takes_one_scheduler_call(lab: Lab) -> None:
    jobs = [lab.submitted(lifecycle_id) for lifecycle_id in IDS]
    lab.scheduler.start(jobs[0])
    lab.scheduler.finish(jobs[1], exit_code=0)
    lab.scheduler.finish(jobs[2], exit_code=78)
    before = lab.scheduler.calls["states"]
    statuses = lab.observe(IDS)
    assert lab.scheduler.calls["states"] == before + 1
    assert [(s.lifecycle_id, s.job_id, s.state, s.exit_code) for s in statuses] == [
        (IDS[0], jobs[0], "RUNNING", None),
        (IDS[1], jobs[1], "COMPLETED", 0),
        (IDS[2], jobs[2], "FAILED", 78),
    ]
    assert statuses[2].reason is not None
    assert "Enroot" in statuses[2].reason


def test_a_job_the_scheduler_forgot_is_lost(lab: Lab) -> None:
    job = lab.submitted(IDS[0])
    lab.scheduler.forget(job)
    (status,) = lab.observe([IDS[0]])
    assert (status.job_id, status.state) == (job, JobState.LOST.value)


def test_a_staged_lifecycle_is_reported_without_asking_the_scheduler(lab: Lab) -> None:
    lab.staged(IDS[0])
    (status,) = lab.observe([IDS[0]])
    assert (status.state, status.job_id) == (LifecycleState.STAGED, None)
    assert lab.scheduler.calls["states"] == 0


def test_a_claimed_submission_without_a_record_is_reported_in_doubt(lab: Lab) -> None:
    lab.staged(IDS[0])
    claim = AttemptLayout(lab.harness.root, IDS[0]).submission_claim
    lab.harness.write(claim, f"slurm-image:{IDS[0]}\n".encode())
    (status,) = lab.observe([IDS[0]])
    assert status.state == LifecycleState.SUBMISSION_UNKNOWN


def test_status_refuses_an_unknown_or_malformed_id(lab: Lab) -> None:
    with pytest.raises(UnknownLifecycle):
        lab.observe([IDS[0]])
    with pytest.raises(InvalidIdentifier):
        lab.observe(["../etc"])


def test_status_refuses_a_tampered_submission_record(lab: Lab) -> None:
    lab.submitted(IDS[0])
    record = AttemptLayout(lab.harness.root, IDS[0]).submission_record
    lab.harness.append(record, b" ")
    with pytest.raises(VerificationFailed):
        lab.observe([IDS[0]])


def test_status_refuses_a_job_of_another_submitter(lab: Lab) -> None:
    lab.submitted(IDS[0])
    other = FakeSubmitter()
    other.name = "sbatch"
    with pytest.raises(SubmitterMismatch):
        Observe(lab.harness.workspace, other)([IDS[0]])


def test_cancel_cancels_the_job_and_reports_its_state(lab: Lab) -> None:
    job = lab.submitted(IDS[0])
    lab.scheduler.start(job)
    status = lab.cancel(IDS[0])
    assert lab.scheduler.calls["cancel"] == 1
    assert (status.job_id, status.state) == (job, "CANCELLED")


def test_cancel_of_an_unsubmitted_lifecycle_is_refused(lab: Lab) -> None:
    lab.staged(IDS[0])
    with pytest.raises(NotSubmitted):
        lab.cancel(IDS[0])
    assert lab.scheduler.calls["cancel"] == 0

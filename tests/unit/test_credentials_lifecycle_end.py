"""Staged registry credentials leave the attempt when its lifecycle ends without the job's trap:
publication of a finished job, ``cleanup``, and ``gc`` of any finished attempt, whatever its age,
and of an attempt never submitted once it is past the age bound;
``submit`` accepts the staged ``enroot/`` directory and nothing planted beside the file."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from publish_support import PublishLab
from slurm_image.adapters.memory import MemoryCredentialsFile
from slurm_image.application.errors import JobNotSuccessful, VerificationFailed
from slurm_image.application.maintain import Maintain
from slurm_image.application.prepare import Prepare
from slurm_image.application.submit import Submit
from slurm_image.domain.credentials import staged_credentials_path
from slurm_image.domain.plan import Plan
from slurm_image.domain.request import make_request
from slurm_image.ports.submitter import SchedulerRejected

A = "img-00000000000000000000000000000001"
SECRET = "canary-fedcba9876543210"
NETRC = f"machine registry-1.docker.io login hubuser password {SECRET}\n".encode()
SOURCE = f"docker.io/library/alpine:3.19@sha256:{'a' * 64}"
LONG_AGO = timedelta(days=3650)


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def _staged(lab: PublishLab, profile_for: Any) -> Plan:
    reader = MemoryCredentialsFile(files={"/home/user/.netrc": (NETRC, 0o600, True)})
    profile, selection = profile_for(lab.harness.root, enroot={"credentials_file": "~/.netrc"})
    request = make_request("import_oci", name="app", role="client", source=SOURCE)
    prepared = Prepare(lab.clock, lab.runtime, lab.store, reader)(request, profile, selection, A)
    assert prepared.plan.credentials_host == "registry-1.docker.io"
    return prepared.plan


def _submitted(lab: PublishLab, profile_for: Any) -> Plan:
    plan = _staged(lab, profile_for)
    Submit(lab.store, lab.scheduler, lab.clock).staged(A)
    return plan


def _credentials(lab: PublishLab) -> str:
    return staged_credentials_path(lab.harness.root, A)


def _maintain(lab: PublishLab) -> Maintain:
    return Maintain(lab.store, lab.locks, lab.observe, lab.clock, lock_timeout_s=5)


def test_publishing_a_failed_job_removes_its_credentials(lab: PublishLab, profile_for: Any) -> None:
    _submitted(lab, profile_for)
    lab.scheduler.finish(lab.job_of(A), 1)
    with pytest.raises(JobNotSuccessful):
        lab.publish(A)
    assert not lab.harness.exists(_credentials(lab))


def test_gc_removes_the_credentials_of_a_job_cancelled_while_queued_but_keeps_the_attempt(
    lab: PublishLab, profile_for: Any
) -> None:
    plan = _submitted(lab, profile_for)
    lab.scheduler.cancel(lab.job_of(A))
    planned = _maintain(lab).gc(older_than=LONG_AGO, dry_run=True)
    assert [(r.kind, r.path) for r in planned] == [("credentials", _credentials(lab))]
    assert lab.harness.exists(_credentials(lab))  # a dry run changes nothing
    _maintain(lab).gc(older_than=LONG_AGO)
    assert not lab.harness.exists(_credentials(lab))
    assert lab.harness.exists(plan.paths.plan)


def test_gc_keeps_the_credentials_of_a_job_that_may_still_run(
    lab: PublishLab, profile_for: Any
) -> None:
    _submitted(lab, profile_for)
    assert _maintain(lab).gc(older_than=LONG_AGO) == []
    assert lab.harness.exists(_credentials(lab))


def test_cleanup_of_a_finished_attempt_takes_its_credentials(
    lab: PublishLab, profile_for: Any
) -> None:
    plan = _submitted(lab, profile_for)
    lab.scheduler.finish(lab.job_of(A), 1)
    _maintain(lab).cleanup(A)
    assert not lab.harness.exists(_credentials(lab))
    assert not lab.harness.exists(plan.paths.plan)


@pytest.mark.parametrize("planted", ["enroot/hooks.d", "enroot/config/environ.d"])
def test_submit_refuses_anything_planted_beside_the_staged_credentials(
    lab: PublishLab, profile_for: Any, planted: str
) -> None:
    plan = _staged(lab, profile_for)
    job_dir = plan.paths.plan.rsplit("/", 1)[0]
    lab.harness.makedirs(f"{job_dir}/{planted}")
    with pytest.raises(VerificationFailed) as refused:
        Submit(lab.store, lab.scheduler, lab.clock).staged(A)
    assert "staging put" in refused.value.reason
    assert not lab.scheduler.jobs


def test_gc_removes_the_credentials_of_an_attempt_never_submitted_once_past_the_bound(
    lab: PublishLab, profile_for: Any
) -> None:
    plan = _staged(lab, profile_for)
    lab.clock.advance(timedelta(days=2))
    assert _maintain(lab).gc(older_than=timedelta(days=7)) == []
    assert lab.harness.exists(_credentials(lab))
    removed = _maintain(lab).gc(older_than=timedelta(days=1))
    assert [(r.kind, r.path) for r in removed] == [("credentials", _credentials(lab))]
    assert not lab.harness.exists(_credentials(lab))
    assert lab.harness.exists(plan.paths.plan)  # the attempt stays until it is cleaned up


def test_gc_removes_the_credentials_of_a_refused_submission_once_past_the_bound(
    lab: PublishLab, profile_for: Any
) -> None:
    _staged(lab, profile_for)
    lab.scheduler.fail_next("permanent")
    with pytest.raises(SchedulerRejected):
        Submit(lab.store, lab.scheduler, lab.clock).staged(A)
    lab.clock.advance(timedelta(days=2))
    removed = _maintain(lab).gc(older_than=timedelta(days=1))
    assert [(r.kind, r.path) for r in removed] == [("credentials", _credentials(lab))]
    assert not lab.harness.exists(_credentials(lab))


def test_cleanup_of_an_attempt_never_submitted_takes_its_credentials(
    lab: PublishLab, profile_for: Any
) -> None:
    plan = _staged(lab, profile_for)
    assert _maintain(lab).cleanup(A) == A
    assert not lab.harness.exists(_credentials(lab))
    assert not lab.harness.exists(plan.paths.job_dir)

"""A submission the scheduler accepted but whose answer names no usable job id.

sbatch exiting 0 (or slurmrestd answering 200) means the job exists; an answer that cannot be
read as a plain job id (``--parsable`` prints ``<id>;<cluster>`` on a multi-cluster site) must
never be taken for a refusal, or a later ``submit`` would submit the attempt a second time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from slurm_image.adapters.memory import FakeClock
from slurm_image.adapters.sbatch import SbatchSubmitter
from slurm_image.adapters.slurmrest import RestSubmitter
from slurm_image.adapters.slurmrest.client import RestClient
from slurm_image.application.errors import SubmissionInDoubt
from slurm_image.application.prepare import Prepare
from slurm_image.application.submit import Submit
from slurm_image.domain.job import JobSpec
from slurm_image.domain.paths import AttemptLayout
from slurm_image.ports.submitter import (
    BatchSubmitter,
    SchedulerAuthError,
    SchedulerRejected,
    SubmissionUnconfirmed,
    SubmitterError,
)
from slurm_image.submitters import RetryPolicy

LIFECYCLE = "img-00000000000000000000000000000002"


def _sbatch_answering(tmp_path: Path, answer: str) -> tuple[BatchSubmitter, Callable[[], int]]:
    """An sbatch that accepts every job and prints ``answer``; squeue knows no job."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.calls"
    (bin_dir / "sbatch").write_text(
        f"#!/bin/sh\ncat >/dev/null\necho submitted >>{log}\necho '{answer}'\n"
    )
    (bin_dir / "squeue").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("sbatch", "squeue"):
        (bin_dir / tool).chmod(0o755)

    def calls() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    submitter = SbatchSubmitter(
        sbatch=str(bin_dir / "sbatch"), retry_policy=RetryPolicy.immediate(2), environ={}
    )
    return submitter, calls


def _rest_answering(body: dict[str, object]) -> tuple[BatchSubmitter, Callable[[], int]]:
    """A slurmrestd that answers every submit 200 with ``body`` and lists no job."""
    submits: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            submits.append(request)
            return httpx.Response(200, json=body)
        return httpx.Response(200, json={"errors": [], "jobs": []})

    client = RestClient(
        "unix:///nonexistent/slurmrestd.sock", transport=httpx.MockTransport(handle)
    )
    submitter = RestSubmitter(
        url="unix:///nonexistent/slurmrestd.sock",
        api_version="v0.0.38",
        client=client,
        retry_policy=RetryPolicy.immediate(2),
    )
    return submitter, lambda: len(submits)


ANSWERS = {
    "sbatch cluster-qualified id": lambda tmp: _sbatch_answering(tmp, "4242;othercluster"),
    "sbatch no id": lambda tmp: _sbatch_answering(tmp, ""),
    "rest no job id": lambda _tmp: _rest_answering({"errors": []}),
    "rest not a job id": lambda _tmp: _rest_answering({"errors": [], "job_id": "12;x"}),
}


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_an_accepted_submission_with_an_unreadable_job_id_is_unconfirmed_not_refused(
    tmp_path: Path, answer: str
) -> None:
    submitter, calls = ANSWERS[answer](tmp_path)
    with pytest.raises(SubmissionUnconfirmed) as raised:
        submitter.submit(b"#!/bin/bash\ntrue\n", _spec())
    assert not isinstance(raised.value, SchedulerRejected | SchedulerAuthError)
    assert "marker" in raised.value.reason
    assert calls() == 1  # never retried: the first request was accepted


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_a_submission_accepted_without_a_readable_id_is_never_submitted_again(
    tmp_path: Path, workspace_harness, profile_for, import_request, runtime_files, answer: str
) -> None:
    submitter, calls = ANSWERS[answer](tmp_path)
    workspace = workspace_harness.workspace
    profile, selection = profile_for(workspace_harness.root)
    clock = FakeClock()
    prepared = Prepare(clock, runtime_files, workspace)(
        import_request, profile, selection, LIFECYCLE
    )
    submit = Submit(workspace, submitter, clock)
    with pytest.raises(SubmitterError):
        submit(prepared)
    claim = AttemptLayout(workspace_harness.root, LIFECYCLE).submission_claim
    assert workspace_harness.exists(claim)  # the outcome is unknown: the claim stays
    with pytest.raises(SubmissionInDoubt):
        submit.staged(LIFECYCLE)
    assert calls() == 1


def _spec() -> JobSpec:
    return JobSpec(
        name="n",
        partition="build",
        cpus_per_task=1,
        memory="1G",
        time_limit="0:10:00",
        working_directory="/w",
        standard_output="/w/o",
        standard_error="/w/e",
        comment="slurm-image:img-00000000000000000000000000000002",
    )


@pytest.mark.parametrize("problem", ["missing", "not executable"])
def test_an_sbatch_that_cannot_be_run_leaves_the_attempt_free_to_submit_again(
    tmp_path: Path, workspace_harness, profile_for, import_request, runtime_files, problem: str
) -> None:
    # Nothing reached the scheduler, so no claim may stay behind to block the next submit.
    broken = tmp_path / "broken" / "sbatch"
    if problem == "not executable":
        broken.parent.mkdir()
        broken.write_text("#!/bin/sh\nexit 0\n")
        broken.chmod(0o644)
    workspace = workspace_harness.workspace
    profile, selection = profile_for(workspace_harness.root)
    clock = FakeClock()
    Prepare(clock, runtime_files, workspace)(import_request, profile, selection, LIFECYCLE)
    unusable = SbatchSubmitter(sbatch=str(broken), retry_policy=RetryPolicy.immediate(2))
    with pytest.raises(SchedulerRejected, match="sbatch"):
        Submit(workspace, unusable, clock).staged(LIFECYCLE)
    claim = AttemptLayout(workspace_harness.root, LIFECYCLE).submission_claim
    assert not workspace_harness.exists(claim)
    working, calls = _sbatch_answering(tmp_path, "77")
    assert Submit(workspace, working, clock).staged(LIFECYCLE).job_id == "77"
    assert calls() == 1

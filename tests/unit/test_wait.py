"""Wait: one scheduler call per poll, capped backoff, terminal states, LOST, timeout."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from publish_support import PublishLab
from slurm_image.application.errors import NotSubmitted
from slurm_image.application.wait import MAX_POLL_S, Wait
from slurm_image.domain.job import JobState

IDS = [f"img-{n:032x}" for n in range(1, 4)]


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


class Script:
    """Sleeps advance the fake clock; at given polls the scheduler moves jobs on."""

    def __init__(self, lab: PublishLab, steps: dict[int, Any]) -> None:
        self.lab, self.steps, self.naps = lab, steps, []
        self.polls = 0

    def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        self.lab.clock.advance(timedelta(seconds=seconds))

    def on_poll(self, statuses: Any, elapsed: float) -> None:
        self.polls += 1
        if self.polls in self.steps:
            self.steps[self.polls]()


def test_wait_polls_all_jobs_in_one_call_until_each_is_terminal(lab: PublishLab) -> None:
    for i in IDS:
        lab.submitted(i, name=f"n{i[-1]}")
    jobs = [lab.job_of(i) for i in IDS]
    script = Script(
        lab,
        {
            2: lambda: lab.scheduler.finish(jobs[0]),
            4: lambda: lab.scheduler.finish(jobs[1], 76),
            6: lambda: lab.scheduler.forget(jobs[2]),
        },
    )
    before = lab.scheduler.calls["states"]
    result = Wait(lab.observe, lab.clock, sleep=script.sleep)(IDS, on_poll=script.on_poll)
    assert [s.state for s in result.lifecycles] == ["COMPLETED", "FAILED", "LOST"]
    assert result.lifecycles[1].exit_code == 76
    assert "no inspection result" in (result.lifecycles[1].reason or "")
    assert not result.ok and not result.timed_out
    assert [s.lifecycle_id for s in result.failed] == IDS[1:]
    assert lab.scheduler.calls["states"] - before == script.polls == 7
    assert script.naps == sorted(script.naps)  # backoff never shrinks


def test_the_backoff_is_capped(lab: PublishLab) -> None:
    lab.submitted(IDS[0])
    job = lab.job_of(IDS[0])
    script = Script(lab, {30: lambda: lab.scheduler.finish(job)})
    result = Wait(lab.observe, lab.clock, sleep=script.sleep)(IDS[:1], on_poll=script.on_poll)
    assert result.ok
    assert max(script.naps) == MAX_POLL_S


def test_a_timeout_reports_the_running_jobs_and_cancels_nothing(lab: PublishLab) -> None:
    lab.submitted(IDS[0])
    job = lab.job_of(IDS[0])
    lab.scheduler.start(job)
    script = Script(lab, {})
    result = Wait(lab.observe, lab.clock, sleep=script.sleep)(IDS[:1], timeout_s=10)
    assert result.timed_out and not result.ok
    assert result.elapsed_s == 10
    assert lab.scheduler.job(job).state == JobState.RUNNING
    assert lab.scheduler.calls["cancel"] == 0


def test_a_staged_lifecycle_is_refused_before_waiting(lab: PublishLab) -> None:
    from publish_support import SOURCE
    from slurm_image.application.prepare import Prepare
    from slurm_image.domain.request import make_request

    request = make_request("import_oci", name="x", role="client", source=SOURCE)
    Prepare(lab.clock, lab.runtime, lab.store)(request, lab.profile, lab.selection, IDS[0])
    with pytest.raises(NotSubmitted, match="submit it first"):
        Wait(lab.observe, lab.clock, sleep=lambda s: None)(IDS[:1])

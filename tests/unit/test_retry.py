"""The shared retry and exactly-once rules (slurm_image.submitters), without a scheduler."""

from __future__ import annotations

import pytest

from slurm_image.ports.submitter import SchedulerRejected, SchedulerUnavailable
from slurm_image.submitters import (
    RetryPolicy,
    TransientFailure,
    submit_exactly_once,
    with_retries,
)


def test_transient_failures_are_retried_until_success() -> None:
    outcomes: list[object] = [TransientFailure("down", ambiguous=False)] * 2 + ["ok"]
    calls = []

    def attempt() -> str:
        calls.append(1)
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    assert with_retries(RetryPolicy.immediate(attempts=3), "op", attempt) == "ok"
    assert len(calls) == 3


def test_retries_are_bounded_and_end_in_scheduler_unavailable() -> None:
    calls = []

    def attempt() -> str:
        calls.append(1)
        raise TransientFailure("controller unreachable", "controller", ambiguous=False)

    with pytest.raises(SchedulerUnavailable) as caught:
        with_retries(RetryPolicy.immediate(attempts=4), "states", attempt)
    assert len(calls) == 4
    assert caught.value.field == "controller"
    assert "controller unreachable" in caught.value.reason
    assert "states" in caught.value.reason


def test_permanent_errors_are_not_retried() -> None:
    calls = []

    def attempt() -> str:
        calls.append(1)
        raise SchedulerRejected(field="partition", rule="invalid partition")

    with pytest.raises(SchedulerRejected):
        with_retries(RetryPolicy.immediate(attempts=5), "submit", attempt)
    assert len(calls) == 1


def test_backoff_waits_grow_and_are_bounded() -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=5, initial_wait_s=1, max_wait_s=3, jitter_s=0, sleep=waits.append)

    def attempt() -> str:
        raise TransientFailure("down", ambiguous=False)

    with pytest.raises(SchedulerUnavailable):
        with_retries(policy, "op", attempt)
    assert waits == [1, 2, 3, 3]


def test_policy_refuses_zero_attempts() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


class _Scheduler:
    """Accepts a submission, optionally losing the answer, and finds jobs by marker."""

    def __init__(self, lose_answers: int, find_failures: int = 0) -> None:
        self.jobs: dict[str, str] = {}
        self.lose_answers = lose_answers
        self.find_failures = find_failures
        self.finds = 0

    def submit_once(self, marker: str) -> str:
        job_id = str(len(self.jobs) + 1)
        self.jobs[job_id] = marker
        if self.lose_answers:
            self.lose_answers -= 1
            raise TransientFailure("response lost", ambiguous=True)
        return job_id

    def find_once(self, marker: str) -> str | None:
        self.finds += 1
        if self.find_failures:
            self.find_failures -= 1
            raise TransientFailure("controller unreachable", ambiguous=False)
        return next((i for i, m in self.jobs.items() if m == marker), None)


def test_ambiguous_failure_is_resolved_by_marker_not_by_resubmitting() -> None:
    scheduler = _Scheduler(lose_answers=1)
    job_id = submit_exactly_once(
        RetryPolicy.immediate(),
        "slurm-image:img-1",
        lambda: scheduler.submit_once("slurm-image:img-1"),
        scheduler.find_once,
    )
    assert job_id == "1"
    assert scheduler.jobs == {"1": "slurm-image:img-1"}


def test_a_failed_marker_lookup_never_leads_to_a_blind_resubmission() -> None:
    scheduler = _Scheduler(lose_answers=1, find_failures=2)
    job_id = submit_exactly_once(
        RetryPolicy.immediate(attempts=4),
        "m",
        lambda: scheduler.submit_once("m"),
        scheduler.find_once,
    )
    assert job_id == "1"
    assert len(scheduler.jobs) == 1
    assert scheduler.finds == 3


def test_no_lookup_after_a_failure_that_never_reached_the_scheduler() -> None:
    scheduler = _Scheduler(lose_answers=0)
    failures = [TransientFailure("connection refused", ambiguous=False)]

    def submit_once() -> str:
        if failures:
            raise failures.pop()
        return scheduler.submit_once("m")

    assert (
        submit_exactly_once(RetryPolicy.immediate(), "m", submit_once, scheduler.find_once) == "1"
    )
    assert scheduler.finds == 0

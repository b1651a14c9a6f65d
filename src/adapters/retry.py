"""Bounded retries for transient scheduler failures, and exactly-once submission by marker.

Every submitter adapter (sbatch, slurmrestd, the in-memory fake) uses this one module, so the
rules are written once:

- An adapter's single attempt raises ``TransientFailure`` for trouble worth retrying
  (controller unreachable, timeout, connection error, HTTP 502/503/504, slurmrestd error 1800)
  and the port's ``SchedulerRejected``/``SchedulerAuthError``/``UnknownJob`` for permanent
  refusals, which are never retried.
- ``with_retries`` retries transient failures under a ``RetryPolicy`` (bounded attempts,
  exponential backoff with jitter) and turns the last one into ``SchedulerUnavailable``.
- ``submit_exactly_once`` (and ``submit_spec_exactly_once``, which also names the value a
  refusal is about) adds the marker rule: once a submission attempt failed ambiguously
  (the request may have reached the controller), every later attempt first looks the marker up
  and returns the job it finds instead of submitting a second one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import tenacity

from slurm_image.adapters.slurm_fields import naming_the_value
from slurm_image.domain.job import JobSpec
from slurm_image.ports.submitter import SchedulerRejected, SchedulerUnavailable

_log = logging.getLogger(__name__)

T = TypeVar("T")


class TransientFailure(Exception):
    """One attempt failed in a way a later attempt may not. Never leaves an adapter.

    ``ambiguous`` is true when the request may have reached the controller (a timeout or a
    dropped response after sending), false when it certainly did not (connection refused).
    """

    def __init__(self, reason: str, field: str = "submitter", *, ambiguous: bool) -> None:
        self.reason = reason
        self.field = field
        self.ambiguous = ambiguous
        super().__init__(f"{field}: {reason}")


def _no_sleep(_seconds: float) -> None:
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently transient failures are retried.

    ``attempts`` counts every try, the first included. Waits grow exponentially from
    ``initial_wait_s`` up to ``max_wait_s``, each with up to ``jitter_s`` of random jitter.
    ``sleep`` is injectable so tests run without waiting.
    """

    attempts: int = 4
    initial_wait_s: float = 1.0
    max_wait_s: float = 10.0
    jitter_s: float = 1.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")
        if min(self.initial_wait_s, self.max_wait_s, self.jitter_s) < 0:
            raise ValueError("RetryPolicy waits must not be negative")

    @classmethod
    def immediate(cls, attempts: int = 3) -> RetryPolicy:
        """Retry without waiting: for tests and the in-memory fake."""
        return cls(attempts=attempts, initial_wait_s=0, max_wait_s=0, jitter_s=0, sleep=_no_sleep)


def with_retries(policy: RetryPolicy, operation: str, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` until it succeeds, raises a permanent error, or the attempts run out.

    Raises ``SchedulerUnavailable`` (naming ``operation`` and the last reason) when every
    attempt failed transiently.
    """

    def log_retry(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        _log.warning(
            "%s: attempt %d failed transiently (%s); retrying",
            operation,
            state.attempt_number,
            exc,
        )

    retryer = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(policy.attempts),
        wait=tenacity.wait_exponential(multiplier=policy.initial_wait_s, max=policy.max_wait_s)
        + tenacity.wait_random(0, policy.jitter_s),
        retry=tenacity.retry_if_exception_type(TransientFailure),
        sleep=policy.sleep,
        before_sleep=log_retry,
        reraise=True,
    )
    try:
        return retryer(attempt)
    except TransientFailure as exc:
        raise SchedulerUnavailable(
            field=exc.field,
            rule=f"{operation} failed after {policy.attempts} attempt(s): {exc.reason}",
        ) from exc


def submit_exactly_once(
    policy: RetryPolicy,
    marker: str,
    submit_once: Callable[[], str],
    find_once: Callable[[str], str | None],
) -> str:
    """Submit with retries, never creating a second job for ``marker``.

    ``submit_once`` makes one submission attempt; ``find_once`` makes one marker look-up. Both
    raise ``TransientFailure`` for retryable trouble. After the first ambiguous failure, each
    later attempt looks the marker up first (a failed look-up fails that attempt: the adapter
    never resubmits blind) and returns the job it finds.
    """
    ambiguous = False

    def attempt() -> str:
        nonlocal ambiguous
        if ambiguous:
            existing = find_once(marker)
            if existing is not None:
                _log.info("%s: the earlier attempt was accepted as job %s", marker, existing)
                return existing
        try:
            return submit_once()
        except TransientFailure as exc:
            ambiguous = ambiguous or exc.ambiguous
            raise

    return with_retries(policy, f"submit {marker}", attempt)


def submit_spec_exactly_once(
    policy: RetryPolicy,
    spec: JobSpec,
    submit_once: Callable[[], str],
    find_once: Callable[[str], str | None],
) -> str:
    """``submit_exactly_once`` for ``spec``'s marker; a refusal names the offending value."""
    try:
        return submit_exactly_once(policy, spec.comment, submit_once, find_once)
    except SchedulerRejected as exc:
        raise naming_the_value(exc, spec) from None

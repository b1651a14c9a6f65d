"""The kit for writing a ``BatchSubmitter``: retries, exactly-once submission, a preflight check.

A submitter adapter (ours or a site's) subclasses ``Submitter`` and writes only its
single-attempt calls, one scheduler request each:

- ``submit_once``, ``states_once``, ``cancel_once``, ``find_once``, ``ping_once`` and
  ``partition_once`` raise ``TransientFailure`` for trouble worth retrying (controller
  unreachable, timeout, connection error, HTTP 502/503/504) and the port's
  ``SchedulerRejected``/``SchedulerAuthError``/``UnknownJob``/``SubmissionUnconfirmed`` for
  the rest, which are never retried (``ports.submitter`` states when each applies).
- ``check`` (optional) is the preflight: refuse, before anything is created, a submitter that
  cannot work (a missing client, say), raising ``SchedulerRejected``.

The base class implements the port's six methods once over them:

- ``with_retries`` retries transient failures under a ``RetryPolicy`` (bounded attempts,
  exponential backoff with jitter, tenacity) and turns the last one into
  ``SchedulerUnavailable``.
- ``submit`` adds the marker rule: once a submission attempt failed ambiguously (the request
  may have reached the controller), every later attempt first looks the marker
  (``spec.comment``) up and returns the job it finds instead of submitting a second one; a
  refusal names the ``JobSpec`` value it is about.

This module imports only the standard library, tenacity, ``ports`` and ``domain``, so a site's
package may build on it (docs/site-submitter.md); ``slurm_image.testing.submitter_contract``
is the contract suite to run against the result.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import tenacity

from slurm_image.domain.job import JobSpec, JobStatus
from slurm_image.domain.partition import PartitionLimits
from slurm_image.ports.submitter import SchedulerRejected, SchedulerUnavailable, UnknownJob

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


def naming_the_value(error: SchedulerRejected, spec: JobSpec) -> SchedulerRejected:
    """``error`` with the offending ``JobSpec`` value in its reason (Slurm's text omits it)."""
    value = getattr(spec, error.field, None) if error.field in JobSpec.model_fields else None
    if value is None or repr(value) in error.reason:
        return error
    named = SchedulerRejected(field=error.field, rule=f"{error.reason} ({error.field}={value!r})")
    named.__cause__ = error.__cause__
    return named


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


def is_decimal_job_id(text: str) -> bool:
    """Whether ``text`` can name a job at all: ASCII decimal digits, no leading zero."""
    return text.isascii() and text.isdecimal() and not text.startswith("0")


class Submitter(ABC):
    """A ``BatchSubmitter`` (``ports.submitter``) built from single-attempt calls.

    Subclasses set ``name`` and implement the ``*_once`` methods (and ``check`` when there is
    something to check before the first request); ``retry_policy`` is how transient failures
    are retried (a subclass that does not call ``__init__`` retries as ``RetryPolicy()``).
    """

    name: str
    retry_policy: RetryPolicy = RetryPolicy()

    def __init__(self, *, retry_policy: RetryPolicy | None = None) -> None:
        self.retry_policy = retry_policy if retry_policy is not None else RetryPolicy()

    # -- the port ------------------------------------------------------------------------

    def submit(self, script: bytes, spec: JobSpec) -> str:
        payload = bytes(script)
        return submit_spec_exactly_once(
            self.retry_policy, spec, lambda: self.submit_once(payload, spec), self.find_once
        )

    def states(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        wanted = [job_id for job_id in dict.fromkeys(job_ids) if self.is_job_id(job_id)]
        if not wanted:
            return {}
        return with_retries(self.retry_policy, "states", lambda: self.states_once(wanted))

    def cancel(self, job_id: str) -> None:
        if not self.is_job_id(job_id):
            raise UnknownJob(field="job_id", rule=f"not a job id: {job_id[:100]!r}")
        with_retries(self.retry_policy, f"cancel {job_id}", lambda: self.cancel_once(job_id))

    def find_by_marker(self, marker: str) -> str | None:
        return with_retries(self.retry_policy, "find_by_marker", lambda: self.find_once(marker))

    def ping(self) -> str:
        return with_retries(self.retry_policy, "ping", self.ping_once)

    def partition(self, name: str) -> PartitionLimits | None:
        return with_retries(
            self.retry_policy, f"partition {name}", lambda: self.partition_once(name)
        )

    def preflight(self) -> None:
        """Refuse, before anything is created, a submitter that cannot work (``check``)."""
        self.check()

    # -- what an adapter writes ----------------------------------------------------------

    def is_job_id(self, text: str) -> bool:
        """Whether ``text`` can name a job of this scheduler; ``states`` leaves other ids
        out and ``cancel`` refuses them as ``UnknownJob`` without asking the scheduler."""
        return is_decimal_job_id(text)

    def check(self) -> None:
        """The preflight: raise ``SchedulerRejected`` when this submitter cannot work here.
        Sends nothing to the scheduler. Nothing to check by default."""
        return None

    @abstractmethod
    def submit_once(self, script: bytes, spec: JobSpec) -> str:
        """One submission; the job id. ``TransientFailure(ambiguous=True)`` when the request
        may have reached the scheduler."""

    @abstractmethod
    def states_once(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        """The states of ``job_ids`` (distinct, each passing ``is_job_id``) in one request;
        ids the scheduler does not know are absent."""

    @abstractmethod
    def cancel_once(self, job_id: str) -> None:
        """One cancel; harmless for a finished job, ``UnknownJob`` for an unknown one."""

    @abstractmethod
    def find_once(self, marker: str) -> str | None:
        """The id of a job whose comment equals ``marker``, or None, in one request."""

    @abstractmethod
    def ping_once(self) -> str:
        """Who answered, e.g. ``slurmctld vm (primary) UP``; a controller answering DOWN is a
        ``TransientFailure``."""

    @abstractmethod
    def partition_once(self, name: str) -> PartitionLimits | None:
        """The limits of partition ``name``, or None when there is no such partition."""

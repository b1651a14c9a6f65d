"""``FakeSubmitter``: an in-memory ``BatchSubmitter``.

A scheduler that accepts submissions and never runs them: tests drive each job's state by hand
and inject failures. It is built on the same kit as the real submitters
(``slurm_image.submitters``), so it goes through the same retry and exactly-once rules.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from slurm_image.domain.job import JobSpec, JobState, JobStatus, observed_times
from slurm_image.domain.partition import PartitionLimits
from slurm_image.ports.clock import Clock
from slurm_image.ports.submitter import SchedulerAuthError, SchedulerRejected, UnknownJob
from slurm_image.submitters import RetryPolicy, Submitter, TransientFailure

FailureKind = Literal["transient", "ambiguous", "permanent", "auth"]
"""What an injected failure does:

- ``transient``: the request never reached the scheduler (connection refused); retried.
- ``ambiguous``: the scheduler accepted the request, then the answer was lost (a dropped
  response); retried, and a submission is then found by its marker instead of repeated.
- ``permanent``: the scheduler refuses the request (``SchedulerRejected``); not retried.
- ``auth``: credentials refused (``SchedulerAuthError``); not retried.
"""

Operation = Literal["submit", "states", "cancel", "find_by_marker", "ping", "partition"]
HANG_MAX_S = 300.0
"""The longest a call waits while the fake scheduler does not answer (``hang``): then it fails
transiently, as a real command's timeout ends it."""


@dataclass
class FakeJob:
    """One job the fake scheduler holds: the exact bytes and spec it was given, its state, and
    when it started and ended (by the fake's clock, as Slurm records its StartTime and
    EndTime)."""

    job_id: str
    script: bytes
    spec: JobSpec
    state: JobState = JobState.PENDING
    reason: str | None = None
    exit_code: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None

    def status(self) -> JobStatus:
        started, ended = observed_times(self.state, self.started_at, self.ended_at)
        return JobStatus(
            job_id=self.job_id,
            state=self.state,
            reason=self.reason,
            exit_code=self.exit_code,
            started_at=started,
            ended_at=ended,
        )


class _SystemTime:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeSubmitter(Submitter):
    """An in-memory ``BatchSubmitter``.

    ``partitions`` (when given) is the set of partitions that exist: a spec naming another one is
    rejected, as Slurm does. ``max_cpus_per_task`` likewise bounds the CPUs a job may ask for.
    ``clock`` (default: the system's) dates a job's start and end as its state moves.
    """

    name = "fake"

    def __init__(
        self,
        *,
        partitions: Collection[str] | None = None,
        max_cpus_per_task: int | None = None,
        first_job_id: int = 1,
        retry_policy: RetryPolicy | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._clock: Clock = clock if clock is not None else _SystemTime()
        self._partitions = frozenset(partitions) if partitions is not None else None
        self._max_cpus = max_cpus_per_task
        super().__init__(
            retry_policy=retry_policy if retry_policy is not None else RetryPolicy.immediate()
        )
        self._next_id = first_job_id
        self._jobs: dict[str, FakeJob] = {}
        self._failures: dict[Operation, list[FailureKind]] = {}
        self._lock = threading.RLock()
        self.calls: dict[Operation, int] = {
            "submit": 0,
            "states": 0,
            "cancel": 0,
            "find_by_marker": 0,
            "ping": 0,
            "partition": 0,
        }
        """Scheduler calls made per operation (attempts, retries included)."""
        self._limits: dict[str, PartitionLimits] = {}
        self.controller_up = True
        """False: the controller answers DOWN (``ping`` fails as unreachable)."""
        self.reachable = True
        """False: no request reaches the scheduler (connection refused): every call fails
        transiently."""
        self._answering = threading.Event()
        self._answering.set()
        self._waiting = 0
        self._waiting_lock = threading.Lock()

    # -- test controls -------------------------------------------------------------------

    def fail_next(
        self, kind: FailureKind, *, operation: Operation = "submit", times: int = 1
    ) -> None:
        """Make the next ``times`` scheduler calls of ``operation`` fail as ``kind``."""
        with self._lock:
            self._failures.setdefault(operation, []).extend([kind] * times)

    def hang(self) -> None:
        """Stop answering: every scheduler call waits until ``answer`` (at most
        ``HANG_MAX_S``)."""
        self._answering.clear()

    def answer(self) -> None:
        """Answer again: the calls waiting go on."""
        self._answering.set()

    @property
    def waiting(self) -> int:
        """Scheduler calls waiting now for an answer (``hang``)."""
        with self._waiting_lock:
            return self._waiting

    def _wait_for_an_answer(self) -> None:
        with self._waiting_lock:
            self._waiting += 1
        try:
            answered = self._answering.wait(HANG_MAX_S)
        finally:
            with self._waiting_lock:
                self._waiting -= 1
        if not answered:
            raise TransientFailure("the scheduler did not answer", "controller", ambiguous=False)

    @property
    def jobs(self) -> Mapping[str, FakeJob]:
        """Every job the scheduler holds, by id, in submission order."""
        with self._lock:
            return dict(self._jobs)

    def job(self, job_id: str) -> FakeJob:
        with self._lock:
            return self._jobs[job_id]

    def set_state(
        self,
        job_id: str,
        state: JobState,
        *,
        reason: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        """Move a job to ``state`` (any state, for tests), dating its start when it first
        leaves the queue and its end when it first ends (a job that ends from the queue starts
        and ends at once, as Slurm dates a job cancelled while pending). Raises ``KeyError`` for
        unknown ids."""
        with self._lock:
            job = self._jobs[job_id]
            job.state, job.reason, job.exit_code = state, reason, exit_code
            self._date(job)

    def _date(self, job: FakeJob) -> None:
        now = self._clock.now()
        if job.state.has_started and job.started_at is None:
            job.started_at = now
        if job.state.is_terminal and job.ended_at is None:
            job.ended_at = now

    def start(self, job_id: str) -> None:
        self.set_state(job_id, JobState.RUNNING)

    def finish(self, job_id: str, exit_code: int = 0) -> None:
        """End a job: COMPLETED for exit code 0, FAILED (reason NonZeroExitCode) otherwise."""
        if exit_code == 0:
            self.set_state(job_id, JobState.COMPLETED, exit_code=0)
        else:
            self.set_state(job_id, JobState.FAILED, reason="NonZeroExitCode", exit_code=exit_code)

    def set_partition(self, limits: PartitionLimits) -> None:
        """Give a partition the limits ``partition`` reports (it then exists)."""
        with self._lock:
            self._limits[limits.name] = limits

    def forget(self, job_id: str) -> None:
        """Drop a job, as a scheduler purges old records: it becomes unknown."""
        with self._lock:
            del self._jobs[job_id]

    # -- one scheduler call each ---------------------------------------------------------

    def _injected(self, operation: Operation) -> FailureKind | None:
        self.calls[operation] += 1
        if not self.reachable:
            raise TransientFailure("scheduler unreachable", "controller", ambiguous=False)
        pending = self._failures.get(operation)
        return pending.pop(0) if pending else None

    @staticmethod
    def _raise_unless_accepted(kind: FailureKind | None) -> None:
        if kind == "transient":
            raise TransientFailure("scheduler unreachable (injected)", ambiguous=False)
        if kind == "permanent":
            raise SchedulerRejected(field="submitter", rule="request refused (injected)")
        if kind == "auth":
            raise SchedulerAuthError(field="submitter", rule="credentials refused (injected)")

    def submit_once(self, script: bytes, spec: JobSpec) -> str:
        self._wait_for_an_answer()
        with self._lock:
            kind = self._injected("submit")
            self._raise_unless_accepted(kind)
            if self._partitions is not None and spec.partition not in self._partitions:
                raise SchedulerRejected(
                    field="partition", rule=f"invalid partition name specified: {spec.partition!r}"
                )
            if self._max_cpus is not None and spec.cpus_per_task > self._max_cpus:
                raise SchedulerRejected(
                    field="cpus_per_task",
                    rule=f"more processors requested than permitted: {spec.cpus_per_task}",
                )
            job_id = str(self._next_id)
            self._next_id += 1
            self._jobs[job_id] = FakeJob(job_id=job_id, script=script, spec=spec)
            if kind == "ambiguous":
                raise TransientFailure("response lost after submission (injected)", ambiguous=True)
            return job_id

    def states_once(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        self._wait_for_an_answer()
        with self._lock:
            kind = self._injected("states")
            self._raise_unless_accepted(kind)
            found = {i: self._jobs[i].status() for i in dict.fromkeys(job_ids) if i in self._jobs}
            if kind == "ambiguous":
                raise TransientFailure("response lost (injected)", ambiguous=True)
            return found

    def cancel_once(self, job_id: str) -> None:
        self._wait_for_an_answer()
        with self._lock:
            kind = self._injected("cancel")
            self._raise_unless_accepted(kind)
            job = self._jobs.get(job_id)
            if job is None:
                raise UnknownJob(field="job_id", rule=f"invalid job id specified: {job_id}")
            if not job.state.is_terminal:
                job.state, job.reason = JobState.CANCELLED, None
                self._date(job)
            if kind == "ambiguous":
                raise TransientFailure("response lost after cancel (injected)", ambiguous=True)

    def ping_once(self) -> str:
        self._wait_for_an_answer()
        with self._lock:
            self._raise_unless_accepted(self._injected("ping"))
            if not self.controller_up:
                raise TransientFailure("fake controller is DOWN", "controller", ambiguous=False)
            return "fake controller UP"

    def partition_once(self, name: str) -> PartitionLimits | None:
        self._wait_for_an_answer()
        with self._lock:
            self._raise_unless_accepted(self._injected("partition"))
            if not self.controller_up:
                raise TransientFailure("fake controller is DOWN", "controller", ambiguous=False)
            if name in self._limits:
                return self._limits[name]
            if self._partitions is not None and name not in self._partitions:
                return None
            return PartitionLimits(name=name, state="UP", max_cpus_per_node=self._max_cpus)

    def find_once(self, marker: str) -> str | None:
        self._wait_for_an_answer()
        with self._lock:
            kind = self._injected("find_by_marker")
            self._raise_unless_accepted(kind)
            if kind == "ambiguous":
                raise TransientFailure("response lost (injected)", ambiguous=True)
            for job in self._jobs.values():
                if job.spec.comment == marker:
                    return job.job_id
            return None

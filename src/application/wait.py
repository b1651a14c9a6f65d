"""Wait for lifecycles: poll with capped backoff until every job is terminal (docs/design.md,
"Observe and wait").

Each poll is ONE scheduler call for every lifecycle not yet finished (``Observe``). Terminal:
the scheduler's terminal states, ``LOST`` (the scheduler no longer knows the job) and
``SUBMISSION_UNKNOWN`` (a submit died half way: there may be no job to wait for). A lifecycle
only staged has nothing to wait for and is refused before the first poll. Nothing is cancelled
when the time runs out.

Between two scheduler calls it reads the jobs' progress records (``progress``, about every
second, no scheduler call): when one says its job ended, the next scheduler call comes at once
and confirms it; a job the scheduler does not call terminal yet (``COMPLETING``) is asked again
``RECHECK_S`` later. The record only brings the scheduler call forward: a job is finished when
the scheduler says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from slurm_image.application.errors import JobNotSuccessful, NotSubmitted, WaitTimedOut
from slurm_image.application.status import LifecycleStatus, Statuses, is_final, succeeded
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.ports.clock import Clock

log = logging.getLogger(__name__)

FIRST_POLL_S = 2.0
MAX_POLL_S = 30.0
BACKOFF = 1.5
PROGRESS_READ_S = 1.0
RECHECK_S = 2.0


@dataclass(frozen=True)
class WaitResult:
    lifecycles: list[LifecycleStatus]
    timed_out: bool
    elapsed_s: float

    @property
    def failed(self) -> list[LifecycleStatus]:
        return [s for s in self.lifecycles if is_final(s) and not succeeded(s)]

    @property
    def ok(self) -> bool:
        return not self.timed_out and not self.failed


def pauses(first_s: float = FIRST_POLL_S, cap_s: float = MAX_POLL_S) -> Iterator[float]:
    """The pauses between two scheduler calls of one wait: ``first_s``, growing by ``BACKOFF``
    up to ``cap_s``."""
    pause = first_s
    while True:
        yield pause
        pause = min(pause * BACKOFF, cap_s)


Progress = Callable[[Sequence[LifecycleStatus], float], None]
Refresh = Callable[[LifecycleStatus], LifecycleStatus]
"""A status with its job's progress record read again (``Observe.with_progress``)."""


def _ended(status: LifecycleStatus) -> bool:
    return status.progress is not None and status.progress.is_ended


class Wait:
    """Poll until every lifecycle is final, or ``timeout_s`` elapsed (see the module docstring).

    ``on_poll(statuses, elapsed_s)`` is called after every poll and every read of the
    progress records (a progress display).
    """

    def __init__(
        self,
        observe: Statuses,
        clock: Clock,
        *,
        sleep: Callable[[float], None] = time.sleep,
        first_poll_s: float = FIRST_POLL_S,
        max_poll_s: float = MAX_POLL_S,
        progress: Refresh | None = None,
        read_every_s: float = PROGRESS_READ_S,
    ) -> None:
        self._observe = observe
        self._clock = clock
        self._sleep = sleep
        self._first = first_poll_s
        self._cap = max_poll_s
        self._progress = progress
        self._read_every = read_every_s

    def __call__(
        self,
        lifecycle_ids: Sequence[str],
        *,
        timeout_s: float | None = None,
        on_poll: Progress | None = None,
    ) -> WaitResult:
        ids = list(dict.fromkeys(lifecycle_ids))
        start = self._clock.now()
        latest: dict[str, LifecycleStatus] = {}
        schedule = pauses(self._first, self._cap)
        while True:
            pending = [i for i in ids if i not in latest or not is_final(latest[i])]
            for status in self._observe(pending):
                previous = latest.get(status.lifecycle_id)
                if previous is None or previous.state != status.state:
                    log.info(
                        "job %s is %s%s",
                        status.job_id,
                        status.state,
                        f" (exit {status.exit_code})" if status.exit_code is not None else "",
                        extra={"lifecycle_id": status.lifecycle_id},
                    )
                if status.state is LifecycleState.STAGED:
                    raise NotSubmitted(
                        field="lifecycle_id",
                        rule=f"{status.lifecycle_id} is staged, not submitted: nothing to wait for"
                        f" (submit it first)",
                    )
                latest[status.lifecycle_id] = status
            elapsed = (self._clock.now() - start).total_seconds()
            ordered = [latest[i] for i in ids]
            if on_poll is not None:
                on_poll(ordered, elapsed)
            if all(is_final(s) for s in ordered):
                return WaitResult(ordered, timed_out=False, elapsed_s=elapsed)
            if timeout_s is not None and elapsed >= timeout_s:
                return WaitResult(ordered, timed_out=True, elapsed_s=elapsed)
            pause = next(schedule)
            nap = pause if timeout_s is None else min(pause, max(0.0, timeout_s - elapsed))
            if any(_ended(s) and not is_final(s) for s in ordered):
                nap = min(nap, RECHECK_S)
            self._pause(nap, ids, latest, start, on_poll)

    def _pause(
        self,
        nap: float,
        ids: Sequence[str],
        latest: dict[str, LifecycleStatus],
        start: datetime,
        on_poll: Progress | None,
    ) -> None:
        """Sleep ``nap`` seconds; with progress records, in steps of ``read_every_s``, each
        followed by one read of every unfinished job's record, and cut short when one says its
        job ended (and did not say so at the last scheduler call)."""
        if self._progress is None:
            self._sleep(nap)
            return
        known = {i for i in ids if _ended(latest[i])}
        waited = 0.0
        while waited < nap:
            step = min(self._read_every, nap - waited)
            self._sleep(step)
            waited += step
            for i in ids:
                if not is_final(latest[i]):
                    latest[i] = self._progress(latest[i])
            if on_poll is not None:
                elapsed = (self._clock.now() - start).total_seconds()
                on_poll([latest[i] for i in ids], elapsed)
            if any(_ended(latest[i]) and i not in known for i in ids if not is_final(latest[i])):
                return


def require_success(result: WaitResult) -> None:
    """Raise ``WaitTimedOut`` or ``JobNotSuccessful`` unless every lifecycle succeeded."""
    if result.timed_out:
        running = ", ".join(
            f"{s.lifecycle_id} ({s.state})" for s in result.lifecycles if not is_final(s)
        )
        raise WaitTimedOut(
            field="timeout", rule=f"{result.elapsed_s:.0f} s elapsed while still running: {running}"
        )
    if result.failed:
        failed = "; ".join(
            f"{s.lifecycle_id} job {s.job_id} {s.state}"
            + (f" exit {s.exit_code}" if s.exit_code is not None else "")
            + (f" ({s.reason})" if s.reason else "")
            for s in result.failed
        )
        raise JobNotSuccessful(field="state", rule=failed)

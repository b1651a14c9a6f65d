"""``scheduler_calls_per_poll_100_jobs``: every call one ``wait`` poll of 100 running jobs makes
to the scheduler."""

from __future__ import annotations

from typing import Any

from workloads import Site

from slurm_image.adapters.local_store import LocalStore
from slurm_image.adapters.memory import FakeSubmitter
from slurm_image.adapters.system_clock import SystemClock
from slurm_image.application.observe import Observe
from slurm_image.application.wait import Wait


class CountingSubmitter:
    """A ``BatchSubmitter`` that counts every call reaching the scheduler."""

    def __init__(self, inner: FakeSubmitter) -> None:
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return attribute(*args, **kwargs)

        return counted


def scheduler_calls_per_poll(site: Site, jobs: int) -> int:
    """Submit ``jobs`` attempts, leave them RUNNING, and count the calls of one poll."""
    fake = FakeSubmitter()
    counting = CountingSubmitter(fake)
    submit = site.fake.container.submit(submitter=counting)
    ids = site.staged(jobs, site.fake)
    for lifecycle_id in ids:
        fake.start(submit.staged(lifecycle_id).job_id)
    store = LocalStore(str(site.root))
    wait = Wait(Observe(store, counting), SystemClock(), sleep=lambda _: None)
    counting.calls = 0
    result = wait(ids, timeout_s=0)
    if len(result.lifecycles) != jobs or not result.timed_out:
        raise SystemExit("the poll did not see every job running")
    return counting.calls

"""The BatchSubmitter contract, run against every adapter: fake, sbatch, rest-tcp, rest-unix.

The suite itself is the shipped one (``slurm_image.testing.submitter_contract``), the same
classes a site's submitter runs (docs/site-submitter.md); each class below gives it a
``scheduler`` and adds what this project's adapters promise beyond the contract. The real
adapters run against every local cluster (``scripts/local-slurm [--slurm 24.11|26.05] up``:
Slurm 22.05, 24.11 and 26.05, each with its own slurmrestd), whose partitions are ``cpu``
(default) and ``build``; every job here goes to ``build`` so a spec's partition is seen to be
honoured.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from clusters import CLUSTERS, Cluster, cluster
from slurm_image.adapters.memory import FakeClock, FakeSubmitter, Operation
from slurm_image.adapters.sbatch import SbatchSubmitter
from slurm_image.adapters.slurmrest import RestSubmitter
from slurm_image.domain.job import JobState
from slurm_image.ports.submitter import BatchSubmitter, SchedulerAuthError, SchedulerUnavailable
from slurm_image.submitters import RetryPolicy
from slurm_image.testing.submitter_contract import (
    UNKNOWN_JOB_ID,
    Landed,
    LostAnswerContract,
    RefusedCredentialsContract,
    Scheduler,
    Spec,
    SubmitterContract,
    script,
    wait_terminal,
)

OPERATIONS: tuple[Operation, ...] = (
    "submit",
    "states",
    "cancel",
    "find_by_marker",
    "ping",
    "partition",
)
SERIES = [pytest.param(s, marks=pytest.mark.slurm, id=f"slurm-{s}") for s in CLUSTERS]


# -- the in-memory fake ----------------------------------------------------------------------


class FakeScheduler(Scheduler):
    """The ``FakeSubmitter`` is its own scheduler: tests play its jobs and inject failures."""

    def __init__(self) -> None:
        self.fake: FakeSubmitter | None = None
        self.made: list[FakeSubmitter] = []

    def _new(self, retry_policy: RetryPolicy) -> FakeSubmitter:
        made = FakeSubmitter(
            partitions={"cpu", "build"}, max_cpus_per_task=2, retry_policy=retry_policy
        )
        self.made.append(made)
        return made

    def make_submitter(self, *, retry_policy: RetryPolicy) -> FakeSubmitter:
        if self.fake is None:
            self.fake = self._new(retry_policy)
        return self.fake

    def unreachable_submitter(self, *, retry_policy: RetryPolicy) -> FakeSubmitter:
        down = self._new(retry_policy)
        down.controller_up = False
        return down

    def refused_credentials_submitter(self, *, retry_policy: RetryPolicy) -> FakeSubmitter:
        refusing = self._new(retry_policy)
        for operation in OPERATIONS:
            refusing.fail_next("auth", operation=operation, times=10)
        return refusing

    @contextmanager
    def controller_down(self) -> Iterator[None]:
        assert self.fake is not None
        self.fake.reachable = False
        try:
            yield
        finally:
            self.fake.reachable = True

    def landed(self, job_id: str) -> Landed:
        assert self.fake is not None
        job = self.fake.job(job_id)
        spec = job.spec
        return Landed(
            name=spec.name,
            partition=spec.partition,
            cpus_per_task=spec.cpus_per_task,
            memory=spec.memory,
            time_limit=spec.time_limit,
            working_directory=spec.working_directory,
            standard_output=spec.standard_output.replace("%j", job_id),
            standard_error=spec.standard_error.replace("%j", job_id),
            comment=spec.comment,
            script=job.script,
        )

    def jobs_with_marker(self, marker: str) -> list[str]:
        return [
            job.job_id
            for fake in self.made
            for job in fake.jobs.values()
            if job.spec.comment == marker
        ]

    def finish(self, job_id: str, exit_code: int) -> None:
        assert self.fake is not None
        self.fake.start(job_id)
        self.fake.finish(job_id, exit_code)

    def lose_next_submit_answer(self) -> None:
        assert self.fake is not None
        self.fake.fail_next("ambiguous")


class TestFakeSubmitter(SubmitterContract, RefusedCredentialsContract, LostAnswerContract):
    @pytest.fixture
    def scheduler(self) -> FakeScheduler:
        return FakeScheduler()

    @pytest.fixture
    def fake(self, submitter: BatchSubmitter) -> FakeSubmitter:
        assert isinstance(submitter, FakeSubmitter)
        return submitter

    def test_it_is_named_fake(self, fake: FakeSubmitter) -> None:
        assert fake.name == "fake"

    def test_states_of_many_jobs_take_one_scheduler_call(
        self, fake: FakeSubmitter, job_spec: Spec
    ) -> None:
        first = fake.submit(script("true"), job_spec())
        second = fake.submit(script("true"), job_spec())
        before = fake.calls["states"]
        assert set(fake.states([first, second, UNKNOWN_JOB_ID, "not-an-id"])) == {first, second}
        assert fake.calls["states"] == before + 1

    def test_a_transient_failure_is_retried_as_often_as_the_policy_says(
        self, fake: FakeSubmitter, job_spec: Spec, retry_policy: RetryPolicy
    ) -> None:
        fake.fail_next("transient", times=retry_policy.attempts)
        with pytest.raises(SchedulerUnavailable):
            fake.submit(script("true"), job_spec())
        assert fake.calls["submit"] == retry_policy.attempts
        assert fake.jobs == {}

    def test_a_job_is_dated_by_the_fakes_clock_as_slurm_dates_it(self, job_spec: Spec) -> None:
        clock = FakeClock(datetime(2026, 1, 31, 12, tzinfo=UTC))
        fake = FakeSubmitter(clock=clock)
        ran = fake.submit(script("true"), job_spec())
        assert fake.states([ran])[ran].started_at is None  # queued: no start yet
        clock.advance(timedelta(seconds=5))
        fake.start(ran)
        clock.advance(timedelta(seconds=30))
        running = fake.states([ran])[ran]
        assert (running.started_at, running.ended_at) == (clock.now() - timedelta(seconds=30), None)
        fake.finish(ran, 3)
        assert fake.states([ran])[ran].run_seconds == 30.0
        queued = fake.submit(script("true"), job_spec())
        fake.cancel(queued)  # cancelled while pending: started and ended at the cancel
        cancelled = fake.states([queued])[queued]
        assert (cancelled.started_at, cancelled.run_seconds) == (clock.now(), 0.0)


# -- the real adapters on the local clusters ---------------------------------------------------


class SlurmScheduler(Scheduler):
    """A local cluster, read through its own clients (scontrol, squeue)."""

    def __init__(self, local: Cluster, tmp_path: Path) -> None:
        self.local = local
        self.tmp_path = tmp_path

    @contextmanager
    def controller_down(self) -> Iterator[None]:
        self.local.await_no_jobs()  # an earlier test's job may still be ending
        self.local.run("controller", "stop")
        try:
            yield
        finally:
            self.local.run("controller", "start")

    def landed(self, job_id: str) -> Landed:
        job = self.local.show_job(job_id)
        return Landed(
            name=job["JobName"],
            partition=job["Partition"],
            cpus_per_task=int(job["NumCPUs"]),
            memory=job["MinMemoryNode"],
            time_limit=job["TimeLimit"],
            working_directory=job["WorkDir"],
            standard_output=job["StdOut"],
            standard_error=job["StdErr"],
            comment=job["Comment"],
        )

    def jobs_with_marker(self, marker: str) -> list[str]:
        return self.local.jobs_with_comment(marker)


class SbatchScheduler(SlurmScheduler):
    def make_submitter(self, *, retry_policy: RetryPolicy) -> SbatchSubmitter:
        return self._submitter(self.local.slurm_conf, retry_policy)

    def unreachable_submitter(self, *, retry_policy: RetryPolicy) -> SbatchSubmitter:
        # The controller stays up for everyone else: this client is told a port nobody serves,
        # and gives up connecting after 2 s rather than the cluster's MessageTimeout.
        conf = Path(self.local.slurm_conf).read_text()
        lines = [
            line
            for line in conf.splitlines()
            if not line.startswith(("SlurmctldPort=", "MessageTimeout="))
        ]
        lines += ["SlurmctldPort=9", "MessageTimeout=2"]
        elsewhere = self.tmp_path / "slurm.conf"
        elsewhere.write_text("\n".join(lines) + "\n")
        return self._submitter(str(elsewhere), retry_policy)

    def _submitter(self, slurm_conf: str, retry_policy: RetryPolicy) -> SbatchSubmitter:
        return SbatchSubmitter(
            sbatch=self.local.sbatch,
            timeout_s=30,
            retry_policy=retry_policy,
            environ={"SLURM_CONF": slurm_conf},
        )


class RestTcpScheduler(SlurmScheduler):
    def make_submitter(self, *, retry_policy: RetryPolicy) -> RestSubmitter:
        return self._submitter(self.local.rest_url, self.local.token_file, retry_policy)

    def unreachable_submitter(self, *, retry_policy: RetryPolicy) -> RestSubmitter:
        return self._submitter("http://127.0.0.1:9", self.local.token_file, retry_policy)

    def refused_credentials_submitter(self, *, retry_policy: RetryPolicy) -> RestSubmitter:
        bad = self.tmp_path / "bad-token"
        bad.write_text("eyJhbGciOiJIUzI1NiJ9.e30.not-a-valid-signature\n")
        bad.chmod(0o600)  # a private file, so the server is what refuses it
        return self._submitter(self.local.rest_url, str(bad), retry_policy)

    def _submitter(self, url: str, token_file: str, retry_policy: RetryPolicy) -> RestSubmitter:
        return RestSubmitter(
            url=url, user=self.local.rest_user, token_file=token_file, retry_policy=retry_policy
        )


class RestUnixScheduler(SlurmScheduler):
    def make_submitter(self, *, retry_policy: RetryPolicy) -> RestSubmitter:
        return RestSubmitter(url=f"unix://{self.local.rest_socket}", retry_policy=retry_policy)

    def unreachable_submitter(self, *, retry_policy: RetryPolicy) -> RestSubmitter:
        return RestSubmitter(url=f"unix://{self.tmp_path}/absent.sock", retry_policy=retry_policy)


class SlurmPromises:
    """What the sbatch and REST adapters promise beyond the contract, on a real cluster."""

    NAME = ""

    def test_it_carries_its_kind_name(self, submitter: BatchSubmitter) -> None:
        assert submitter.name == self.NAME

    def test_the_job_is_one_task_on_one_node(
        self, submitter: BatchSubmitter, scheduler: SlurmScheduler, job_spec: Spec
    ) -> None:
        job_id = submitter.submit(script("echo landed"), job_spec())
        job = scheduler.local.show_job(job_id)
        assert job["TimeLimit"] == "00:05:00"
        assert job["NumNodes"] in {"1", "1-1"}  # a pending job shows the requested range
        assert job["NumTasks"] == "1"

    def test_ping_names_the_primary_controller_up(self, submitter: BatchSubmitter) -> None:
        answer = submitter.ping()
        assert answer.endswith("UP")
        assert "primary" in answer.lower()

    def test_a_job_reports_when_it_ran_as_slurm_counts_its_run_time(
        self, submitter: BatchSubmitter, scheduler: SlurmScheduler, job_spec: Spec
    ) -> None:
        before = datetime.now(UTC).replace(microsecond=0)
        job_id = submitter.submit(script("sleep 3; exit 3"), job_spec())
        deadline = time.monotonic() + 60
        while (running := submitter.states([job_id])[job_id]).state is JobState.PENDING:
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.3)
        if running.state is JobState.RUNNING:
            assert running.started_at is not None and running.ended_at is None
        status, _ = wait_terminal(submitter, job_id)
        assert status.started_at is not None and status.ended_at is not None
        assert before <= status.started_at <= status.ended_at <= datetime.now(UTC)
        hours, minutes, seconds = re.split("[:-]", scheduler.local.show_job(job_id)["RunTime"])[-3:]
        assert status.run_seconds == int(hours) * 3600 + int(minutes) * 60 + int(seconds) >= 3

    def test_the_partition_reports_the_node_it_has(self, submitter: BatchSubmitter) -> None:
        limits = submitter.partition("build")
        assert limits is not None  # the local cluster's one node: 2 CPUs, unlimited partition
        assert limits.node_cpus == 2
        assert limits.node_memory_mib is not None and limits.node_memory_mib > 200
        assert limits.max_time_minutes is None


def _scheduler(kind: type[SlurmScheduler], request: Any, tmp_path: Path) -> SlurmScheduler:
    return kind(cluster(str(request.param)), tmp_path)


class TestSbatchSubmitter(SlurmPromises, SubmitterContract):
    NAME = "sbatch"

    @pytest.fixture(params=SERIES)
    def scheduler(self, request: pytest.FixtureRequest, tmp_path: Path) -> SlurmScheduler:
        return _scheduler(SbatchScheduler, request, tmp_path)


class TestRestSubmitterOverTcp(SlurmPromises, SubmitterContract, RefusedCredentialsContract):
    NAME = "rest"

    @pytest.fixture(params=SERIES)
    def scheduler(self, request: pytest.FixtureRequest, tmp_path: Path) -> SlurmScheduler:
        return _scheduler(RestTcpScheduler, request, tmp_path)

    def test_ping_with_refused_credentials_raises_an_auth_error(
        self, refused: BatchSubmitter, scheduler: SlurmScheduler
    ) -> None:
        # slurmrestd 22.05 answers a refused token on /ping as it answers a down controller
        # (-1): the error must then say that it may be either. 24.11 and 26.05 answer 200 with
        # the controller not responding; the adapter's authenticated read then finds the refusal
        # (tests/unit/test_rest_ping.py).
        with pytest.raises((SchedulerAuthError, SchedulerUnavailable)) as caught:
            refused.ping()
        if isinstance(caught.value, SchedulerUnavailable):
            assert "token is refused" in caught.value.reason
            assert scheduler.local.series == "22.05"


# sbatch and rest over the unix socket authenticate as the calling user: no credentials to
# refuse. The real adapters meet real lost answers in tests/integration/test_exactly_once.py.
class TestRestSubmitterOverUnixSocket(SlurmPromises, SubmitterContract):
    NAME = "rest"

    @pytest.fixture(params=SERIES)
    def scheduler(self, request: pytest.FixtureRequest, tmp_path: Path) -> SlurmScheduler:
        return _scheduler(RestUnixScheduler, request, tmp_path)

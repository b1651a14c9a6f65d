"""The job's progress record: the model, what status reads of it, wait's early notice of a
job's end (scheduler calls and reads counted on a fake clock), and the logs use case."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from slurm_image.adapters.memory import FakeClock, FakeSubmitter
from slurm_image.application.errors import NotSubmitted, UnknownLifecycle
from slurm_image.application.logs import Logs
from slurm_image.application.observe import Observe
from slurm_image.application.prepare import Prepare
from slurm_image.application.status import LifecycleStatus
from slurm_image.application.submit import Submit
from slurm_image.application.wait import RECHECK_S, Wait
from slurm_image.domain.errors import InvalidRecord
from slurm_image.domain.job import JobState
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.progress import PROGRESS_MAX_BYTES, JobProgress, load_progress

ID = "img-" + "1" * 32


def record(**fields: Any) -> bytes:
    document = {"format": 1, "phase": "download", "updated_at": 1_700_000_000, **fields}
    return json.dumps(document).encode()


# -- the model ---------------------------------------------------------------------------------


def test_a_download_record_reads_with_its_counters_and_describes_them() -> None:
    progress = load_progress(
        record(layers_done=1, layers_total=3, bytes_done=2_000_000, bytes_total=6_100_000)
    )
    assert progress.counters() == {
        "layers_done": 1,
        "layers_total": 3,
        "bytes_done": 2_000_000,
        "bytes_total": 6_100_000,
    }
    assert progress.describe() == "download 1/3 layers 2.0 MB of 6.1 MB"
    assert not progress.is_ended


def test_a_failed_record_keeps_its_phase_and_exit_code() -> None:
    progress = load_progress(record(ended="failed", exit_code=79))
    assert (progress.phase, progress.is_ended, progress.exit_code) == ("download", True, 79)
    assert progress.describe() == "download failed (exit 79)"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (record(phase="unpack"), "progress.phase"),
        (record(format=2), "progress.format"),
        (record(updated_at="now"), "progress.updated_at"),
        (record(layers_done=-1, layers_total=2), "progress.layers_done"),
        (record(layers_done=1), "progress.layers_done"),
        (record(ended="failed"), "progress.exit_code"),
        (record(ended="failed", exit_code=0), "progress.exit_code"),
        (record(ended="done", exit_code=0), "progress.ended"),
        (record(exit_code=300, ended="failed"), "progress.exit_code"),
        (record(owner="image"), "progress.owner"),
        (b"{", "progress"),
        (b" " * (PROGRESS_MAX_BYTES + 1), "progress"),
    ],
)
def test_a_malformed_or_oversized_record_is_refused_naming_the_field(
    data: bytes, field: str
) -> None:
    with pytest.raises(InvalidRecord) as refused:
        load_progress(data)
    assert refused.value.field == field


# -- status ------------------------------------------------------------------------------------


class Lab:
    def __init__(self, harness: Any, profile_for: Any, request: Any, runtime: Any) -> None:
        self.harness = harness
        self.scheduler = FakeSubmitter()
        self.profile, self.selection = profile_for(harness.root)
        self.clock = FakeClock()
        self.prepare = Prepare(self.clock, runtime, harness.workspace)
        self.submit = Submit(harness.workspace, self.scheduler, self.clock)
        self.observe = Observe(harness.workspace, self.scheduler)
        self.request = request
        self.layout = AttemptLayout(harness.root, ID)

    def staged(self) -> None:
        self.prepare(self.request, self.profile, self.selection, ID)

    def submitted(self) -> str:
        self.staged()
        return self.submit.staged(ID).job_id


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, import_request: Any, runtime_files: Any) -> Lab:
    return Lab(workspace_harness, profile_for, import_request, runtime_files)


def test_status_carries_the_phase_and_counters_the_job_recorded(lab: Lab) -> None:
    job = lab.submitted()
    lab.scheduler.start(job)
    lab.harness.write(
        lab.layout.progress_record,
        record(layers_done=2, layers_total=5, bytes_done=1, bytes_total=9),
    )
    (status,) = lab.observe([ID])
    assert status.progress is not None and status.progress.phase == "download"
    document = status.as_dict()
    assert document["phase"] == "download"
    assert document["progress"] == {
        "format": 1,
        "phase": "download",
        "updated_at": 1_700_000_000,
        "layers_done": 2,
        "layers_total": 5,
        "bytes_done": 1,
        "bytes_total": 9,
    }
    assert document["progress_error"] is None


def test_status_without_a_record_has_no_phase(lab: Lab) -> None:
    lab.submitted()
    (status,) = lab.observe([ID])
    assert status.as_dict()["phase"] is None and status.progress_error is None


def test_a_malformed_record_is_reported_by_field_and_status_still_answers(lab: Lab) -> None:
    job = lab.submitted()
    lab.scheduler.finish(job)
    lab.harness.write(lab.layout.progress_record, record(phase="unpack"))
    (status,) = lab.observe([ID])
    assert status.state == JobState.COMPLETED
    assert status.progress is None
    assert status.progress_error is not None
    assert "progress.phase" in status.progress_error
    assert lab.layout.progress_record in status.progress_error


def test_a_symlinked_record_is_refused(lab: Lab) -> None:
    lab.submitted()
    lab.harness.symlink(lab.layout.plan, lab.layout.progress_record)
    (status,) = lab.observe([ID])
    assert status.progress is None and status.progress_error is not None


def test_an_oversized_record_is_refused_naming_its_bound(lab: Lab) -> None:
    lab.submitted()
    lab.harness.write(lab.layout.progress_record, b" " * (PROGRESS_MAX_BYTES + 1))
    (status,) = lab.observe([ID])
    assert status.progress is None
    assert status.progress_error is not None and str(PROGRESS_MAX_BYTES) in status.progress_error


# -- wait: the end noticed from the record -----------------------------------------------------


def ended(phase: str = "done", exit_code: int = 0) -> JobProgress:
    fields: dict[str, Any] = {"phase": phase, "ended": "done" if exit_code == 0 else "failed"}
    return load_progress(record(exit_code=exit_code, **fields))


RUNNING = load_progress(record(phase="squash"))


class World:
    """A scheduler answering from a script of states, a progress record that says the job
    ended from a given read on, and a log of every scheduler call and read in order."""

    def __init__(self, states: list[JobState], ends_at_read: int) -> None:
        self.clock = FakeClock()
        self.states = states
        self.ends_at_read = ends_at_read
        self.events: list[str] = []
        self.reads = 0

    def observe(self, ids: Any) -> list[LifecycleStatus]:
        self.events.append("poll")
        state = self.states[min(self.events.count("poll"), len(self.states)) - 1]
        exit_code = 0 if state is JobState.COMPLETED else None
        # Observe reads the record too, as part of its call
        progress = ended() if self.reads >= self.ends_at_read else RUNNING
        return [LifecycleStatus(i, "7", state, exit_code=exit_code, progress=progress) for i in ids]

    def refresh(self, status: LifecycleStatus) -> LifecycleStatus:
        self.events.append("read")
        self.reads += 1
        progress = ended() if self.reads >= self.ends_at_read else RUNNING
        return replace(status, progress=progress)

    def sleep(self, seconds: float) -> None:
        self.clock.advance(timedelta(seconds=seconds))

    def wait(self, **options: Any) -> Wait:
        return Wait(self.observe, self.clock, sleep=self.sleep, progress=self.refresh, **options)


def test_wait_asks_the_scheduler_once_as_soon_as_the_record_says_the_job_ended() -> None:
    world = World([JobState.RUNNING, JobState.COMPLETED], ends_at_read=4)

    result = world.wait(first_poll_s=30)([ID])

    assert result.ok
    # four reads a second apart, then at once the one call that confirms: not 30 s of reads
    assert world.events == ["poll", "read", "read", "read", "read", "poll"]


def test_a_job_still_completing_is_asked_again_a_few_seconds_later() -> None:
    world = World([JobState.RUNNING, JobState.COMPLETING, JobState.COMPLETED], ends_at_read=2)

    result = world.wait(first_poll_s=30)([ID])

    assert result.ok
    recheck = ["read"] * int(RECHECK_S)
    assert world.events == ["poll", "read", "read", "poll", *recheck, "poll"]


def test_without_an_ended_record_wait_keeps_its_backoff_and_reads_between_polls() -> None:
    world = World([JobState.RUNNING, JobState.RUNNING, JobState.COMPLETED], ends_at_read=10**6)

    result = world.wait(first_poll_s=2, max_poll_s=30)([ID])

    assert result.ok
    assert world.events == ["poll", "read", "read", "poll", "read", "read", "read", "poll"]


def test_the_display_sees_each_read_with_its_phase() -> None:
    world = World([JobState.RUNNING, JobState.COMPLETED], ends_at_read=3)
    phases: list[str | None] = []

    def on_poll(statuses: Any, elapsed: float) -> None:
        progress = statuses[0].progress
        phases.append(progress.phase if progress else None)

    world.wait(first_poll_s=30)([ID], on_poll=on_poll)

    assert phases == ["squash", "squash", "squash", "done", "done"]


# -- logs --------------------------------------------------------------------------------------


class Files:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.reads = 0

    def read_from(self, path: str, offset: int, max_bytes: int) -> bytes:
        self.reads += 1
        return self.data.get(path, b"")[offset : offset + max_bytes]


def test_logs_prints_the_jobs_output_then_error_log(lab: Lab) -> None:
    job = lab.submitted()
    files = Files()
    out, err = lab.layout.job_logs(job)
    assert (out, err) == (
        lab.layout.in_job(f"slurm-{job}.out"),
        lab.layout.in_job(f"slurm-{job}.err"),
    )
    files.data = {out: b"hello\n", err: b"slurm-image: importing\n"}
    written: list[tuple[str, bytes]] = []

    Logs(lab.harness.workspace, files, lab.observe)(ID, lambda p, d: written.append((p, d)))

    assert written == [(out, b"hello\n"), (err, b"slurm-image: importing\n")]
    assert lab.scheduler.calls["states"] == 0  # no --follow: no scheduler call


def test_logs_follow_prints_what_the_logs_gain_until_the_job_ends(lab: Lab) -> None:
    job = lab.submitted()
    lab.scheduler.start(job)
    files = Files()
    _out, err = lab.layout.job_logs(job)
    files.data = {err: b"one\n"}
    written: list[bytes] = []
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        files.data[err] += b"two\n" if len(naps) == 1 else b"three\n"
        if len(naps) == 2:
            lab.scheduler.finish(job)

    logs = Logs(lab.harness.workspace, files, lab.observe, sleep=sleep)
    logs(ID, lambda p, d: written.append(d), follow=True)

    assert b"".join(written) == b"one\ntwo\nthree\n"
    assert len(naps) == 2
    assert lab.scheduler.calls["states"] == 3


def test_logs_of_an_unknown_or_never_submitted_lifecycle_say_why(lab: Lab) -> None:
    logs = Logs(lab.harness.workspace, Files(), lab.observe)
    with pytest.raises(UnknownLifecycle):
        logs(ID, lambda p, d: None)
    lab.staged()
    with pytest.raises(NotSubmitted) as refused:
        logs(ID, lambda p, d: None)
    assert "never submitted" in refused.value.rule and ID in refused.value.rule


def test_a_log_cursor_hands_on_a_budget_a_pass_and_waits_for_nothing(lab: Lab) -> None:
    job = lab.submitted()
    lab.scheduler.start(job)
    files = Files()
    out, err = lab.layout.job_logs(job)
    files.data = {out: b"o" * 10, err: b"e" * 10}
    written: list[bytes] = []
    cursor = Logs(lab.harness.workspace, files, lab.observe).open(ID, follow=True)

    assert cursor.read(lambda p, d: written.append(d), budget=15) is False
    assert b"".join(written) == b"o" * 10 + b"e" * 5 and cursor.more
    assert cursor.read(lambda p, d: written.append(d), budget=15) is False
    assert b"".join(written) == b"o" * 10 + b"e" * 10 and not cursor.more
    assert lab.scheduler.calls["states"] == 1, "a pass that only drains asks no scheduler"
    files.data[err] += b"!"
    lab.scheduler.finish(job)
    assert cursor.read(lambda p, d: written.append(d)) is True
    assert written[-1] == b"!"

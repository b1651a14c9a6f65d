"""The use cases record what they change in the store's history (application.history), with the
memory adapters: each event kind with its fields, a failed job once however often it is
observed, and a history that cannot be appended to never undoing or failing the change."""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from publish_support import SOURCE_DIGEST, SQSH_BYTES, PublishLab
from slurm_image.adapters.memory import MemoryHistory, MemoryLocks, MemoryStore
from slurm_image.application.cancel import Cancel
from slurm_image.application.catalog import Catalog
from slurm_image.application.errors import JobNotSuccessful, StillRunning, UnknownAlias
from slurm_image.application.history import (
    JOB_END_MARKER,
    Actor,
    NoticeJobEnds,
    RecordHistory,
    RecordRefusals,
)
from slurm_image.application.maintain import Maintain
from slurm_image.application.observe import Observe
from slurm_image.application.publish import Publish
from slurm_image.application.read_history import FollowHistory, ReadHistory
from slurm_image.application.wait import Wait
from slurm_image.domain.credentials import staged_credentials_path
from slurm_image.domain.errors import DomainError, InvalidRequest, SourceNotAllowed
from slurm_image.domain.history import HistoryEvent
from slurm_image.domain.job import JobState
from slurm_image.domain.layer_cache import CacheBound
from slurm_image.domain.publication import JobRun
from slurm_image.domain.request import make_request
from slurm_image.domain.requester import Requester
from slurm_image.ports.history import HistoryError

pytestmark = pytest.mark.parametrize("workspace_harness", ["memory"], indirect=True)

A, B, C = (f"img-{n:032x}" for n in range(1, 4))
SHA = hashlib.sha256(SQSH_BYTES).hexdigest()
ACTOR = Actor(user="ada", uid=1000, host="login1")
START = datetime(2024, 1, 1, tzinfo=UTC)


class HistoryLab(PublishLab):
    """A ``PublishLab`` whose use cases record in a ``MemoryHistory``."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        assert isinstance(self.store, MemoryStore) and isinstance(self.locks, MemoryLocks)
        self.history = MemoryHistory(self.store, self.locks)
        self.record = RecordHistory(self.history, self.clock, ACTOR)
        self.plain_observe = Observe(self.store, self.scheduler)
        self.observe = NoticeJobEnds(self.plain_observe, self.store, self.record)  # type: ignore[assignment]

    def publisher(self, **options: Any) -> Publish:
        return super().publisher(history=self.record, **options)

    def maintain(self) -> Maintain:
        return Maintain(
            self.store,
            self.locks,
            self.plain_observe,
            self.clock,
            lock_timeout_s=5,
            history=self.record,
        )

    def cancel(self) -> Cancel:
        return Cancel(self.store, self.scheduler, history=self.record)

    def events(self) -> list[HistoryEvent]:
        read = self.history.read()
        assert read.skipped == 0
        return list(read.events)

    def failing(self) -> None:
        def full_disk(event: HistoryEvent) -> None:
            raise HistoryError(
                field=f"{self.harness.root}/images/history/2024-01.jsonl",
                rule="No space left on device",
            )

        self.history.before_append = full_disk


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> HistoryLab:
    return HistoryLab(workspace_harness, profile_for, runtime_files)


def who(event: HistoryEvent) -> tuple[str, int, str, datetime]:
    return event.user, event.uid, event.host, event.time


def failed_job(lab: HistoryLab, lifecycle_id: str, exit_code: int = 79) -> str:
    lab.submitted(lifecycle_id, arch="x86_64")
    job_id = lab.job_of(lifecycle_id)
    lab.scheduler.finish(job_id, exit_code)
    return job_id


# -- publication ---------------------------------------------------------------------------


def test_a_publication_is_recorded_with_its_job_digests_and_latency(lab: HistoryLab) -> None:
    plan = lab.finished(A, arch="x86_64", ran=timedelta(seconds=42))
    lab.clock.advance(timedelta(seconds=90))
    lab.publish(A)
    (event,) = lab.events()
    assert event.event == "published"
    assert who(event) == ("ada", 1000, "login1", START + timedelta(seconds=132))
    assert (event.lifecycle_id, event.job_id, event.alias, event.architecture) == (
        A,
        lab.job_of(A),
        "app",
        "x86_64",
    )
    assert (event.operation, event.role, event.source_digest) == (
        "import",
        "client",
        plan.source_digest,
    )
    assert (event.artifact, event.previous_artifact, event.exit_code) == (SHA, None, None)
    assert event.publish_latency_seconds == 132
    assert event.job_seconds == 42  # the scheduler's start and end
    assert event.recovered is None
    assert lab.alias_entry("app").job == JobRun(
        job_id=lab.job_of(A),
        started_at="2024-01-01T00:00:00.000000Z",
        ended_at="2024-01-01T00:00:42.000000Z",
    )
    lab.publish(A)  # published already: nothing changed, nothing recorded
    assert len(lab.events()) == 1


def test_a_replace_names_the_artifact_it_displaced_and_a_new_architecture_is_published(
    lab: HistoryLab,
) -> None:
    other = SQSH_BYTES + b" other"
    lab.finished(A, arch="x86_64")
    lab.finished(B, arch="x86_64", sqsh=other)
    lab.finished(C, arch="aarch64", sqsh=SQSH_BYTES + b" arm")
    lab.publish(A)
    lab.publish(B, replace=True)
    lab.publish(C)
    published, replaced, joined = lab.events()
    assert (replaced.event, replaced.lifecycle_id) == ("replaced", B)
    assert replaced.artifact == hashlib.sha256(other).hexdigest()
    assert replaced.previous_artifact == published.artifact == SHA
    assert (joined.event, joined.architecture, joined.previous_artifact) == (
        "published",
        "aarch64",
        None,
    )


def test_another_role_replacing_the_alias_is_replaced(lab: HistoryLab) -> None:
    lab.finished(A, arch="x86_64")
    lab.finished(B, arch="x86_64", role="serving", sqsh=SQSH_BYTES + b" srv")
    lab.publish(A)
    lab.publish(B, replace=True)
    replaced = lab.events()[-1]
    assert (replaced.event, replaced.role, replaced.previous_artifact) == (
        "replaced",
        "serving",
        SHA,
    )


def test_a_binding_from_the_store_is_a_publication_without_a_job(lab: HistoryLab) -> None:
    lab.finished(A, arch="x86_64")
    lab.publish(A)
    source = lab.publisher().stored_source(f"sha256:{SOURCE_DIGEST}", "x86_64")
    assert source is not None
    request = make_request(
        "import_oci", name="again", role="client", source=lab.plans[A].request.source
    )
    lab.publisher().bind_stored(request, source)
    lab.publisher().bind_stored(request, source)  # bound already: nothing recorded
    events = lab.events()
    assert [e.event for e in events] == ["published", "published"]
    bound = events[1]
    assert (bound.alias, bound.artifact, bound.lifecycle_id, bound.job_id) == (
        "again",
        SHA,
        A,
        None,
    )
    assert bound.publish_latency_seconds is None


def test_a_publication_stands_when_the_history_cannot_take_it(
    lab: HistoryLab, caplog: pytest.LogCaptureFixture
) -> None:
    lab.finished(A)
    lab.failing()
    with caplog.at_level(logging.WARNING):
        publication = lab.publish(A)
    assert publication.changed and publication.record.sqsh_sha256 == SHA
    assert Catalog(lab.store).show("app") == publication.record
    assert "published event (app)" in caplog.text
    assert "history/2024-01.jsonl: No space left on device" in caplog.text
    assert lab.history.read().events == ()


class Crash(BaseException):
    """Stands for the publisher dying after a step: nothing below it runs."""


def crash_at(step: str) -> Any:
    def checkpoint(reached: str) -> None:
        if reached == step:
            raise Crash(step)

    return checkpoint


@pytest.mark.parametrize("step", ["marker", "artifact", "source", "alias"])
@pytest.mark.parametrize("recovers", ["publish", "unregister", "gc"])
def test_a_publication_finished_by_recovery_is_recorded_once_as_its_publisher(
    lab: HistoryLab, step: str, recovers: str
) -> None:
    lab.finished(A, arch="x86_64", ran=timedelta(seconds=7))
    lab.finished(B, name="other", arch="x86_64", sqsh=SQSH_BYTES + b" other")
    with pytest.raises(Crash):
        lab.publisher(checkpoint=crash_at(step))(A)
    assert lab.events() == []  # the crashed publisher recorded nothing
    lab.clock.advance(timedelta(minutes=3))
    lab.record = RecordHistory(lab.history, lab.clock, Actor(user="bob", uid=1001, host="login2"))
    if recovers == "publish":
        lab.publish(A)  # finds its own lifecycle published by the recovery: nothing more
    elif recovers == "unregister":
        lab.maintain().unregister("app")
    else:
        lab.maintain().gc(older_than=timedelta(days=1))
    recovered = [e for e in lab.events() if e.event == "published"]
    assert len(recovered) == 1
    (event,) = recovered
    assert who(event) == ("ada", 1000, "login1", START + timedelta(seconds=7, minutes=3))
    assert (event.recovered, event.lifecycle_id, event.alias, event.artifact) == (
        True,
        A,
        "app",
        SHA,
    )
    assert (event.job_id, event.job_seconds) == (lab.job_of(A), 7)
    lab.publish(B)  # a later publication is the publisher's own again
    assert lab.events()[-1].recovered is None and lab.events()[-1].user == "bob"


def test_a_publication_dropped_by_recovery_is_no_event(lab: HistoryLab) -> None:
    lab.finished(A, arch="x86_64")
    with pytest.raises(Crash):
        lab.publisher(checkpoint=crash_at("marker"))(A)
    lab.harness.remove(lab.plans[A].paths.candidate)  # the artifact can never be put in place
    lab.maintain().gc(older_than=timedelta(days=1))
    assert [e.event for e in lab.events() if e.event in ("published", "replaced")] == []
    assert not lab.harness.exists(lab.layout.marker("app"))


def test_a_torn_append_leaves_the_publication_and_the_next_event_whole(lab: HistoryLab) -> None:
    lab.finished(A, name="one")
    lab.finished(B, name="two", sqsh=SQSH_BYTES + b"2")
    lab.history.tear_next(30)
    lab.publish(A)
    lab.publish(B)
    read = lab.history.read()
    assert [e.alias for e in read.events] == ["two"] and read.skipped == 1
    assert {r.name for r in Catalog(lab.store).list()} == {"one", "two"}


# -- a job that ended without a result ---------------------------------------------------


def test_a_failed_job_is_recorded_once_with_its_exit_code_however_often_observed(
    lab: HistoryLab,
) -> None:
    job_id = failed_job(lab, A)
    lab.clock.advance(timedelta(minutes=5))
    for _ in range(3):
        (status,) = lab.observe([A])
    assert status.exit_code == 79
    Wait(lab.observe, lab.clock, sleep=lambda _: None)([A])
    with pytest.raises(JobNotSuccessful):
        lab.publish(A)
    (event,) = lab.events()
    assert event.event == "job_failed"
    assert who(event) == ("ada", 1000, "login1", START + timedelta(minutes=5))
    assert (event.lifecycle_id, event.job_id, event.exit_code, event.state) == (
        A,
        job_id,
        79,
        "FAILED",
    )
    assert (event.alias, event.architecture, event.operation, event.role) == (
        "app",
        "x86_64",
        "import",
        "client",
    )
    assert event.source_digest == f"sha256:{SOURCE_DIGEST}"
    assert event.artifact is None


def test_a_job_not_ended_or_ended_well_is_no_failure(lab: HistoryLab) -> None:
    lab.submitted(A)
    lab.observe([A])
    lab.scheduler.start(lab.job_of(A))
    lab.observe([A])
    lab.finished(B, name="other")
    lab.observe([B])
    staged_in_doubt = lab.submitted(C, name="third")
    lab.harness.remove(f"{staged_in_doubt.paths.job_dir}/submission.json")
    lab.observe([C])
    assert lab.events() == []


def test_a_job_cancelled_past_the_product_is_cancelled_not_failed(lab: HistoryLab) -> None:
    lab.submitted(A)
    job_id = lab.job_of(A)
    lab.scheduler.start(job_id)
    lab.clock.advance(timedelta(seconds=12))
    # scancel: the scheduler ends the job, no command of ours took part
    lab.scheduler.set_state(job_id, JobState.CANCELLED, exit_code=15)
    lab.observe([A])
    lab.observe([A])
    (event,) = lab.events()
    assert (event.event, event.state, event.exit_code, event.job_id) == (
        "cancelled",
        "CANCELLED",
        15,
        job_id,
    )
    assert event.job_seconds == 12


def test_a_failed_job_carries_how_long_it_ran(lab: HistoryLab) -> None:
    lab.submitted(A)
    job_id = lab.job_of(A)
    lab.scheduler.start(job_id)
    lab.clock.advance(timedelta(minutes=2))
    lab.scheduler.finish(job_id, 79)
    (status,) = lab.observe([A])
    assert status.job_seconds == 120
    (event,) = lab.events()
    assert (event.event, event.exit_code, event.job_seconds) == ("job_failed", 79, 120)


def test_a_reader_of_the_store_observes_a_failed_job_without_a_word_about_the_history(
    lab: HistoryLab, caplog: pytest.LogCaptureFixture
) -> None:
    failed_job(lab, A)
    assert isinstance(lab.store, MemoryStore)
    lab.store.filesystem.read_only = True  # mounted read-only here, or not this user's to write
    with caplog.at_level(logging.INFO):
        (status,) = lab.observe([A])
    assert status.exit_code == 79
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "left to whoever may write the store" in caplog.text
    assert lab.record.failures == []
    lab.store.filesystem.read_only = False
    lab.observe([A])  # the writer records it
    assert [e.event for e in lab.events()] == ["job_failed"]


def test_a_job_the_scheduler_lost_is_recorded_as_lost(lab: HistoryLab) -> None:
    lab.submitted(A)
    lab.scheduler.forget(lab.job_of(A))
    lab.observe([A])
    lab.observe([A])
    assert [(e.event, e.state, e.exit_code) for e in lab.events()] == [("job_failed", "LOST", None)]


def test_a_failure_that_could_not_be_recorded_is_warned_about_and_recorded_later(
    lab: HistoryLab, caplog: pytest.LogCaptureFixture
) -> None:
    failed_job(lab, A)
    lab.failing()
    with caplog.at_level(logging.WARNING):
        (status,) = lab.observe([A])
    assert status.exit_code == 79  # the observation stands
    assert lab.history.read().events == ()
    assert "job_failed" in caplog.text and "history/2024-01.jsonl" in caplog.text
    assert not lab.harness.exists(f"{lab.plans[A].paths.job_dir}/{JOB_END_MARKER}")
    lab.history.before_append = None
    lab.observe([A])
    lab.observe([A])
    assert [e.event for e in lab.events()] == ["job_failed"]


# -- cancel --------------------------------------------------------------------------------


def test_a_cancel_is_recorded_once_and_never_also_as_a_failure(lab: HistoryLab) -> None:
    lab.submitted(A)
    job_id = lab.job_of(A)
    assert lab.cancel()(A).state == "CANCELLED"
    lab.observe([A])
    lab.cancel()(A)
    (event,) = lab.events()
    assert (event.event, event.lifecycle_id, event.job_id, event.state, event.alias) == (
        "cancelled",
        A,
        job_id,
        "CANCELLED",
        "app",
    )
    assert who(event) == ("ada", 1000, "login1", START)


def test_a_cancel_stands_when_the_history_cannot_take_it(lab: HistoryLab) -> None:
    lab.submitted(A)
    lab.failing()
    assert lab.cancel()(A).state == "CANCELLED"
    assert lab.scheduler.job(lab.job_of(A)).state == "CANCELLED"
    assert lab.events() == [] and len(lab.record.failures) == 1


# -- unregister and gc ---------------------------------------------------------------------


def test_unregister_records_each_entry_it_removed(lab: HistoryLab) -> None:
    lab.finished(A, arch="x86_64")
    lab.finished(B, arch="aarch64", sqsh=SQSH_BYTES + b"arm")
    lab.publish(A)
    lab.publish(B)
    lab.clock.advance(timedelta(hours=1))
    lab.maintain().unregister("app")
    events = [e for e in lab.events() if e.event == "unregistered"]
    assert sorted((e.alias, e.architecture, e.lifecycle_id) for e in events) == [
        ("app", "aarch64", B),
        ("app", "x86_64", A),
    ]
    by_arch = {e.architecture: e for e in events}
    assert by_arch["x86_64"].artifact == SHA
    assert by_arch["aarch64"].artifact == hashlib.sha256(SQSH_BYTES + b"arm").hexdigest()
    assert by_arch["x86_64"].source_digest == f"sha256:{SOURCE_DIGEST}"
    assert all(who(e) == ("ada", 1000, "login1", START + timedelta(hours=1)) for e in events)
    with pytest.raises(UnknownAlias):
        lab.maintain().unregister("app")
    assert len([e for e in lab.events() if e.event == "unregistered"]) == 2


def test_an_unregister_stands_when_the_history_cannot_take_it(
    lab: HistoryLab, caplog: pytest.LogCaptureFixture
) -> None:
    lab.finished(A)
    lab.publish(A)
    lab.failing()
    with caplog.at_level(logging.WARNING):
        assert lab.maintain().unregister("app") == "app"
    assert Catalog(lab.store).list() == []
    assert "unregistered event (app)" in caplog.text and "No space left" in caplog.text


def test_gc_records_each_artifact_and_attempt_it_removed_and_a_dry_run_nothing(
    lab: HistoryLab,
) -> None:
    lab.finished(A, name="dropped")
    lab.publish(A)
    lab.maintain().unregister("dropped")
    lab.clock.advance(timedelta(days=2))
    before = len(lab.events())
    lab.maintain().gc(older_than=timedelta(days=1), dry_run=True)
    assert len(lab.events()) == before
    removed = lab.maintain().gc(older_than=timedelta(days=1))
    assert {r.kind for r in removed} == {"artifact", "source", "attempt"}
    gc_events = [e for e in lab.events() if e.event.startswith("gc_")]
    assert [e.event for e in gc_events] == ["gc_artifact", "gc_attempt", "gc_removed"]
    artifact, attempt, sources = gc_events
    assert (artifact.artifact, artifact.alias, artifact.lifecycle_id) == (SHA, None, None)
    assert artifact.bytes == len(SQSH_BYTES)
    (source,) = (r for r in removed if r.kind == "source")
    assert (sources.removed, sources.count, sources.bytes) == ("source", 1, source.size)
    assert source.size is not None and source.size > 0
    assert (attempt.lifecycle_id, attempt.job_id, attempt.alias, attempt.operation) == (
        A,
        lab.job_of(A),
        "dropped",
        "import",
    )
    assert who(attempt) == ("ada", 1000, "login1", START + timedelta(days=2))
    lab.maintain().gc(older_than=timedelta(days=1))
    assert [e for e in lab.events() if e.event.startswith("gc_")] == gc_events


def test_cleanup_records_the_attempt_it_removed(lab: HistoryLab) -> None:
    job_id = failed_job(lab, A)
    lab.observe([A])
    lab.clock.advance(timedelta(hours=2))
    lab.maintain().cleanup(A)
    cleaned = lab.events()[-1]
    assert (cleaned.event, cleaned.lifecycle_id, cleaned.job_id, cleaned.alias) == (
        "cleaned_up",
        A,
        job_id,
        "app",
    )
    assert who(cleaned) == ("ada", 1000, "login1", START + timedelta(hours=2))
    lab.submitted(B, name="running")
    lab.scheduler.start(lab.job_of(B))
    with pytest.raises(StillRunning):
        lab.maintain().cleanup(B)
    assert [e.event for e in lab.events()].count("cleaned_up") == 1


def test_gc_records_what_else_it_removes_one_event_per_kind_with_count_and_bytes(
    lab: HistoryLab,
) -> None:
    failed_job(lab, A)
    credentials = staged_credentials_path(lab.harness.root, A)
    lab.harness.makedirs(credentials.rsplit("/", 1)[0])
    lab.harness.write(credentials, b"machine r login l password p\n")
    lab.harness.makedirs(lab.layout.publishing)
    for n, size in ((1, 10), (2, 20)):
        lab.harness.write(f"{lab.layout.publishing}/a{n}.json.{n:016x}.tmp", b"t" * size)
    cache = f"{lab.harness.root}/images/layer-cache"
    lab.harness.makedirs(cache)
    for name, size in ((f"{1:064x}", 100), (f"{2:064x}", 300)):
        lab.harness.write(f"{cache}/{name}", b"x" * size)
        lab.harness.set_used(f"{cache}/{name}", 0)
    lab.clock.advance(timedelta(hours=1))
    maintain = lab.maintain()
    maintain.gc(older_than=timedelta(days=7), dry_run=True, layer_cache=CacheBound(cache, 1 << 40))
    assert [e for e in lab.events() if e.event == "gc_removed"] == []
    maintain.gc(older_than=timedelta(days=7), layer_cache=CacheBound(cache, 1 << 40))
    counted = {e.removed: (e.count, e.bytes) for e in lab.events() if e.event == "gc_removed"}
    assert counted == {
        "temporary": (2, 30),
        "credentials": (1, len(b"machine r login l password p\n")),
        "layer": (2, 400),
    }
    maintain.gc(older_than=timedelta(days=7), layer_cache=CacheBound(cache, 1 << 40))
    assert len([e for e in lab.events() if e.event == "gc_removed"]) == 3  # nothing more


# -- refusals ------------------------------------------------------------------------------


def test_a_refusal_is_recorded_with_its_rule_exit_code_and_what_was_asked(lab: HistoryLab) -> None:
    recorded = lab.record.refused(
        "source_not_allowed",
        2,
        reason="source: is outside policy.allowed_registries (registry.example.org)\n",
        source="evil.example.com/x@sha256:" + "e" * 64,
        alias="app",
    )
    assert recorded is not None
    (event,) = lab.events()
    assert (event.event, event.rule, event.exit_code, event.alias) == (
        "refused",
        "source_not_allowed",
        2,
        "app",
    )
    assert event.source == "evil.example.com/x@sha256:" + "e" * 64
    assert event.reason == "source: is outside policy.allowed_registries (registry.example.org)"
    assert who(event) == ("ada", 1000, "login1", START)


def test_the_products_refusals_are_recorded_from_a_stores_first_request(
    lab: HistoryLab,
) -> None:
    refusals = RecordRefusals(lab.record)
    for error in (InvalidRequest(field="name", rule="bad"), ValueError("not ours")):
        assert refusals(error, 2, reason="-", source="s", alias="a") is None  # no refusal
    assert not lab.harness.exists(lab.layout.images)  # nothing staged or recorded yet
    refused = SourceNotAllowed(field="source", rule="is outside policy.allowed_registries (x)")
    recorded = refusals(refused, 2, reason="source: ...", source="s", alias="a")
    assert recorded is not None and (recorded.rule, recorded.exit_code) == (
        "source_not_allowed",
        2,
    )
    assert [e.event for e in lab.events()] == ["refused"]
    assert [lab.harness.mode(path) for path in (lab.layout.images, lab.layout.history)] == [
        0o755,
        0o755,
    ]


def test_a_front_end_records_its_own_refusal_as_its_requester(lab: HistoryLab) -> None:
    gateway = RecordHistory(lab.history, lab.clock, Actor(user="svc", uid=990, host="gw1"))
    gateway.refused("unauthenticated", 401, reason="no valid credential", source="/v1/imports")
    gateway.refused(
        "forbidden",
        403,
        reason="name: alice's alias",
        alias="app",
        requester=Requester(user="carol", uid=1002),
    )
    anonymous, carol = lab.events()
    assert (anonymous.rule, anonymous.exit_code, anonymous.user, anonymous.host) == (
        "unauthenticated",
        401,
        "svc",  # who asked could not be told: the front end's own account
        "gw1",
    )
    assert (carol.rule, carol.exit_code, carol.user, carol.uid, carol.alias) == (
        "forbidden",
        403,
        "carol",
        1002,
        "app",
    )


def test_a_refusal_with_a_rule_of_no_form_is_warned_about_not_raised(
    lab: HistoryLab, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert lab.record.refused("Not A Rule", 2, reason="x") is None
    assert "refused event" in caplog.text and lab.events() == []


# -- reading -------------------------------------------------------------------------------


def test_read_history_filters_by_alias_and_since(lab: HistoryLab) -> None:
    lab.record("unregistered", alias="one")
    lab.clock.advance(timedelta(days=1))
    lab.record("unregistered", alias="two")
    lab.record("gc_artifact", artifact=SHA)
    read = ReadHistory(lab.history)
    assert [e.alias for e in read().events] == ["one", "two", None]
    assert [e.alias for e in read("two").events] == ["two"]
    assert [e.alias for e in read(since=START + timedelta(hours=1)).events] == ["two", None]
    assert read("three").events == ()
    with pytest.raises(InvalidRequest):
        read(since=datetime(2024, 1, 1))
    with pytest.raises(DomainError):
        read("../etc")


def test_following_emits_what_there_is_then_each_append_of_the_alias_until_stopped(
    lab: HistoryLab,
) -> None:
    lab.record("unregistered", alias="one")
    lab.record("unregistered", alias="two")
    emitted: list[HistoryEvent] = []
    waits: list[float] = []

    def appended_then(*more: str) -> Any:
        def step() -> bool:
            for alias in more:
                lab.record("unregistered", alias=alias)
            return False

        return step

    script = iter(
        [appended_then("one", "two"), appended_then(), appended_then("one"), lambda: True]
    )

    def stopped(seconds: float) -> bool:
        waits.append(seconds)
        return bool(next(script)())

    FollowHistory(lab.history, interval_s=0.5)(emitted.append, stopped, "one")
    assert [e.alias for e in emitted] == ["one", "one", "one"]
    assert emitted == [e for e in lab.events() if e.alias == "one"]
    assert waits == [0.5] * 4
    with pytest.raises(DomainError):
        FollowHistory(lab.history)(emitted.append, stopped, "../etc")

"""``CollectMetrics`` (application.metrics): the snapshot a site graphs, from the store and the
history alone, on both stores. Each figure moves with what it counts: aliases by role and
architecture, artifacts referenced or not with their bytes, the layer cache by kind, attempts
by what their own records say, and the history's totals by operation and outcome."""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from typing import Any

import pytest

from metrics_support import collect, event
from publish_support import (
    SOURCE,
    SOURCE_DIGEST,
    SQSH_BYTES,
    PublishLab,
    chain_json,
    history_for,
)
from slurm_image.application.errors import NoStore
from slurm_image.application.history import Actor, NoticeJobEnds, RecordHistory
from slurm_image.application.maintain import Maintain
from slurm_image.application.metrics import (
    JOB_SECONDS_BOUNDS,
    PUBLISH_LATENCY_BOUNDS,
    Distribution,
    StoreMetrics,
)
from slurm_image.application.prepare import Prepare
from slurm_image.application.publish import Publish
from slurm_image.domain.layer_cache import CacheBound
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.request import make_request
from slurm_image.wire.errors import exit_code_for

A, B, C, D = (f"img-{n:032x}" for n in range(1, 5))
ARM_BYTES = SQSH_BYTES + b" arm64"
ARM_MANIFEST = "sha256:" + "a" * 64


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def aliases(metrics: StoreMetrics) -> dict[tuple[str, str | None], int]:
    return {(item.role, item.architecture): item.entries for item in metrics.aliases}


def artifacts(metrics: StoreMetrics) -> dict[bool, tuple[int, int]]:
    return {item.referenced: (item.count, item.bytes) for item in metrics.artifacts}


def lifecycles(metrics: StoreMetrics) -> dict[tuple[str, str], int]:
    return {(item.operation, item.outcome): item.count for item in metrics.lifecycles}


def test_a_workspace_root_without_a_store_is_refused_rather_than_counted_as_zeros(
    lab: PublishLab,
) -> None:
    assert not lab.harness.exists(lab.layout.images)
    with pytest.raises(NoStore) as refused:
        collect(lab)
    assert refused.value.field == "workspace_root"
    assert exit_code_for(refused.value) == 2


def test_an_empty_store_reads_as_zeros_of_every_known_series(lab: PublishLab) -> None:
    lab.harness.makedirs(lab.layout.images)
    metrics = collect(lab)
    assert metrics.generated_at == lab.clock.now()
    assert set(aliases(metrics)) == {
        (role, arch) for role in ("client", "serving") for arch in ("aarch64", "ppc64le", "x86_64")
    }
    assert set(aliases(metrics).values()) == {0}
    assert metrics.aliases_unreadable == 0
    assert artifacts(metrics) == {True: (0, 0), False: (0, 0)}
    assert metrics.attempts == {
        "staged": 0,
        "submission_unknown": 0,
        "submitted": 0,
        "unreadable": 0,
    }
    assert metrics.layer_cache is None
    assert set(metrics.events.values()) == {0}
    assert set(metrics.events) == {
        "published",
        "replaced",
        "unregistered",
        "cleaned_up",
        "gc_artifact",
        "gc_attempt",
        "gc_removed",
        "job_failed",
        "cancelled",
        "refused",
    }
    assert metrics.history_skipped == 0
    assert set(lifecycles(metrics)) == {
        (operation, outcome)
        for operation in ("import", "inspect")
        for outcome in ("published", "failed", "cancelled")
    }
    assert set(lifecycles(metrics).values()) == {0}
    assert metrics.job_failures == ()
    assert [(item.operation, item.outcome) for item in metrics.job_run_seconds] == [
        ("import", "failed"),
        ("import", "published"),
        ("inspect", "failed"),
        ("inspect", "published"),
    ]
    assert all(item.seconds.count == 0 for item in metrics.job_run_seconds)
    assert [item.operation for item in metrics.publish_latency_seconds] == ["import", "inspect"]


def test_aliases_count_one_entry_per_alias_and_architecture_by_role(lab: PublishLab) -> None:
    pinned = f"sha256:{SOURCE_DIGEST}"
    lab.finished(
        A, name="app", arch="aarch64", sqsh=ARM_BYTES, chain=chain_json(pinned, ARM_MANIFEST)
    )
    lab.publish(A)
    lab.finished(B, name="app", arch="x86_64")
    lab.publish(B)
    lab.finished(C, name="server", role="serving", arch="x86_64", sqsh=SQSH_BYTES + b" serving")
    lab.publish(C)
    counts = aliases(collect(lab))
    assert counts[("client", "aarch64")] == 1
    assert counts[("client", "x86_64")] == 1
    assert counts[("serving", "x86_64")] == 1
    assert sum(counts.values()) == 3


def test_artifacts_are_counted_with_their_bytes_referenced_until_unregistered(
    lab: PublishLab,
) -> None:
    lab.finished(A, name="app", arch="x86_64")
    lab.publish(A)
    other = SQSH_BYTES + b" another image"
    lab.finished(B, name="other", arch="x86_64", sqsh=other)
    lab.publish(B)
    metrics = collect(lab)
    assert artifacts(metrics) == {True: (2, len(SQSH_BYTES) + len(other)), False: (0, 0)}
    Maintain(lab.store, lab.locks, lab.observe, lab.clock, lock_timeout_s=5).unregister("other")
    metrics = collect(lab)
    assert artifacts(metrics) == {True: (1, len(SQSH_BYTES)), False: (1, len(other))}
    assert aliases(metrics)[("client", "x86_64")] == 1


def test_a_file_in_artifacts_that_is_no_artifact_is_not_counted(lab: PublishLab) -> None:
    lab.finished(A, name="app", arch="x86_64")
    lab.publish(A)
    lab.harness.write(f"{lab.layout.artifacts}/notes.txt", b"not an image")
    assert artifacts(collect(lab)) == {True: (1, len(SQSH_BYTES)), False: (0, 0)}


def test_an_unreadable_alias_record_is_counted_apart_and_the_others_still_are(
    lab: PublishLab, caplog: pytest.LogCaptureFixture
) -> None:
    lab.finished(A, name="app", arch="x86_64")
    lab.publish(A)
    lab.harness.write(lab.layout.alias("broken"), b"{not json")
    with caplog.at_level(logging.WARNING):
        metrics = collect(lab)
    assert metrics.aliases_unreadable == 1
    assert aliases(metrics)[("client", "x86_64")] == 1
    assert "broken.json" in caplog.text
    # its artifact stays referenced by the readable alias only
    assert artifacts(metrics) == {True: (1, len(SQSH_BYTES)), False: (0, 0)}


def test_attempts_left_behind_are_counted_by_what_their_records_say(lab: PublishLab) -> None:
    lab.submitted(A)  # submission.json recorded
    lab.finished(B, name="other")
    lab.publish(B)  # published, and its attempt stays until cleanup or gc

    request = make_request("import_oci", name="staged", role="client", source=SOURCE)
    prepare = Prepare(lab.clock, lab.runtime, lab.store)
    prepare(request, lab.profile, lab.selection, C)
    prepare(request, lab.profile, lab.selection, D)
    lab.harness.write(AttemptLayout(lab.harness.root, D).submission_claim, b"")
    lab.harness.write(f"{lab.layout.jobs}/stray-file", b"")
    metrics = collect(lab)
    assert metrics.attempts == {
        "staged": 1,
        "submission_unknown": 1,
        "submitted": 2,
        "unreadable": 1,
    }


def test_history_events_count_lifecycles_by_operation_and_outcome(lab: PublishLab) -> None:
    metrics = collect(
        lab,
        event("published", 1, operation="import", job_seconds=45.0, publish_latency_seconds=90.0),
        event("replaced", 2, operation="import", job_seconds=700.0, publish_latency_seconds=900.0),
        event("published", 3, operation="import"),  # answered from the store: no job
        event("published", 4, operation="inspect", job_seconds=5.0, publish_latency_seconds=20.0),
        event("job_failed", 5, operation="import", exit_code=79, state="FAILED", job_seconds=30.0),
        event("job_failed", 6, operation="import", exit_code=79, state="FAILED"),
        event("job_failed", 7, operation="inspect", exit_code=0, state="TIMEOUT"),
        event("job_failed", 8),
        event("cancelled", 9, operation="inspect", state="CANCELLED"),
        event("unregistered", 10, alias="app"),
        event("gc_artifact", 11, artifact="a" * 64),
        unreadable_lines=2,
    )
    counts = lifecycles(metrics)
    assert counts[("import", "published")] == 3
    assert counts[("inspect", "published")] == 1
    assert counts[("import", "failed")] == 2
    assert counts[("inspect", "failed")] == 1
    assert counts[("unknown", "failed")] == 1
    assert counts[("inspect", "cancelled")] == 1
    assert counts[("import", "cancelled")] == 0
    assert [
        (item.operation, item.exit_code, item.state, item.count) for item in metrics.job_failures
    ] == [
        ("import", 79, "FAILED", 2),
        ("inspect", 0, "TIMEOUT", 1),
        ("unknown", None, None, 1),
    ]
    assert metrics.events["published"] == 3
    assert metrics.events["replaced"] == 1
    assert metrics.events["job_failed"] == 4
    assert metrics.events["unregistered"] == 1
    assert metrics.events["gc_artifact"] == 1
    assert metrics.events["gc_attempt"] == 0
    assert metrics.history_skipped == 2


def test_job_run_time_and_publish_latency_fill_cumulative_buckets(lab: PublishLab) -> None:
    metrics = collect(
        lab,
        event("published", 1, operation="import", job_seconds=45.0, publish_latency_seconds=90.0),
        event("replaced", 2, operation="import", job_seconds=700.0, publish_latency_seconds=9e4),
        event("published", 3, operation="import", job_seconds=20000.0),
        event("job_failed", 4, operation="import", exit_code=79, job_seconds=30.0),
    )
    runs = {(item.operation, item.outcome): item.seconds for item in metrics.job_run_seconds}
    published = runs[("import", "published")]
    assert published.bounds == JOB_SECONDS_BOUNDS
    assert (published.count, published.total) == (3, 20745.0)
    by_bound = dict(zip(published.bounds, published.cumulative, strict=True))
    assert by_bound[30.0] == 0
    assert by_bound[60.0] == 1
    assert by_bound[600.0] == 1
    assert by_bound[1200.0] == 2
    assert by_bound[14400.0] == 2  # 20000 s counts in +Inf only
    assert runs[("import", "failed")].count == 1
    assert runs[("inspect", "published")].count == 0
    latency = {item.operation: item.seconds for item in metrics.publish_latency_seconds}
    assert latency["import"].bounds == PUBLISH_LATENCY_BOUNDS
    assert (latency["import"].count, latency["import"].total) == (2, 90090.0)
    assert (
        dict(zip(PUBLISH_LATENCY_BOUNDS, latency["import"].cumulative, strict=True))[86400.0] == 1
    )


def test_a_distribution_counts_an_observation_on_a_bound_in_that_bucket() -> None:
    distribution = Distribution.of([10.0, 10.5, 0.0], (10.0, 20.0))
    assert distribution.cumulative == (2, 3)
    assert (distribution.count, distribution.total) == (3, 20.5)


def test_the_layer_cache_is_counted_by_kind_with_its_bound(lab: PublishLab) -> None:
    path = f"{lab.harness.root}/images/layer-cache"
    lab.harness.makedirs(path)
    lab.harness.write(f"{path}/{1:064x}", b"x" * 100)
    lab.harness.write(f"{path}/{2:064x}", b"x" * 50)
    lab.harness.write(f"{path}/{3:064x}.AbCdEf0123", b"x" * 7)
    lab.harness.makedirs(f"{path}/.tokens.1000")
    lab.harness.write(f"{path}/.tokens.1000/registry.example.org.42", b"tok")
    lab.harness.symlink(f"{path}/{1:064x}", f"{path}/{4:064x}")
    metrics = collect(lab, cache=CacheBound(path, 1 << 30))
    assert metrics.layer_cache is not None
    assert metrics.layer_cache.layers == 2
    assert dict(metrics.layer_cache.bytes) == {"layer": 150, "download": 7, "other": 3}
    assert metrics.layer_cache.max_bytes == 1 << 30
    assert metrics.layer_cache.path == path


def test_a_layer_cache_not_on_this_machine_is_left_out_not_counted_as_empty(
    lab: PublishLab,
) -> None:
    lab.harness.makedirs(lab.layout.images)
    path = f"{lab.harness.root}/images/layer-cache"
    assert collect(lab, cache=CacheBound(path, 1000)).layer_cache is None
    lab.harness.makedirs(path)
    metrics = collect(lab, cache=CacheBound(path, 1000))
    assert metrics.layer_cache is not None
    assert (metrics.layer_cache.layers, sum(metrics.layer_cache.bytes.values())) == (0, 0)


def test_a_layer_cache_others_could_change_is_left_out_with_a_warning(
    lab: PublishLab, caplog: pytest.LogCaptureFixture
) -> None:
    path = f"{lab.harness.root}/images/layer-cache"
    lab.harness.makedirs(path)
    lab.harness.write(f"{path}/{1:064x}", b"x" * 100)
    lab.harness.chmod(path, 0o777)
    with caplog.at_level(logging.WARNING):
        metrics = collect(lab, cache=CacheBound(path, 1000))
    assert metrics.layer_cache is None
    assert "layer cache is left out" in caplog.text


def test_the_json_form_holds_every_figure(lab: PublishLab) -> None:
    lab.finished(A, name="app", arch="x86_64")
    lab.publish(A)
    metrics = collect(
        lab,
        event("published", 1, operation="import", job_seconds=45.0, publish_latency_seconds=90.0),
        event("job_failed", 2, operation="import", exit_code=79, state="FAILED"),
    )
    data = metrics.as_dict()
    assert data["generated_at"] == lab.clock.now().isoformat()
    assert {"role": "client", "architecture": "x86_64", "entries": 1} in data["aliases"]
    sha = hashlib.sha256(SQSH_BYTES).hexdigest()
    assert lab.harness.exists(f"{lab.layout.artifacts}/{sha}.sqsh")
    assert {"referenced": True, "count": 1, "bytes": len(SQSH_BYTES)} in data["artifacts"]
    assert data["job_failures"] == [
        {"operation": "import", "exit_code": 79, "state": "FAILED", "count": 1}
    ]
    runs = {(run["operation"], run["outcome"]): run for run in data["job_run_seconds"]}
    assert runs[("import", "published")]["count"] == 1
    assert runs[("import", "published")]["buckets"][2] == {"le": 60.0, "count": 1}
    assert data["history"] == {
        "events": {
            "published": 1,
            "replaced": 0,
            "unregistered": 0,
            "cleaned_up": 0,
            "gc_artifact": 0,
            "gc_attempt": 0,
            "gc_removed": 0,
            "job_failed": 1,
            "cancelled": 0,
            "refused": 0,
        },
        "skipped_lines": 0,
    }


def test_the_failure_counter_moves_when_the_use_cases_record_a_refused_import(
    lab: PublishLab,
) -> None:
    record = RecordHistory(
        history_for(lab.harness, lab.store, lab.locks), lab.clock, Actor("alice", 1000, "login1")
    )
    statuses = NoticeJobEnds(lab.observe, lab.store, record)
    publish = Publish(lab.store, lab.locks, statuses, lab.clock, lock_timeout_s=5, history=record)
    lab.finished(A, name="app", arch="x86_64")
    lab.clock.advance(timedelta(minutes=3))
    publish(A)
    before = collect(lab)
    assert lifecycles(before)[("import", "published")] == 1
    assert lifecycles(before)[("import", "failed")] == 0
    latency = {item.operation: item.seconds for item in before.publish_latency_seconds}
    assert (latency["import"].count, latency["import"].total) == (1, 180.0)

    lab.submitted(B, name="refused", arch="x86_64")
    lab.scheduler.finish(lab.job_of(B), 79)  # the job refused the registry's chain
    statuses([B])
    statuses([B])  # observed again: recorded once
    after = collect(lab)
    assert lifecycles(after)[("import", "failed")] == 1
    assert lifecycles(after)[("import", "published")] == 1
    assert [(f.operation, f.exit_code, f.state, f.count) for f in after.job_failures] == [
        ("import", 79, "FAILED", 1)
    ]
    assert after.attempts["submitted"] == 2

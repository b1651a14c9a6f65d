"""The catalog over both stores: list, show, verify, unregister, gc and cleanup."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest

from publish_support import SQSH_BYTES, PublishLab
from slurm_image.application.catalog import Catalog
from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.application.errors import StillRunning, UnknownAlias, VerificationFailed
from slurm_image.application.maintain import Maintain
from slurm_image.domain.by_name import DEFAULT_RELEASE_GRACE
from slurm_image.domain.errors import DomainError
from slurm_image.domain.publication import parse_age

A, B, C = (f"img-{n:032x}" for n in range(1, 4))
SHA = hashlib.sha256(SQSH_BYTES).hexdigest()


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def _maintain(lab: PublishLab) -> Maintain:
    return Maintain(lab.store, lab.locks, lab.observe, lab.clock, lock_timeout_s=5)


def test_an_empty_store_lists_nothing_and_shows_no_alias(lab: PublishLab) -> None:
    assert Catalog(lab.store).list() == []
    with pytest.raises(UnknownAlias) as unknown:
        Catalog(lab.store).show("nothing")
    assert unknown.value.field == "name" and "slurm-image list" in unknown.value.reason


def test_list_and_show_give_the_published_records(lab: PublishLab) -> None:
    lab.finished(A, name="one")
    lab.finished(B, name="two", sqsh=SQSH_BYTES + b"2")
    one, two = lab.publish(A).record, lab.publish(B).record
    catalog = Catalog(lab.store)
    assert [r.name for r in catalog.list()] == ["one", "two"]
    assert catalog.show("two") == two
    assert catalog.verify("one") == one


def test_verify_rehashes_the_artifact(lab: PublishLab) -> None:
    lab.finished(A)
    record = lab.publish(A).record
    lab.harness.chmod(record.path, 0o644)
    lab.harness.append(record.path, b"rot")
    assert Catalog(lab.store).show("app") == record
    with pytest.raises(VerificationFailed, match="not the published"):
        Catalog(lab.store).verify("app")


def test_unregister_removes_the_alias_and_keeps_the_artifact(lab: PublishLab) -> None:
    lab.finished(A)
    record = lab.publish(A).record
    assert _maintain(lab).unregister("app") == "app"
    assert Catalog(lab.store).list() == []
    assert lab.harness.read(record.path) == SQSH_BYTES
    with pytest.raises(UnknownAlias):
        _maintain(lab).unregister("app")


def test_gc_removes_only_unreferenced_artifacts_and_dry_run_removes_nothing(
    lab: PublishLab,
) -> None:
    lab.finished(A, name="kept")
    lab.finished(B, name="dropped", sqsh=SQSH_BYTES + b"2")
    kept, dropped = lab.publish(A).record, lab.publish(B).record
    _maintain(lab).unregister("dropped")
    lab.clock.advance(DEFAULT_RELEASE_GRACE)
    planned = _maintain(lab).gc(older_than=timedelta(days=7), dry_run=True)
    assert [(r.kind, r.path) for r in planned if r.kind == "artifact"] == [
        ("artifact", dropped.path)
    ]
    assert lab.harness.exists(dropped.path)
    removed = _maintain(lab).gc(older_than=timedelta(days=7))
    assert [r.path for r in removed if r.kind == "artifact"] == [dropped.path]
    assert not lab.harness.exists(dropped.path)
    assert lab.harness.read(kept.path) == SQSH_BYTES


def test_gc_removes_finished_attempts_past_the_bound_and_never_a_running_one(
    lab: PublishLab,
) -> None:
    done = lab.finished(A, name="one")
    running = lab.submitted(B, name="two")
    lab.scheduler.start(lab.job_of(B))
    staged_in_doubt = lab.submitted(C, name="three")
    lab.harness.remove(f"{staged_in_doubt.paths.job_dir}/submission.json")
    lab.clock.advance(timedelta(days=1))
    assert [r for r in _maintain(lab).gc(older_than=timedelta(days=2)) if r.kind == "attempt"] == []
    removed = _maintain(lab).gc(older_than=timedelta(hours=1))
    assert [r.path for r in removed if r.kind == "attempt"] == [done.paths.job_dir]
    assert not lab.harness.exists(done.paths.job_dir)
    assert lab.harness.exists(running.paths.job_dir)
    assert lab.harness.exists(staged_in_doubt.paths.job_dir)


def test_cleanup_refuses_while_the_job_may_run_and_removes_a_finished_attempt(
    lab: PublishLab,
) -> None:
    plan = lab.submitted(A)
    with pytest.raises(StillRunning, match="PENDING"):
        _maintain(lab).cleanup(A)
    assert lab.harness.exists(plan.paths.job_dir)
    lab.scheduler.finish(lab.job_of(A), 1)
    assert _maintain(lab).cleanup(A) == A
    assert not lab.harness.exists(plan.paths.job_dir)


def test_cleanup_never_follows_a_symlink_out_of_the_attempt(lab: PublishLab) -> None:
    outside = lab.outside("precious")
    lab.harness.write(outside, b"keep me")
    plan = lab.submitted(A)
    lab.harness.symlink(outside, f"{plan.paths.job_dir}/link")
    lab.scheduler.finish(lab.job_of(A), 0)
    _maintain(lab).cleanup(A)
    assert lab.harness.read(outside) == b"keep me"


def test_cleanup_refuses_an_attempt_directory_replaced_by_a_symlink(lab: PublishLab) -> None:
    plan = lab.submitted(A)
    lab.scheduler.finish(lab.job_of(A), 0)
    moved = f"{lab.layout.jobs}/moved"
    lab.harness.rename(plan.paths.job_dir, moved)
    lab.harness.symlink(moved, plan.paths.job_dir)
    with pytest.raises(VerificationFailed):
        _maintain(lab).cleanup(A)
    assert lab.harness.exists(moved)


@pytest.mark.parametrize(("text", "seconds"), [("30", 30), ("15m", 900), ("7d", 604800)])
def test_ages(text: str, seconds: int) -> None:
    assert parse_age(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "7w", "-1d", "1.5h", "٣d"])
def test_bad_ages_name_the_field(text: str) -> None:
    with pytest.raises(DomainError) as refused:
        parse_age(text)
    assert refused.value.field == "older_than"


def test_unregister_in_a_fresh_workspace_names_the_alias(lab: PublishLab) -> None:
    with pytest.raises(UnknownAlias):
        _maintain(lab).unregister("app")


def test_another_user_resolves_what_the_workspace_owner_published(
    world_readable_tmp: Any, profile_for: Any, runtime_files: Any, local_harness: Any
) -> None:
    import os

    from slurm_image.adapters.local_store import LocalStore
    from slurm_image.domain.errors import InvalidPath

    lab = PublishLab(local_harness(world_readable_tmp), profile_for, runtime_files)
    lab.finished(A)
    record = lab.publish(A).record
    owner = 4242
    for directory, dirs, files in os.walk(lab.harness.root):
        for name in [*dirs, *files]:
            os.chown(os.path.join(directory, name), owner, -1, follow_symlinks=False)
    os.chown(lab.harness.root, owner, -1)
    assert Catalog(LocalStore.reader(lab.harness.root)).verify("app") == record
    reader = CatalogReader(LocalStore.reader(lab.harness.root))
    assert reader.show("app").details() == record.details()
    assert [r.summary() for r in reader.list()] == [record.summary()]
    with pytest.raises(InvalidPath) as refused:  # a store that writes trusts only its user
        Catalog(LocalStore(lab.harness.root)).show("app")
    assert refused.value.field == "workspace_root"


def test_gc_finishes_an_interrupted_publication_and_removes_leftover_temporaries(
    lab: PublishLab,
) -> None:
    from slurm_image.application.publish import CHECKPOINTS

    class Crash(BaseException):
        pass

    def crash(step: str) -> None:
        if step == "source":
            raise Crash(step)

    assert "source" in CHECKPOINTS
    lab.finished(A)
    with pytest.raises(Crash):
        lab.publisher(checkpoint=crash)(A)
    leftover = f"{lab.layout.staging}/{'7' * 64}.json.0123456789abcdef.tmp"
    lab.harness.write(leftover, b"half")
    planned = _maintain(lab).gc(older_than=timedelta(days=7), dry_run=True)
    assert ("temporary", leftover) in [(r.kind, r.path) for r in planned]
    assert lab.harness.exists(lab.layout.marker("app"))  # a dry run changes nothing
    removed = _maintain(lab).gc(older_than=timedelta(days=7))
    assert not lab.harness.exists(leftover)
    assert not lab.harness.exists(lab.layout.marker("app"))
    record = Catalog(lab.store).verify("app")
    assert record.lifecycle_id == A
    assert record.path not in [r.path for r in removed]


# -- the catalog as launchers read it (show and list without re-validating) ------------------


def test_the_reader_prints_what_the_validated_catalog_prints(lab: PublishLab) -> None:
    lab.finished(A, name="one")
    lab.finished(B, name="two", sqsh=SQSH_BYTES + b"2")
    lab.publish(A)
    lab.publish(B)
    reader, catalog = CatalogReader(lab.store), Catalog(lab.store)
    assert reader.show("two").details() == catalog.show("two").details()
    assert [r.summary() for r in reader.list()] == [r.summary() for r in catalog.list()]
    assert [r.summary()["name"] for r in reader.list()] == ["one", "two"]
    with pytest.raises(UnknownAlias):
        reader.show("three")


def _damage(lab: PublishLab, name: str, change: dict[str, Any] | None, raw: bytes | None) -> None:
    """Change the (first) entry of ``name``'s alias file, or write ``raw`` bytes instead."""
    path = lab.layout.alias(name)
    document = json.loads(lab.harness.read(path))
    document["entries"][0].update(change or {})
    data = raw if raw is not None else json.dumps(document).encode()
    lab.harness.remove(path)
    lab.harness.write(path, data)
    lab.harness.chmod(path, 0o644)


@pytest.mark.parametrize(
    ("change", "raw", "field"),
    [
        ({"name": "two"}, None, "alias.name"),
        ({"path": "relative/x.sqsh"}, None, "alias.path"),
        ({"path": 3}, None, "alias.path"),
        ({"sqsh_sha256": "x" * 64}, None, "alias.sqsh_sha256"),
        ({"facts": []}, None, "alias.facts"),
        ({"role": "admin"}, None, "alias.role"),
        ({"lifecycle_id": "a b"}, None, "alias.lifecycle_id"),
        ({"source_digest": "sha256:xyz"}, None, "alias.source_digest"),
        ({"source_digest": 5}, None, "alias.source_digest"),
        ({"size": "3"}, None, "alias.size"),
        ({"inspector_version": 3}, None, "alias.inspector_version"),
        (None, b"[1, 2]", "alias"),
        (None, b"{not json", "alias"),
        (None, b'{"name": "one"}', "alias.role"),
    ],
)
def test_the_reader_refuses_a_damaged_record_naming_the_field_and_list_skips_it(
    lab: PublishLab, change: dict[str, Any] | None, raw: bytes | None, field: str
) -> None:
    lab.finished(A, name="one")
    lab.finished(B, name="two", sqsh=SQSH_BYTES + b"2")
    lab.publish(A)
    lab.publish(B)
    _damage(lab, "one", change, raw)
    reader = CatalogReader(lab.store)
    with pytest.raises(VerificationFailed) as refused:
        reader.show("one")
    assert refused.value.field == lab.layout.alias("one")
    if raw is None:
        field = field.replace("alias.", "alias.entries.0.", 1)
    assert refused.value.reason.startswith(f"{field}:")
    assert [r.summary()["name"] for r in reader.list()] == ["two"]


@pytest.mark.parametrize(
    "change",
    [
        {"path": "relative/x.sqsh"},
        {"sqsh_sha256": "x" * 64},
        {"role": "admin"},
        {"lifecycle_id": "a b"},
        {"source_digest": "sha256:xyz"},
        {"chain": "sha256:" + "1" * 64},
        {"chain": {"pinned": "sha256:" + "1" * 64, "manifest": "x", "config": "y"}},
        {"chain": {"pinned": "sha256:" + "5" * 64, "manifest": "sha256:" + "1" * 64}},
    ],
)
def test_the_reader_and_the_validated_catalog_refuse_a_field_alike(
    lab: PublishLab, change: dict[str, Any]
) -> None:
    lab.finished(A, name="one")
    lab.publish(A)
    _damage(lab, "one", change, None)
    with pytest.raises(VerificationFailed) as light:
        CatalogReader(lab.store).show("one")
    with pytest.raises(VerificationFailed) as full:
        Catalog(lab.store).show("one")
    assert light.value.reason.split(":")[0] == full.value.reason.split(":")[0]

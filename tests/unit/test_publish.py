"""Publish against both stores and the fake scheduler: success, idempotence, replace, reuse,
and every refusal (exit 5: nothing published, nothing lost)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from publish_support import SOURCE_DIGEST, SQSH_BYTES, PublishLab, during_read, inspection
from slurm_image.application.errors import AliasExists, JobNotSuccessful, VerificationFailed
from slurm_image.domain.inspection import MAX_INSPECTION_BYTES
from slurm_image.domain.job import JobState
from slurm_image.domain.publication import load_source
from slurm_image.ports.store import ChangedWhileRead

A, B, C = (f"img-{n:032x}" for n in range(1, 4))
KEPT_BYTES = SQSH_BYTES + b" kept"
SHA = hashlib.sha256(SQSH_BYTES).hexdigest()


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def test_an_import_moves_the_candidate_into_the_store_and_binds_the_alias(lab: PublishLab) -> None:
    plan = lab.finished(A)
    published = lab.publish(A)
    record = published.record
    artifact = lab.layout.artifact(SHA)
    assert published.changed
    assert (record.name, record.role, record.path, record.sqsh_sha256) == (
        "app",
        "client",
        artifact,
        SHA,
    )
    assert record.source_digest == f"sha256:{SOURCE_DIGEST}"
    assert record.facts["installer"]["name"] == "pip"
    assert lab.harness.read(artifact) == SQSH_BYTES
    assert lab.harness.mode(artifact) == 0o444
    assert not lab.harness.exists(plan.paths.candidate)
    assert lab.alias_entry("app") == record
    source = load_source(lab.harness.read(lab.layout.source(SOURCE_DIGEST, "x86_64")))
    assert source.sqsh_sha256 == SHA and set(source.roles) == {"client"}
    assert not lab.harness.exists(lab.layout.marker("app"))
    assert [p for p in lab.store_listing() if p.endswith(".tmp") and not p.endswith("/.tmp")] == []


def test_the_catalog_directories_are_readable_by_everyone(lab: PublishLab) -> None:
    lab.finished(A)
    lab.publish(A)
    for directory in (lab.layout.images, lab.layout.artifacts, lab.layout.aliases):
        assert lab.harness.mode(directory) & 0o055 == 0o055, directory
    assert lab.harness.mode(lab.layout.tmp) & 0o077 == 0


def test_publishing_the_same_attempt_twice_is_idempotent(lab: PublishLab) -> None:
    lab.finished(A)
    first = lab.publish(A)
    before = lab.store_listing()
    second = lab.publish(A)
    assert second.record == first.record and not second.changed
    assert lab.store_listing() == before


def test_an_existing_alias_needs_replace_and_the_old_artifact_stays(lab: PublishLab) -> None:
    lab.finished(A)
    old = lab.publish(A).record
    other = SQSH_BYTES + b" v2"
    lab.finished(B, sqsh=other)
    with pytest.raises(AliasExists) as refused:
        lab.publish(B)
    assert refused.value.field == "name" and "--replace" in refused.value.reason
    assert lab.alias_entry("app") == old
    new = lab.publish(B, replace=True).record
    assert new.sqsh_sha256 == hashlib.sha256(other).hexdigest()
    assert lab.harness.read(old.path) == SQSH_BYTES
    assert lab.harness.read(new.path) == other


def test_identical_bytes_are_reused_and_two_aliases_keep_their_bindings(lab: PublishLab) -> None:
    lab.finished(A, name="one")
    plan_b = lab.finished(B, name="two")
    one = lab.publish(A).record
    two = lab.publish(B).record
    assert one.path == two.path == lab.layout.artifact(SHA)
    assert lab.harness.listing().count(lab.layout.artifact(SHA)) == 1
    assert lab.harness.exists(plan_b.paths.candidate)  # left to cleanup, never published twice
    assert {lab.alias_entry(n).path for n in ("one", "two")} == {one.path}


def test_a_hash_disturbed_once_is_taken_again(lab: PublishLab, mocker: Any) -> None:
    lab.finished(A, name="one")
    artifact = lab.publish(A).record.path
    lab.finished(B, name="two")
    real = lab.store.digest
    disturbed: list[str] = []

    def digest(path: str) -> Any:
        if path == artifact and not disturbed:
            disturbed.append(path)
            raise ChangedWhileRead(field=path, rule="changed while it was hashed")
        return real(path)

    mocker.patch.object(lab.store, "digest", side_effect=digest)
    assert lab.publish(B).record.path == artifact
    assert disturbed == [artifact]


def test_an_artifact_that_changes_at_every_hash_is_refused(lab: PublishLab, mocker: Any) -> None:
    lab.finished(A, name="one")
    artifact = lab.publish(A).record.path
    lab.finished(B, name="two")
    real = lab.store.digest

    def digest(path: str) -> Any:
        if path == artifact:
            raise ChangedWhileRead(field=path, rule="changed while it was hashed")
        return real(path)

    mocker.patch.object(lab.store, "digest", side_effect=digest)
    with pytest.raises(VerificationFailed, match="does not hold the bytes"):
        lab.publish(B)
    assert not lab.harness.exists(lab.layout.alias("two"))
    assert not lab.harness.exists(lab.layout.marker("two"))


def test_an_inspection_records_the_existing_path_with_its_digest(lab: PublishLab) -> None:
    source = lab.outside("serving.sqsh")
    lab.harness.write(source, SQSH_BYTES)
    lab.finished(A, operation="inspect_sqsh", role="serving", source=source)
    record = lab.publish(A).record
    assert (record.path, record.sqsh_sha256, record.role) == (source, SHA, "serving")
    assert record.facts["server"]["name"] == "vllm"
    assert not lab.harness.exists(lab.layout.artifact(SHA))
    assert lab.harness.read(source) == SQSH_BYTES


def test_inspecting_a_stored_artifact_adds_that_role_to_its_source(lab: PublishLab) -> None:
    lab.finished(A)
    stored = lab.publish(A).record
    lab.finished(B, operation="inspect_sqsh", role="serving", source=stored.path, name="srv")
    serving = lab.publish(B).record
    assert serving.path == stored.path
    assert (serving.source, serving.source_digest) == (stored.source, stored.source_digest)
    source = load_source(lab.harness.read(lab.layout.source(SOURCE_DIGEST, "x86_64")))
    assert set(source.roles) == {"client", "serving"}


@pytest.mark.parametrize(
    ("state", "exit_code"),
    [(JobState.RUNNING, None), (JobState.FAILED, 76), (JobState.CANCELLED, None)],
)
def test_only_a_successful_job_is_published(
    lab: PublishLab, state: JobState, exit_code: int | None
) -> None:
    plan = lab.finished(A)
    lab.scheduler.set_state(lab.job_of(A), state, exit_code=exit_code)
    with pytest.raises(JobNotSuccessful) as refused:
        lab.publish(A)
    assert state.value in refused.value.reason
    assert not lab.harness.exists(lab.layout.alias("app"))
    assert lab.harness.exists(plan.paths.candidate)


def test_a_lost_job_is_not_published(lab: PublishLab) -> None:
    lab.finished(A)
    lab.scheduler.forget(lab.job_of(A))
    with pytest.raises(JobNotSuccessful, match="LOST"):
        lab.publish(A)


# -- refusals: exit 5, nothing published and nothing lost ---------------------------------


def _result_refusal(kind: str, lab: PublishLab, plan: Any, monkeypatch: Any) -> None:
    result, harness = plan.paths.result, lab.harness
    if kind == "invalid json":
        harness.write(result, b"{not json")
    elif kind == "empty object":
        harness.write(result, b"{}")
    elif kind == "oversize":
        harness.write(result, b" " * (MAX_INSPECTION_BYTES + 1))
    elif kind == "fifo":
        harness.remove(result)
        harness.mkfifo(result)
    elif kind == "symlink":
        elsewhere = f"{plan.paths.job_dir}/elsewhere.json"
        harness.rename(result, elsewhere)
        harness.symlink(elsewhere, result)
    elif kind == "mutated while read":
        from slurm_image.adapters.memory import MemoryStore

        def mutate(path: str) -> None:
            if path.endswith("inspection.json"):
                harness.append(result, b" ")

        during_read(harness, lab.store, monkeypatch, mutate)
        assert kind and (isinstance(lab.store, MemoryStore) or harness.kind == "local")
    elif kind == "digest mismatch":
        harness.write(result, inspection("client", b"other bytes"))
    elif kind == "role mismatch":
        harness.write(result, inspection("serving", SQSH_BYTES))
    elif kind == "sqsh changed after the job":
        harness.append(plan.paths.sqsh, b"tampered")
    elif kind in ("artifact directory", "artifact fifo", "artifact symlink", "artifact bytes"):
        artifacts = lab.layout.artifacts
        lab.store.ensure_directory(artifacts, mode=0o755)
        artifact = lab.layout.artifact(SHA)
        if kind == "artifact directory":
            harness.mkdir(artifact)
        elif kind == "artifact fifo":
            harness.mkfifo(artifact)
        elif kind == "artifact symlink":
            harness.symlink(plan.paths.sqsh, artifact)
        else:
            harness.write(artifact, b"different bytes")
    else:
        raise AssertionError(kind)


EXPECTED = {
    "invalid json": "one UTF-8 JSON object",
    "empty object": "schema_version: Field required",
    "oversize": "holds more than",
    "fifo": "is a FIFO",
    "symlink": "is a symlink",
    "mutated while read": "changed while it was read",
    "digest mismatch": "sqsh_sha256: must equal the digest",
    "role mismatch": "role: must be client",
    "sqsh changed after the job": "sqsh_sha256: must equal the digest",
    "artifact directory": "is a directory",
    "artifact fifo": "is a FIFO",
    "artifact symlink": "is a symlink",
    "artifact bytes": "does not hold the bytes",
}
REFUSALS = list(EXPECTED)


@pytest.mark.parametrize("kind", REFUSALS)
def test_publish_refuses(kind: str, lab: PublishLab, monkeypatch: pytest.MonkeyPatch) -> None:
    lab.finished(A, name="keep", sqsh=KEPT_BYTES)
    kept = lab.publish(A).record
    plan = lab.finished(B)
    _result_refusal(kind, lab, plan, monkeypatch)
    candidate_before = lab.harness.read(plan.paths.candidate)
    with pytest.raises(VerificationFailed) as refused:
        lab.publish(B)
    monkeypatch.undo()
    assert refused.value.field and EXPECTED[kind] in str(refused.value)
    assert not lab.harness.exists(lab.layout.alias("app"))
    assert not lab.harness.exists(lab.layout.marker("app"))
    assert lab.harness.read(plan.paths.candidate) == candidate_before
    assert lab.alias_entry("keep") == kept
    assert lab.harness.read(kept.path) == KEPT_BYTES


def test_an_inspected_image_changed_after_the_job_is_refused(lab: PublishLab) -> None:
    source = lab.outside("image.sqsh")
    lab.harness.write(source, SQSH_BYTES)
    lab.finished(A, operation="inspect_sqsh", source=source)
    lab.harness.append(source, b"changed")
    with pytest.raises(VerificationFailed, match="sqsh_sha256"):
        lab.publish(A)
    assert not lab.harness.exists(lab.layout.alias("app"))


def test_a_held_alias_lock_times_out_with_exit_6_and_other_aliases_proceed(
    lab: PublishLab,
) -> None:
    from slurm_image.application.publish import Publish, alias_lock
    from slurm_image.ports.lock import LockTimeout
    from slurm_image.wire.errors import exit_code_for

    lab.finished(A, name="one")
    lab.finished(B, name="two")
    impatient = Publish(lab.store, lab.locks, lab.observe, lab.clock, lock_timeout_s=0.2)
    with lab.locks.exclusive(alias_lock("one"), timeout_s=1):
        assert impatient(B).record.name == "two"
        with pytest.raises(LockTimeout) as held:
            impatient(A)
    assert exit_code_for(held.value) == 6
    assert not lab.harness.exists(lab.layout.alias("one"))
    assert impatient(A).record.name == "one"


def test_an_import_published_before_can_be_bound_again_after_a_replace(lab: PublishLab) -> None:
    lab.finished(A)
    first = lab.publish(A).record
    lab.finished(B, sqsh=KEPT_BYTES)
    lab.publish(B, replace=True)
    again = lab.publish(A, replace=True).record
    assert (again.path, again.sqsh_sha256, again.lifecycle_id) == (first.path, SHA, A)
    assert lab.harness.read(again.path) == SQSH_BYTES


def test_binding_again_rehashes_the_stored_artifact(lab: PublishLab) -> None:
    lab.finished(A)
    first = lab.publish(A).record
    lab.finished(B, sqsh=KEPT_BYTES)
    lab.publish(B, replace=True)
    lab.harness.chmod(first.path, 0o644)
    lab.harness.append(first.path, b"rot")
    with pytest.raises(VerificationFailed, match="sqsh_sha256"):
        lab.publish(A, replace=True)
    assert lab.alias_entry("app").lifecycle_id == B

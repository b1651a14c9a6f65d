"""One alias, one image per architecture: publication adds or replaces the entry of its
architecture and keeps the others, the store answers an import only for the same architecture
(the pinned digest or its per-architecture manifest), records written before architectures
were recorded keep working and answer nothing; against both stores."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from publish_support import SOURCE_DIGEST, SQSH_BYTES, PublishLab, chain_json
from slurm_image.application.catalog import Catalog
from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.application.errors import AliasExists, VerificationFailed
from slurm_image.application.maintain import Maintain
from slurm_image.domain.by_name import DEFAULT_RELEASE_GRACE
from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.errors import NoImageForArchitecture
from slurm_image.domain.publication import load_alias, load_source
from slurm_image.domain.request import make_request

A, B, C, D = (f"img-{n:032x}" for n in range(1, 5))
PINNED = f"sha256:{SOURCE_DIGEST}"
ARM_MANIFEST = "sha256:" + "a" * 64
ARM_BYTES = SQSH_BYTES + b" arm64"
ARM_SHA = hashlib.sha256(ARM_BYTES).hexdigest()
X86_SHA = hashlib.sha256(SQSH_BYTES).hexdigest()


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def _publish_both(lab: PublishLab) -> None:
    lab.finished(A, arch="aarch64", sqsh=ARM_BYTES, chain=chain_json(PINNED, ARM_MANIFEST))
    lab.publish(A)
    lab.finished(B, arch="x86_64")
    lab.publish(B)


def test_two_architectures_publish_two_entries_under_one_alias(lab: PublishLab) -> None:
    _publish_both(lab)
    document = load_alias(lab.harness.read(lab.layout.alias("app")))
    assert document.architectures == ("aarch64", "x86_64")
    arm, x86 = document.entries
    assert (arm.sqsh_sha256, x86.sqsh_sha256) == (ARM_SHA, X86_SHA)
    assert arm.path == lab.layout.artifact(ARM_SHA) and x86.path == lab.layout.artifact(X86_SHA)
    assert json.loads(lab.harness.read(lab.layout.alias("app")))["schema_version"] == 3


def test_show_resolves_for_the_machine_unless_an_architecture_is_asked_for(
    lab: PublishLab,
) -> None:
    _publish_both(lab)
    for reader in (Catalog(lab.store), CatalogReader(lab.store)):
        shown = reader.show("app", machine="x86_64")
        path = shown.path if hasattr(shown, "path") else shown.record["path"]
        assert path == lab.layout.artifact(X86_SHA)
        asked = reader.show("app", arch="aarch64", machine="x86_64")
        path = asked.path if hasattr(asked, "path") else asked.record["path"]
        assert path == lab.layout.artifact(ARM_SHA)
        with pytest.raises(NoImageForArchitecture) as refused:
            reader.show("app", arch="ppc64le", machine="x86_64")
        assert refused.value.field == "arch"
        assert "no image for ppc64le" in refused.value.rule
        assert "has: aarch64, x86_64" in refused.value.rule
        with pytest.raises(NoImageForArchitecture, match=r"this machine .riscv64. is none of"):
            reader.show("app", machine="riscv64")


def test_show_prints_the_entrys_architecture_and_the_aliass_architectures(
    lab: PublishLab,
) -> None:
    _publish_both(lab)
    shown = CatalogReader(lab.store).show("app", machine="aarch64")
    assert shown.details()["architecture"] == "aarch64"
    assert shown.architectures == ("aarch64", "x86_64")
    assert shown.details()["path"] == lab.layout.artifact(ARM_SHA)


def test_list_shows_one_row_per_architecture(lab: PublishLab) -> None:
    _publish_both(lab)
    rows = [(e.record["name"], e.record["architecture"]) for e in CatalogReader(lab.store).list()]
    assert sorted(rows) == [("app", "aarch64"), ("app", "x86_64")]
    validated = [(e.name, e.architecture) for e in Catalog(lab.store).list()]
    assert sorted(validated) == sorted(rows)


def test_republishing_an_architecture_needs_replace_and_keeps_the_others(
    lab: PublishLab,
) -> None:
    _publish_both(lab)
    newer = SQSH_BYTES + b" v2"
    lab.finished(C, arch="x86_64", sqsh=newer)
    with pytest.raises(AliasExists) as refused:
        lab.publish(C)
    assert "already for x86_64" in refused.value.rule and "--replace" in refused.value.rule
    lab.publish(C, replace=True)
    document = load_alias(lab.harness.read(lab.layout.alias("app")))
    assert document.entry("x86_64").sqsh_sha256 == hashlib.sha256(newer).hexdigest()
    assert document.entry("aarch64").sqsh_sha256 == ARM_SHA


def test_an_architecture_named_in_the_plan_is_refused_before_the_image_is_hashed(
    lab: PublishLab, mocker: Any
) -> None:
    _publish_both(lab)
    lab.finished(C, arch="aarch64", sqsh=SQSH_BYTES + b" v3")
    digest = mocker.spy(lab.store, "digest")
    with pytest.raises(AliasExists):
        lab.publish(C)
    assert digest.call_count == 0


def test_another_role_needs_replace_which_rebinds_the_whole_alias(lab: PublishLab) -> None:
    _publish_both(lab)
    lab.finished(C, arch="ppc64le", role="serving")
    with pytest.raises(AliasExists, match="client image for aarch64, x86_64"):
        lab.publish(C)
    lab.publish(C, replace=True)
    document = load_alias(lab.harness.read(lab.layout.alias("app")))
    assert document.architectures == ("ppc64le",) and document.role == "serving"


def test_the_store_answers_only_the_same_architecture_by_pin_or_per_arch_manifest(
    lab: PublishLab,
) -> None:
    _publish_both(lab)
    publisher = lab.publisher()
    arm = publisher.stored_source(PINNED, "aarch64")
    by_manifest = publisher.stored_source(ARM_MANIFEST, "aarch64")
    x86 = publisher.stored_source(PINNED, "x86_64")
    assert arm is not None and by_manifest is not None and x86 is not None
    assert arm.sqsh_sha256 == by_manifest.sqsh_sha256 == ARM_SHA
    assert x86.sqsh_sha256 == X86_SHA
    assert publisher.stored_source(PINNED, "ppc64le") is None
    assert publisher.stored_source(ARM_MANIFEST, "x86_64") is None
    record = load_source(lab.harness.read(lab.layout.source(ARM_MANIFEST, "aarch64")))
    assert record.chain is not None and record.chain.pinned == PINNED


def test_an_answer_by_the_per_arch_manifest_binds_that_reference(lab: PublishLab) -> None:
    _publish_both(lab)
    publisher = lab.publisher()
    source = publisher.stored_source(ARM_MANIFEST, "aarch64")
    assert source is not None
    reference = f"registry.example.org/team/app@{ARM_MANIFEST}"
    request = make_request(
        "import_oci", name="arm", role="client", source=reference, architecture="aarch64"
    )
    record = publisher.bind_stored(request, source).record
    assert (record.architecture, record.sqsh_sha256) == ("aarch64", ARM_SHA)
    assert record.source == reference and record.source_digest == ARM_MANIFEST


def _legacy_record(lab: PublishLab) -> dict[str, Any]:
    """The alias file of ``app`` rewritten as a schema version 2 record (no architecture)."""
    document = load_alias(lab.harness.read(lab.layout.alias("app")))
    data = json.loads(document.entry("x86_64").canonical_bytes())
    data["schema_version"] = 2
    del data["architecture"], data["job"]
    lab.harness.write(lab.layout.alias("app"), canonical_json(data))
    return data


def test_an_alias_from_before_architectures_keeps_resolving_without_arch(
    lab: PublishLab,
) -> None:
    lab.finished(B, arch="x86_64")
    lab.publish(B)
    _legacy_record(lab)
    for machine in ("x86_64", "aarch64"):
        shown = CatalogReader(lab.store).show("app", machine=machine)
        assert shown.details()["architecture"] is None and shown.architectures == (None,)
        assert Catalog(lab.store).show("app", machine=machine).architecture is None
    with pytest.raises(NoImageForArchitecture, match="has: unknown"):
        CatalogReader(lab.store).show("app", arch="x86_64", machine="x86_64")


def test_an_alias_from_before_architectures_is_rebound_only_with_replace(
    lab: PublishLab,
) -> None:
    lab.finished(B, arch="x86_64")
    lab.publish(B)
    _legacy_record(lab)
    lab.finished(C, arch="aarch64", sqsh=ARM_BYTES)
    with pytest.raises(AliasExists, match="unknown architecture"):
        lab.publish(C)
    lab.publish(C, replace=True)
    assert load_alias(lab.harness.read(lab.layout.alias("app"))).architectures == ("aarch64",)


def test_a_source_record_from_before_architectures_answers_no_architecture(
    lab: PublishLab,
) -> None:
    lab.finished(B, arch="x86_64")
    lab.publish(B)
    path = lab.layout.source(PINNED, "x86_64")
    data = json.loads(lab.harness.read(path))
    data["schema_version"] = 2
    del data["architecture"]
    lab.harness.remove(path)
    lab.harness.write(lab.layout.source(PINNED, None), canonical_json(data))
    publisher = lab.publisher()
    assert all(publisher.stored_source(PINNED, arch) is None for arch in ("x86_64", "aarch64"))


def test_the_job_must_record_the_architecture_of_an_import(lab: PublishLab) -> None:
    lab.finished(A, recorded=None)
    with pytest.raises(VerificationFailed, match="recorded no architecture"):
        lab.publish(A)
    assert not lab.harness.exists(lab.layout.alias("app"))


@pytest.mark.parametrize("content", [b"arm64\n", b"aarch64", b"aarch64\nx86_64\n", b""])
def test_a_malformed_architecture_record_is_refused(lab: PublishLab, content: bytes) -> None:
    plan = lab.finished(A)
    lab.harness.write(lab.architecture_path(plan), content)
    with pytest.raises(VerificationFailed) as refused:
        lab.publish(A)
    assert refused.value.field == lab.architecture_path(plan)
    assert not lab.harness.exists(lab.layout.alias("app"))


def test_a_recorded_architecture_other_than_the_plans_is_refused(lab: PublishLab) -> None:
    lab.finished(A, arch="aarch64", recorded="x86_64")
    with pytest.raises(VerificationFailed, match="not the plan's aarch64"):
        lab.publish(A)


def test_an_image_that_ran_as_another_architecture_is_refused(lab: PublishLab) -> None:
    lab.finished(A, arch="aarch64", machine="x86_64")
    with pytest.raises(VerificationFailed) as refused:
        lab.publish(A)
    assert refused.value.field == "inspection.machine"
    assert "not as aarch64" in refused.value.rule
    lab.finished(B, machine="armv7l")
    with pytest.raises(VerificationFailed, match="ran as 'armv7l'"):
        lab.publish(B)


def test_an_inspect_without_architecture_takes_the_one_the_image_ran_as(
    lab: PublishLab,
) -> None:
    image = lab.outside("arm.sqsh")
    lab.harness.write(image, ARM_BYTES)
    lab.finished(A, operation="inspect_sqsh", source=image, sqsh=ARM_BYTES, machine="aarch64")
    assert lab.publish(A).record.architecture == "aarch64"


def test_an_inspect_for_a_named_architecture_needs_the_jobs_record(lab: PublishLab) -> None:
    image = lab.outside("arm.sqsh")
    lab.harness.write(image, ARM_BYTES)
    lab.finished(
        A, operation="inspect_sqsh", source=image, sqsh=ARM_BYTES, arch="aarch64", recorded=None
    )
    with pytest.raises(VerificationFailed, match="recorded no architecture"):
        lab.publish(A)


def test_gc_keeps_every_architectures_artifact_and_drops_all_sources_of_a_dropped_one(
    lab: PublishLab,
) -> None:
    _publish_both(lab)
    maintain = Maintain(lab.store, lab.locks, lab.observe, lab.clock)
    from datetime import timedelta

    assert [r.path for r in maintain.gc(older_than=timedelta(days=1)) if r.kind == "artifact"] == []
    lab.finished(C, arch="aarch64", sqsh=SQSH_BYTES + b" v4")
    lab.publish(C, replace=True)
    assert [r for r in maintain.gc(older_than=timedelta(days=1)) if r.kind == "artifact"] == []
    lab.clock.advance(DEFAULT_RELEASE_GRACE)  # the replaced artifact is kept this long
    removed = maintain.gc(older_than=timedelta(days=1))
    assert {r.path for r in removed if r.kind == "artifact"} == {lab.layout.artifact(ARM_SHA)}
    # the pin's aarch64 record now names the new artifact; the old one's manifest record goes
    assert {r.path for r in removed if r.kind == "source"} == {
        lab.layout.source(ARM_MANIFEST, "aarch64")
    }
    assert lab.harness.exists(lab.layout.source(PINNED, "x86_64"))
    assert lab.harness.exists(lab.layout.source(PINNED, "aarch64"))

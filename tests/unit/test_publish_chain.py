"""An import is published only with the chain its job verified (chain.json, from the plan's
pinned digest on), and the store records that chain; a source recorded without one (before the
job verified anything) never answers an import from the store. Both stores, the fake scheduler."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from publish_support import (
    CONFIG_DIGEST,
    SOURCE_DIGEST,
    SQSH_BYTES,
    PublishLab,
    chain_json,
)
from slurm_image.application.catalog import Catalog
from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.application.errors import VerificationFailed
from slurm_image.domain.publication import load_source
from slurm_image.domain.verified_chain import CHAIN_RECORD_MAX_BYTES, VerifiedChain

A, B, C = (f"img-{n:032x}" for n in range(1, 4))
PIN = f"sha256:{SOURCE_DIGEST}"
MANIFEST = "sha256:" + "e" * 64
SHA = hashlib.sha256(SQSH_BYTES).hexdigest()


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def test_an_import_records_the_chain_its_job_verified(lab: PublishLab) -> None:
    lab.finished(A, chain=chain_json(PIN, MANIFEST))  # the pin is an index
    record = lab.publish(A).record
    chain = VerifiedChain(pinned=PIN, manifest=MANIFEST, config=CONFIG_DIGEST)
    assert record.chain == chain
    assert lab.alias_entry("app").chain == chain
    source = load_source(lab.harness.read(lab.layout.source(SOURCE_DIGEST, "x86_64")))
    assert (source.schema_version, source.chain, source.verified) == (3, chain, True)
    by_manifest = load_source(lab.harness.read(lab.layout.source(MANIFEST, "x86_64")))
    assert (by_manifest.source_digest, by_manifest.chain) == (MANIFEST, chain)
    stored = json.loads(lab.harness.read(lab.layout.source(SOURCE_DIGEST, "x86_64")))
    assert stored["chain"] == {"pinned": PIN, "manifest": MANIFEST, "config": CONFIG_DIGEST}
    assert CatalogReader(lab.store).show("app").details()["chain"] == stored["chain"]


def _chain_refusal(kind: str, lab: PublishLab, path: str) -> None:
    harness = lab.harness
    if kind == "missing":
        harness.remove(path)
    elif kind == "not JSON":
        harness.write(path, b'{"pinned": "sha256:')
    elif kind == "another pin":
        harness.write(path, chain_json("sha256:" + "9" * 64))
    elif kind == "a bad digest":
        harness.write(path, chain_json(PIN, "sha256:" + "E" * 64))
    elif kind == "not the job's form":
        harness.write(path, json.dumps(json.loads(chain_json(PIN)), indent=1).encode())
    elif kind == "oversized":
        harness.write(path, chain_json(PIN) + b" " * CHAIN_RECORD_MAX_BYTES)
    elif kind == "a symlink":
        elsewhere = path.replace("chain.json", "output/chain.json")
        harness.rename(path, elsewhere)
        harness.symlink(elsewhere, path)
    elif kind == "a FIFO":
        harness.remove(path)
        harness.mkfifo(path)
    elif kind == "a directory":
        harness.remove(path)
        harness.mkdir(path)
    else:
        raise AssertionError(kind)


EXPECTED = {
    "missing": "does not exist: the job recorded no verified chain",
    "not JSON": "chain: must be one UTF-8 JSON object",
    "another pin": f"chain.pinned: must be the plan's source digest {PIN}",
    "a bad digest": "chain.manifest: must be sha256: and 64 lowercase hex",
    "not the job's form": "chain: must be in the form the job writes",
    "oversized": "more than",
    "a symlink": "symlink",
    "a FIFO": "FIFO",
    "a directory": "directory",
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_an_import_without_a_valid_chain_for_its_pin_is_refused_and_records_nothing(
    kind: str, lab: PublishLab
) -> None:
    plan = lab.finished(A)
    _chain_refusal(kind, lab, lab.chain_path(plan))
    with pytest.raises(VerificationFailed) as refused:
        lab.publish(A)
    assert refused.value.field == lab.chain_path(plan)
    assert EXPECTED[kind] in refused.value.reason
    written = [
        p
        for p in lab.store_listing()
        if lab.harness.kind_of(p) != "directory" and not p.startswith(lab.layout.locks)
    ]
    assert written == []  # no artifact, no record, no marker, no temporary
    assert not lab.harness.exists(lab.layout.alias("app"))
    assert not lab.harness.exists(lab.layout.source(SOURCE_DIGEST, "x86_64"))
    assert not lab.harness.exists(lab.layout.artifact(SHA))
    assert lab.harness.read(plan.paths.candidate) == SQSH_BYTES


def test_the_refusal_exits_5_as_every_verification_failure(lab: PublishLab) -> None:
    from slurm_image.wire.errors import exit_code_for

    lab.finished(A, chain=b"")
    with pytest.raises(VerificationFailed) as refused:
        lab.publish(A)
    assert exit_code_for(refused.value) == 5
    assert "chain.json" in str(refused.value)


def test_an_inspection_needs_no_chain(lab: PublishLab) -> None:
    image = lab.outside("image.sqsh")
    lab.harness.write(image, SQSH_BYTES)
    plan = lab.finished(A, operation="inspect_sqsh", source=image)
    assert not lab.harness.exists(lab.chain_path(plan))
    record = lab.publish(A).record
    assert (record.path, record.chain, record.source_digest) == (image, None, None)


# -- "already imported": only a source with a verified chain answers ----------------------


def _as_written_before_the_chain(lab: PublishLab) -> None:
    """Rewrite the source record (and the alias) as schema version 1 wrote them: no chain, no
    architecture, the source under its digest alone."""
    source = lab.layout.source(SOURCE_DIGEST, "x86_64")
    alias = lab.layout.alias("app")
    records = {
        source: (lab.layout.source(SOURCE_DIGEST, None), json.loads(lab.harness.read(source))),
        alias: (alias, json.loads(lab.harness.read(alias))["entries"][0]),
    }
    for path, (written, record) in records.items():
        del record["chain"], record["architecture"]
        record.pop("job", None)  # the alias entry's: recorded from version 6 on
        record["schema_version"] = 1
        lab.harness.remove(path)
        lab.harness.write(written, json.dumps(record).encode())
        lab.harness.chmod(written, 0o644)


def test_a_source_with_its_chain_answers_an_import_from_the_store(lab: PublishLab) -> None:
    lab.finished(A)
    lab.publish(A)
    source = lab.publisher().stored_source(PIN, "x86_64")
    assert source is not None and source.verified and source.sqsh_sha256 == SHA


def test_a_source_recorded_before_the_chain_answers_nothing_yet_still_resolves(
    lab: PublishLab,
) -> None:
    lab.finished(A)
    published = lab.publish(A).record
    _as_written_before_the_chain(lab)
    assert load_source(lab.harness.read(lab.layout.source(SOURCE_DIGEST, None))).chain is None
    assert lab.publisher().stored_source(PIN, "x86_64") is None
    shown = CatalogReader(lab.store).show("app").details()
    assert (shown["path"], shown["chain"]) == (published.path, None)
    assert Catalog(lab.store).verify("app").chain is None
    assert [r.name for r in Catalog(lab.store).list()] == ["app"]


def test_the_import_run_again_records_its_chain_and_keeps_the_facts_of_the_same_bytes(
    lab: PublishLab,
) -> None:
    lab.finished(A)
    lab.publish(A)
    _as_written_before_the_chain(lab)
    lab.finished(B, name="again", chain=chain_json(PIN))
    lab.publish(B)
    source = load_source(lab.harness.read(lab.layout.source(SOURCE_DIGEST, "x86_64")))
    assert source.chain == VerifiedChain(PIN, PIN, CONFIG_DIGEST)
    assert set(source.roles) == {"client"} and source.roles["client"].lifecycle_id == B
    assert lab.publisher().stored_source(PIN, "x86_64") == source


def test_a_source_record_under_another_digests_name_answers_nothing(lab: PublishLab) -> None:
    lab.finished(A)
    lab.publish(A)
    other = "7" * 64
    lab.harness.write(
        lab.layout.source(other, "x86_64"),
        lab.harness.read(lab.layout.source(SOURCE_DIGEST, "x86_64")),
    )
    assert lab.publisher().stored_source(f"sha256:{other}", "x86_64") is None


def test_binding_from_the_store_carries_the_chain_into_the_alias(lab: PublishLab) -> None:
    from slurm_image.domain.request import make_request

    lab.finished(A, chain=chain_json(PIN, MANIFEST))
    lab.publish(A)
    source = lab.publisher().stored_source(PIN, "x86_64")
    assert source is not None
    request = make_request(
        "import_oci", name="other", role="client", source=lab.plans[A].request.source
    )
    bound = lab.publisher().bind_stored(request, source).record
    assert bound.chain == VerifiedChain(PIN, MANIFEST, CONFIG_DIGEST)
    assert lab.alias_entry("other").chain == bound.chain


def test_inspecting_a_stored_artifact_takes_its_sources_chain(lab: PublishLab) -> None:
    lab.finished(A)
    stored = lab.publish(A).record
    lab.finished(B, operation="inspect_sqsh", role="serving", source=stored.path, name="srv")
    serving = lab.publish(B).record
    assert serving.chain == stored.chain is not None
    source = load_source(lab.harness.read(lab.layout.source(SOURCE_DIGEST, "x86_64")))
    assert source.chain == stored.chain and set(source.roles) == {"client", "serving"}


def test_inspecting_an_artifact_of_an_old_source_proves_nothing_new(lab: PublishLab) -> None:
    lab.finished(A)
    stored = lab.publish(A).record
    _as_written_before_the_chain(lab)
    lab.finished(C, operation="inspect_sqsh", role="serving", source=stored.path, name="srv")
    serving = lab.publish(C).record
    # a source from before architectures names no architecture: it is left as it was
    assert (serving.source_digest, serving.chain, serving.source) == (None, None, stored.path)
    source = load_source(lab.harness.read(lab.layout.source(SOURCE_DIGEST, None)))
    assert (source.schema_version, source.chain, set(source.roles)) == (1, None, {"client"})
    assert lab.publisher().stored_source(PIN, "x86_64") is None


def test_binding_from_the_store_meets_an_existing_alias_as_a_publication_does(
    lab: PublishLab,
) -> None:
    from slurm_image.application.errors import AliasExists
    from slurm_image.domain.request import make_request

    lab.finished(A)
    stored = lab.publish(A).record
    other = lab.outside("other.sqsh")
    lab.harness.write(other, b"other bytes")
    lab.finished(B, operation="inspect_sqsh", name="srv", source=other, sqsh=b"other bytes")
    taken = lab.publish(B).record
    source = lab.publisher().stored_source(PIN, "x86_64")
    assert source is not None
    request = make_request("import_oci", name="srv", role="client", source=stored.source)

    with pytest.raises(AliasExists) as refused:
        lab.publisher().bind_stored(request, source)
    assert refused.value.field == "name" and "--replace" in refused.value.rule
    assert lab.alias_entry("srv") == taken

    rebound = lab.publisher().bind_stored(request, source, replace=True)
    assert rebound.changed and rebound.record.sqsh_sha256 == stored.sqsh_sha256
    again = lab.publisher().bind_stored(request, source)
    assert (again.changed, again.record) == (False, rebound.record)

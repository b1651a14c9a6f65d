"""Publication of an import the site policy accepted a signature for: the alias entry (schema
version 5) and the source record (schema version 4) carry the plan's ``signed_by``, and
``show``/``list`` print it (docs/design.md, "Image policy and signatures")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from cosign_artifacts import bundle_signature, public_pem
from publish_support import SOURCE_DIGEST, PublishLab
from slurm_image.adapters.memory import MemoryKeyFile, MemorySignatures
from slurm_image.application.signature_check import CheckSignature
from slurm_image.domain.errors import InvalidRecord
from slurm_image.domain.publication import (
    JOB_SCHEMA_VERSION,
    SIGNED_SCHEMA_VERSION,
    SIGNED_SOURCE_SCHEMA_VERSION,
    load_alias,
    load_source,
)
from slurm_image.domain.published import read_published
from slurm_image.domain.signatures import load_public_key

KEY_PATH = "/etc/slurm-image/keys/site.pub"
KEY = ec.generate_private_key(ec.SECP256R1())
LIFECYCLE = f"img-{1:032x}"
PIN = f"sha256:{SOURCE_DIGEST}"


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    lab = PublishLab(workspace_harness, profile_for, runtime_files)
    lab.profile, lab.selection = profile_for(
        workspace_harness.root, policy={"require_signature": True, "keys": [KEY_PATH]}
    )
    signatures = MemorySignatures()
    signatures.keys[KEY_PATH] = MemoryKeyFile(public_pem(KEY), uid=0)
    signed = bundle_signature(KEY, PIN)
    for reference, (data, media_type) in signed.manifests.items():
        signatures.registry.put("registry.example.org", "team/app", reference, data, media_type)
    for blob in signed.blobs:
        signatures.registry.put_blob("registry.example.org", "team/app", blob)
    lab.check_signature = CheckSignature(signatures, signatures.registry, signatures.registry.clock)
    return lab


def test_the_alias_and_source_records_carry_the_signature(lab: PublishLab) -> None:
    plan = lab.finished(LIFECYCLE)
    assert plan.signed_by is not None
    record = lab.publish(LIFECYCLE).record
    fingerprint = load_public_key(public_pem(KEY), KEY_PATH).fingerprint
    assert record.signed_by == plan.signed_by
    assert record.signed_by.key_fingerprint == fingerprint
    assert record.schema_version == JOB_SCHEMA_VERSION  # signed, and with its job
    stored = lab.alias_entry("app")
    assert stored.signed_by == plan.signed_by
    source = load_source(lab.harness.read(lab.layout.source(SOURCE_DIGEST, "x86_64")))
    assert source.signed_by == plan.signed_by
    assert source.schema_version == SIGNED_SOURCE_SCHEMA_VERSION
    shown = read_published(lab.harness.read(lab.layout.alias("app")), "app").entries[0]
    assert shown.details()["signed_by"] == plan.signed_by.model_dump(mode="json")
    assert shown.summary()["signed_by"]["key_fingerprint"] == fingerprint  # type: ignore[index]


def test_an_entry_without_a_signature_prints_signed_by_null(
    workspace_harness: Any, profile_for: Any, runtime_files: Any
) -> None:
    lab = PublishLab(workspace_harness, profile_for, runtime_files)
    lab.finished(LIFECYCLE)
    record = lab.publish(LIFECYCLE).record
    assert record.signed_by is None and record.schema_version == JOB_SCHEMA_VERSION
    assert "signed_by" not in json.loads(record.canonical_bytes())
    shown = read_published(lab.harness.read(lab.layout.alias("app")), "app").entries[0]
    assert shown.summary()["signed_by"] is None


def test_a_signature_outside_its_schema_version_is_refused(lab: PublishLab) -> None:
    lab.finished(LIFECYCLE)
    record = lab.publish(LIFECYCLE).record
    # as an entry answered from the store carries it: signed, no job
    data = {
        key: value for key, value in json.loads(record.canonical_bytes()).items() if key != "job"
    }
    data["schema_version"] = SIGNED_SCHEMA_VERSION
    assert load_alias(json.dumps(data).encode()).entries[0].signed_by == record.signed_by
    with pytest.raises(InvalidRecord, match="signed_by"):
        load_alias(json.dumps({**data, "schema_version": 3}).encode())
    unsigned = {key: value for key, value in data.items() if key != "signed_by"}
    with pytest.raises(InvalidRecord, match="signed_by"):
        load_alias(json.dumps(unsigned).encode())
    with pytest.raises(InvalidRecord, match="signed_by"):
        read_published(json.dumps({**data, "signed_by": {"key_fingerprint": 1}}).encode(), "app")


def test_show_s_human_form_names_the_signer_after_the_source(lab: PublishLab) -> None:
    from slurm_image.cli.output import describe_record

    lab.finished(LIFECYCLE)
    record = lab.publish(LIFECYCLE).record
    assert record.signed_by is not None
    lines = describe_record(record.details()).splitlines()
    keys = [line.split("  ")[1].strip() for line in lines]
    assert keys.index("signed by") == keys.index("source") + 1
    assert f"{record.signed_by.key_fingerprint} (sigstore-bundle)" in lines[keys.index("signed by")]

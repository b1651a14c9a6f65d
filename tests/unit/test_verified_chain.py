"""The verified chain as the host reads it: the attempt's chain.json in the job's one form, and
the chain the store's source and alias records keep (schema version 2; version 1 records, from
before the chain, still read and carry none)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from publish_support import chain_json
from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.publication import load_alias, load_source
from slurm_image.domain.published import read_published
from slurm_image.domain.verified_chain import (
    CHAIN_RECORD_MAX_BYTES,
    VerifiedChain,
    validate_chain_record,
)

PIN = "sha256:" + "a" * 64
MANIFEST = "sha256:" + "b" * 64
CONFIG = "sha256:" + "c" * 64
SHA = "d" * 64
ROOT = "/lustre/site/ws"
CHAIN = {"pinned": PIN, "manifest": MANIFEST, "config": CONFIG}


def test_the_record_the_job_writes_gives_its_three_digests() -> None:
    chain = validate_chain_record(chain_json(PIN, MANIFEST, CONFIG), pinned=PIN)
    assert (chain.pinned, chain.manifest, chain.config) == (PIN, MANIFEST, CONFIG)
    assert chain.record_bytes() == chain_json(PIN, MANIFEST, CONFIG)


def _pretty() -> bytes:
    return json.dumps(CHAIN, sort_keys=True, indent=2).encode() + b"\n"


def _duplicated() -> bytes:
    line = chain_json(PIN, MANIFEST, CONFIG).decode()
    return line.replace("{", f'{{"config": "{CONFIG}", ', 1).encode()


BAD: list[tuple[str, bytes, str, str]] = [
    ("oversized", b" " * (CHAIN_RECORD_MAX_BYTES + 1), "chain", "at most"),
    ("not JSON", b'{"pinned": ', "chain", "one UTF-8 JSON object"),
    ("not UTF-8", b"\xff\xfe", "chain", "one UTF-8 JSON object"),
    ("deeply nested", b"[" * 100_000 + b"]" * 100_000, "chain", ""),
    ("an array", b'["' + PIN.encode() + b'"]\n', "chain", "must be an object"),
    ("no manifest", json.dumps({"pinned": PIN, "config": CONFIG}).encode(), "chain.manifest", ""),
    ("an extra key", json.dumps({**CHAIN, "layers": []}).encode(), "chain.layers", ""),
    ("a bare hex pin", chain_json("a" * 64, MANIFEST), "chain.pinned", "sha256:"),
    ("an upper-case config", chain_json(PIN, MANIFEST, CONFIG.upper()), "chain.config", "hex"),
    (
        "a number",
        json.dumps({**CHAIN, "manifest": 1}, sort_keys=True).encode(),
        "chain.manifest",
        "",
    ),
    ("pretty-printed", _pretty(), "chain", "the form the job writes"),
    ("no newline", chain_json(PIN, MANIFEST).rstrip(b"\n"), "chain", "the form the job writes"),
    ("a key twice", _duplicated(), "chain", "the form the job writes"),
    ("another pin", chain_json(MANIFEST), "chain.pinned", f"the plan's source digest {PIN}"),
]


@pytest.mark.parametrize(("data", "field", "rule"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_chain_record_not_in_the_jobs_form_or_for_another_pin_is_refused(
    data: bytes, field: str, rule: str
) -> None:
    with pytest.raises(InvalidRecord) as refused:
        validate_chain_record(data, pinned=PIN)
    assert refused.value.field == field
    assert rule in refused.value.rule


# -- the chain in the store's records -------------------------------------------------------

SOURCE_V1: dict[str, Any] = {
    "schema_version": 1,
    "source_digest": PIN,
    "source": "r.example.org/a@" + PIN,
    "sqsh_sha256": SHA,
    "roles": {},
}
ALIAS_V1: dict[str, Any] = {
    "schema_version": 1,
    "name": "torch",
    "role": "client",
    "path": f"{ROOT}/images/artifacts/{SHA}.sqsh",
    "sqsh_sha256": SHA,
    "size": 10,
    "identity": {"device": 1, "inode": 2},
    "operation": "import_oci",
    "source": "r.example.org/a@" + PIN,
    "source_digest": PIN,
    "inspection_schema_version": 1,
    "inspector_version": "1.0.0",
    "facts": {"python": {}},
    "lifecycle_id": "img-" + "0" * 32,
    "published_at": "2025-01-01T00:00:00.000000Z",
}


def test_a_source_record_from_before_the_chain_still_reads_and_is_not_verified() -> None:
    old = load_source(json.dumps(SOURCE_V1).encode())
    assert old.chain is None and not old.verified
    new = load_source(json.dumps({**SOURCE_V1, "schema_version": 2, "chain": CHAIN}).encode())
    assert new.verified and new.chain == VerifiedChain(PIN, MANIFEST, CONFIG)
    assert load_source(new.canonical_bytes()) == new
    assert json.loads(new.canonical_bytes())["chain"] == CHAIN


@pytest.mark.parametrize("load", [load_source, load_alias], ids=["source", "alias"])
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schema_version": 1, "chain": CHAIN}, "chain"),
        ({"chain": {**CHAIN, "pinned": MANIFEST}}, "chain.pinned"),
        ({"chain": {**CHAIN, "manifest": "b" * 64}}, "chain.manifest"),
        ({"chain": {**CHAIN, "layers": []}}, "chain.layers"),
        ({"chain": {"pinned": PIN, "manifest": MANIFEST}}, "chain.config"),
        ({"schema_version": 7}, "schema_version"),
    ],
)
def test_a_record_whose_chain_proves_nothing_of_its_source_is_refused(
    load: Any, change: dict[str, Any], field: str
) -> None:
    base = SOURCE_V1 if load is load_source else ALIAS_V1
    what = "source" if load is load_source else "alias"
    with pytest.raises(DomainError) as refused:
        load(json.dumps({**base, "schema_version": 2, **change}).encode())
    assert refused.value.field == f"{what}.{field}"


def test_an_alias_without_a_source_carries_no_chain() -> None:
    inspected = {**ALIAS_V1, "operation": "inspect_sqsh", "source_digest": None}
    (entry,) = load_alias(json.dumps({**inspected, "schema_version": 2}).encode()).entries
    assert entry.chain is None
    with pytest.raises(DomainError) as refused:
        load_alias(json.dumps({**inspected, "schema_version": 2, "chain": CHAIN}).encode())
    assert refused.value.field == "alias.chain"


def test_the_catalog_read_prints_the_chain_or_null_for_an_old_record() -> None:
    (old,) = read_published(json.dumps(ALIAS_V1).encode(), "torch").entries
    assert old.details()["chain"] is None
    (validated,) = load_alias(json.dumps(ALIAS_V1).encode()).entries
    assert old.details() == validated.details()
    record = {**ALIAS_V1, "schema_version": 2, "chain": CHAIN}
    (read,) = read_published(json.dumps(record).encode(), "torch").entries
    assert read.details()["chain"] == CHAIN
    assert load_alias(json.dumps(record).encode()).entries[0].details()["chain"] == CHAIN


@pytest.mark.parametrize(
    ("chain", "field"),
    [
        ([PIN], "alias.chain"),
        ({**CHAIN, "pinned": MANIFEST}, "alias.chain.pinned"),
        ({**CHAIN, "config": "sha256:x"}, "alias.chain.config"),
        ({**CHAIN, "extra": 1}, "alias.chain.extra"),
    ],
)
def test_the_catalog_read_checks_the_chain_by_the_same_rules(chain: Any, field: str) -> None:
    data = json.dumps({**ALIAS_V1, "schema_version": 2, "chain": chain}).encode()
    with pytest.raises(DomainError) as read:
        read_published(data, "torch")
    with pytest.raises(DomainError) as validated:
        load_alias(data)
    assert read.value.field == validated.value.field == field

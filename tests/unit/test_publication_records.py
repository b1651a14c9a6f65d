"""The store's layout and records: every name checked, every record refused unless whole."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slurm_image.domain.errors import DomainError, InvalidIdentifier, InvalidRecord
from slurm_image.domain.publication import load_alias, load_marker, load_source
from slurm_image.domain.store_layout import StoreLayout

ROOT = "/lustre/site/images"
SHA = "ab" * 32

ALIAS: dict[str, Any] = {
    "schema_version": 1,
    "name": "torch",
    "role": "client",
    "path": f"{ROOT}/images/artifacts/{SHA}.sqsh",
    "sqsh_sha256": SHA,
    "size": 10,
    "identity": {"device": 1, "inode": 2},
    "operation": "import_oci",
    "source": "r.example.org/a@sha256:" + "c" * 64,
    "source_digest": "sha256:" + "c" * 64,
    "inspection_schema_version": 1,
    "inspector_version": "1.0.0",
    "facts": {"python": {}},
    "lifecycle_id": "img-" + "0" * 32,
    "published_at": "2025-01-01T00:00:00.000000Z",
}


def test_the_layout_names_every_place_of_the_store() -> None:
    layout = StoreLayout(ROOT)
    assert layout.artifact(SHA) == f"{ROOT}/images/artifacts/{SHA}.sqsh"
    assert layout.alias("torch") == f"{ROOT}/images/aliases/torch.json"
    assert layout.source("sha256:" + SHA, None) == f"{ROOT}/images/sources/{SHA}.json"
    assert layout.source("sha256:" + SHA, "aarch64") == f"{ROOT}/images/sources/{SHA}.aarch64.json"
    assert layout.marker("torch") == f"{ROOT}/images/.tmp/markers/torch.json"
    assert layout.in_store(layout.artifact(SHA)) == SHA
    assert layout.in_store(f"{ROOT}/images/artifacts/x.sqsh") is None
    assert layout.in_store("/elsewhere/a.sqsh") is None


@pytest.mark.parametrize("name", ["../x", "a/b", "", ".hidden", "x" * 129])
def test_alias_names_that_could_escape_are_refused(name: str) -> None:
    with pytest.raises(InvalidIdentifier):
        StoreLayout(ROOT).alias(name)


@pytest.mark.parametrize("digest", ["AB" * 32, "ab" * 31, "../" + "a" * 61])
def test_digests_are_64_lowercase_hex(digest: str) -> None:
    with pytest.raises(InvalidRecord):
        StoreLayout(ROOT).artifact(digest)


def test_an_alias_record_round_trips() -> None:
    document = load_alias(json.dumps(ALIAS).encode())
    assert load_alias(document.canonical_bytes()) == document
    (record,) = document.entries
    assert document.canonical_bytes() == record.canonical_bytes()
    assert set(record.summary()) == {
        "name",
        "architecture",
        "role",
        "path",
        "sqsh_sha256",
        "source",
        "source_digest",
        "published_at",
        "resolved_from",
        "signed_by",
    }


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("path", "/x/y.img", "alias.path"),
        ("sqsh_sha256", "x", "alias.sqsh_sha256"),
        ("name", "a b", "alias.name"),
        ("role", "admin", "alias.role"),
        ("extra", 1, "alias.extra"),
        ("identity", {"device": -1, "inode": 2}, "alias.identity.device"),
        ("identity", {"device": 1, "inode": "2"}, "alias.identity.inode"),
        ("identity", {"device": 1}, "alias.identity.inode"),
        ("identity", {"device": 1, "inode": 2, "rdev": 3}, "alias.identity.rdev"),
    ],
)
def test_a_damaged_alias_record_is_refused_naming_the_field(
    key: str, value: Any, field: str
) -> None:
    with pytest.raises(DomainError) as refused:
        load_alias(json.dumps({**ALIAS, key: value}).encode())
    assert refused.value.field == field


def test_source_and_marker_records_refuse_garbage() -> None:
    for load in (load_source, load_marker):
        with pytest.raises(InvalidRecord):
            load(b"{}")
        with pytest.raises(InvalidRecord):
            load(b"not json")


def test_a_version_1_marker_is_still_finished_as_one_record_of_unknown_architecture() -> None:
    written = {"schema_version": 1, "candidate": None, "alias": ALIAS, "source": None}
    marker = load_marker(json.dumps(written).encode())
    assert marker.schema_version == 1
    assert marker.alias_document.legacy and marker.alias_document.entries == (marker.alias,)
    assert marker.source_records == ()


def test_a_marker_whose_version_and_contents_disagree_is_refused() -> None:
    entry = {**ALIAS, "schema_version": 3, "architecture": "aarch64"}
    document = {"schema_version": 3, "name": "torch", "entries": [entry]}
    good = {"schema_version": 2, "candidate": None, "alias": entry, "document": document}
    assert load_marker(json.dumps(good).encode()).alias_document.architectures == ("aarch64",)
    for broken, field in (
        ({**good, "document": None}, "marker.schema_version"),
        ({**good, "schema_version": 1}, "marker.schema_version"),
        ({**good, "alias": {**entry, "architecture": "x86_64"}}, "marker.document"),
    ):
        with pytest.raises(DomainError) as refused:
            load_marker(json.dumps(broken).encode())
        assert refused.value.field == field

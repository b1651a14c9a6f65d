"""A registry's answer for a tag, read as untrusted input (domain/manifest.py): the digest is
the bytes' own; a Docker-Content-Digest that disagrees is refused; manifests and indexes of the
four media types an import reads, nothing else; an index's manifest per architecture as Enroot
picks it."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scripted_registry import LIST_V2, OCI_INDEX, OCI_MANIFEST, V2S2, index_bytes, manifest_bytes
from slurm_image.domain.errors import InvalidRegistryAnswer, NoImageForArchitecture
from slurm_image.domain.manifest import ACCEPT, MANIFEST_MAX_BYTES, MEDIA_TYPES, read_manifest

FIELD = "registry.example.org/team/app:1"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read(data: bytes, content_type: str | None = V2S2, content_digest: str | None = None):  # type: ignore[no-untyped-def]
    return read_manifest(
        data, content_type=content_type, content_digest=content_digest, field=FIELD
    )


def test_the_accept_header_names_the_four_types_an_import_reads() -> None:
    assert ACCEPT.split(", ") == [OCI_INDEX, LIST_V2, OCI_MANIFEST, V2S2]
    assert set(MEDIA_TYPES) == set(ACCEPT.split(", "))


def test_a_manifest_is_pinned_by_the_digest_of_its_bytes() -> None:
    data = manifest_bytes("app")
    manifest = read(data, content_digest=sha256(data))
    assert (manifest.digest, manifest.media_type, manifest.size) == (sha256(data), V2S2, len(data))
    assert not manifest.is_index and manifest.entries == ()
    assert manifest.manifest_for("aarch64") == manifest.digest  # the job checks its config


def test_a_digest_header_of_other_bytes_is_refused_naming_both() -> None:
    data = manifest_bytes("app")
    lie = sha256(data + b"\n")
    with pytest.raises(InvalidRegistryAnswer) as caught:
        read(data, content_digest=lie)
    assert caught.value.field == FIELD
    assert lie in caught.value.rule and sha256(data) in caught.value.rule


def test_a_sha512_digest_header_is_checked_against_the_bytes_too() -> None:
    data = manifest_bytes("app")
    good = "sha512:" + hashlib.sha512(data).hexdigest()
    assert read(data, content_digest=good).digest == sha256(data)
    with pytest.raises(InvalidRegistryAnswer):
        read(data, content_digest="sha512:" + "0" * 128)


@pytest.mark.parametrize("header", ["md5:abc", "sha256:ABC", "sha256:" + "a" * 63, "", "x"])
def test_a_malformed_digest_header_is_refused(header: str) -> None:
    with pytest.raises(InvalidRegistryAnswer):
        read(manifest_bytes("app"), content_digest=header)


def test_an_answer_over_4_mib_is_refused() -> None:
    data = b" " * (MANIFEST_MAX_BYTES + 1)
    with pytest.raises(InvalidRegistryAnswer) as caught:
        read(data)
    assert str(MANIFEST_MAX_BYTES) in caught.value.rule


@pytest.mark.parametrize("media_type", [LIST_V2, OCI_INDEX])
def test_an_index_lists_its_manifests_and_names_one_per_architecture(media_type: str) -> None:
    amd64, arm64 = manifest_bytes("m", "amd64"), manifest_bytes("m", "arm64")
    data = index_bytes([("amd64", amd64), ("arm64", arm64)], media_type)
    index = read(data, content_type=media_type)
    assert index.is_index and index.digest == sha256(data)
    assert [entry.digest for entry in index.entries] == [sha256(amd64), sha256(arm64)]
    assert index.entries[1].platform is not None
    assert index.entries[1].platform.describe() == "linux/arm64"
    assert index.manifest_for("x86_64") == sha256(amd64)
    assert index.manifest_for("aarch64") == sha256(arm64)


def test_an_index_without_the_architecture_names_what_it_holds() -> None:
    data = index_bytes([("amd64", manifest_bytes("m")), ("s390x", manifest_bytes("s"))])
    with pytest.raises(NoImageForArchitecture) as caught:
        read(data, content_type=LIST_V2).manifest_for("ppc64le")
    assert caught.value.field == "arch"
    assert "linux/amd64, linux/s390x" in caught.value.rule


def test_the_first_entry_of_the_architecture_is_the_one_enroot_imports() -> None:
    first, second = manifest_bytes("one", "arm64"), manifest_bytes("two", "arm64")
    document = json.loads(index_bytes([("arm64", first), ("arm64", second)]))
    document["manifests"][0]["platform"]["variant"] = "v8"
    data = json.dumps(document).encode()
    assert read(data, content_type=LIST_V2).manifest_for("aarch64") == sha256(first)


def test_the_content_type_may_carry_parameters_and_may_be_absent() -> None:
    data = manifest_bytes("app")
    assert read(data, content_type=f"{V2S2}; charset=utf-8").media_type == V2S2
    assert read(data, content_type=None).media_type == V2S2  # the body's own mediaType
    assert read(data, content_type="application/json").media_type == V2S2


@pytest.mark.parametrize(
    ("data", "content_type", "rule_word"),
    [
        (b"not json", V2S2, "not JSON"),
        (b"[]", V2S2, "not a JSON object"),
        (json.dumps({"schemaVersion": 1}).encode(), V2S2, "schema version 2"),
        (manifest_bytes("app"), "application/vnd.docker.distribution.manifest.v1+prettyjws",
         "none of the types"),
        (manifest_bytes("app"), LIST_V2, "says it is"),
        (json.dumps({"schemaVersion": 2, "mediaType": LIST_V2}).encode(), LIST_V2,
         "no manifests list"),
        (json.dumps({"schemaVersion": 2, "mediaType": V2S2, "config": {}, "layers": []}).encode(),
         V2S2, "config.digest"),
        (json.dumps({"schemaVersion": 2, "mediaType": LIST_V2, "manifests": [
            {"digest": "sha512:00", "mediaType": V2S2, "size": 1}]}).encode(),
         LIST_V2, "manifests[0].digest"),
    ],
)  # fmt: skip
def test_an_answer_that_is_no_manifest_or_index_is_refused(
    data: bytes, content_type: str, rule_word: str
) -> None:
    with pytest.raises(InvalidRegistryAnswer) as caught:
        read(data, content_type=content_type)
    assert rule_word in caught.value.rule


@given(st.binary(max_size=300), st.sampled_from([*MEDIA_TYPES, None, "text/html"]))
def test_any_answer_is_read_or_refused_never_anything_else(
    data: bytes, content_type: str | None
) -> None:
    try:
        manifest = read(data, content_type=content_type)
    except InvalidRegistryAnswer as error:
        assert error.field == FIELD
    else:
        assert manifest.digest == sha256(data)


@given(st.binary(max_size=200), st.binary(min_size=1, max_size=8))
def test_a_digest_header_is_believed_only_for_the_bytes_it_names(
    data: bytes, changed: bytes
) -> None:
    with pytest.raises(InvalidRegistryAnswer):
        read(data, content_digest=sha256(data + changed))

"""Every JSON a registry sends is parsed with its nesting bounded (domain/untrusted_json.py):
400 KB of brackets in a manifest, a token answer, a signature index, a referrer or ``.sig``
manifest, a bundle or a signed payload is refused with the reader's own error and exit code
(8 for an answer, 10 for signature material), never a RecursionError."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from scripted_registry import V2S2
from slurm_image.domain import signatures
from slurm_image.domain.errors import InvalidRegistryAnswer, SignatureRefused, SlurmImageError
from slurm_image.domain.manifest import read_manifest
from slurm_image.domain.registry_auth import read_token_answer
from slurm_image.domain.signatures import BUNDLE, Candidate, sha256_digest
from slurm_image.domain.untrusted_json import (
    JSON_DEPTH_MAX,
    UnreadableJson,
    load_untrusted_json,
)
from slurm_image.wire.errors import EXIT_REGISTRY_ANSWER, EXIT_UNSIGNED, exit_code_for

PIN = "sha256:" + "ab" * 32
BRACKETS = b"[" * 400_000
OBJECTS = b'{"a":' * 100_000


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_400_kb_of_brackets_is_refused_as_too_deep() -> None:
    for data in (BRACKETS, OBJECTS):
        with pytest.raises(UnreadableJson) as caught:
            load_untrusted_json(data)
        assert caught.value.reason == f"nests deeper than {JSON_DEPTH_MAX} levels"


def test_the_bound_is_the_depth_of_arrays_and_objects() -> None:
    assert load_untrusted_json(nested(JSON_DEPTH_MAX)) is not None
    assert load_untrusted_json(b'{"a": ' * (JSON_DEPTH_MAX - 1) + b"[1]" + b"}" * 31) is not None
    for data in (nested(JSON_DEPTH_MAX + 1), nested(900)):  # 900 still parses: found after
        with pytest.raises(UnreadableJson, match="nests deeper"):
            load_untrusted_json(data)
    with pytest.raises(UnreadableJson, match="is not JSON"):
        load_untrusted_json(b"\xff{")


def signed_payload(data: bytes) -> None:
    candidate = Candidate(format=BUNDLE, digest=PIN, message=b"", signature=b"", payload=data)
    signatures._signed_digest(candidate, PIN)


READERS: dict[str, tuple[Callable[[bytes], object], type[SlurmImageError], int]] = {
    "manifest": (
        lambda data: read_manifest(data, content_type=V2S2, content_digest=None, field="x"),
        InvalidRegistryAnswer,
        EXIT_REGISTRY_ANSWER,
    ),
    "token answer": (
        lambda data: read_token_answer(data, field="x"),
        InvalidRegistryAnswer,
        EXIT_REGISTRY_ANSWER,
    ),
    "signature index": (
        lambda data: signatures.referrer_digests(data, PIN),
        SignatureRefused,
        EXIT_UNSIGNED,
    ),
    "referrer manifest": (
        lambda data: signatures.bundle_layer(data, sha256_digest(data), PIN),
        SignatureRefused,
        EXIT_UNSIGNED,
    ),
    "bundle": (
        lambda data: signatures.bundle_candidate(data, sha256_digest(data), PIN, PIN),
        SignatureRefused,
        EXIT_UNSIGNED,
    ),
    ".sig manifest": (
        lambda data: signatures.legacy_layers(data, PIN),
        SignatureRefused,
        EXIT_UNSIGNED,
    ),
    "signed payload": (signed_payload, SignatureRefused, EXIT_UNSIGNED),
}


@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_every_registry_json_reader_refuses_deep_nesting_with_its_exit_code(reader: str) -> None:
    read, error, code = READERS[reader]
    for data in (BRACKETS, OBJECTS):
        with pytest.raises(error) as caught:
            read(data)
        assert f"nests deeper than {JSON_DEPTH_MAX} levels" in caught.value.rule
        assert exit_code_for(caught.value) == code


def test_a_real_shaped_answer_is_far_from_the_bound() -> None:
    bundle = json.dumps(
        {"verificationMaterial": {"tlogEntries": [{"inclusionProof": {"hashes": ["h"]}}]}}
    )
    assert load_untrusted_json(bundle.encode())["verificationMaterial"]["tlogEntries"]

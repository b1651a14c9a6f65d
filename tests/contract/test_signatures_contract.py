"""The Signatures port, against every adapter: ``RegistrySignatures`` over ``HttpRegistry``
against the project's local registry (plain HTTP, scripts/local-registry), and
``MemorySignatures``. Both find cosign's two formats for a digest, answer nothing for an
unsigned one, reject malformed or misdirected signature material and over-large answers
without letting them hide a real signature, look no further than ``SIGNATURE_REQUESTS_MAX``
requests, and read a key file only when others cannot change it (ports/signatures.py)."""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from cosign_artifacts import (
    Artifacts,
    bundle_bytes,
    bundle_signature,
    legacy_signature,
    listed_together,
    public_pem,
    statement,
)
from slurm_image.adapters.memory import MemoryKeyFile, MemorySignatures
from slurm_image.adapters.oci_registry import HttpRegistry
from slurm_image.adapters.registry_signatures import RegistrySignatures
from slurm_image.domain.errors import SignatureRefused
from slurm_image.domain.signatures import (
    BUNDLE,
    LEGACY,
    SIGNATURE_MAX_BYTES,
    SIGNATURE_REQUESTS_MAX,
    SIGNATURES_MAX,
    Candidate,
    Rejected,
    load_public_key,
    verify,
)
from slurm_image.ports.signatures import KeyFileError, SignatureRequest, Signatures
from support import unavailable

PIN = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
KEY = ec.generate_private_key(ec.SECP256R1())


class Harness(Protocol):
    signatures: Signatures

    def request(self, digest: str, max_bytes: int = SIGNATURE_MAX_BYTES) -> SignatureRequest: ...

    def publish(self, artifacts: Artifacts) -> None: ...

    def key_file(self, data: bytes, mode: int = 0o644, *, symlink: bool = False) -> str: ...


@dataclass
class MemoryHarness:
    signatures: MemorySignatures = field(default_factory=MemorySignatures)
    registry: str = "registry.test"
    repository: str = "team/app"

    def __post_init__(self) -> None:
        self.signatures.registry.host(self.registry)

    def request(self, digest: str, max_bytes: int = SIGNATURE_MAX_BYTES) -> SignatureRequest:
        return SignatureRequest(self.registry, self.repository, digest, max_bytes, 10.0)

    def publish(self, artifacts: Artifacts) -> None:
        for reference, (data, media_type) in artifacts.manifests.items():
            self.signatures.registry.put(
                self.registry, self.repository, reference, data, media_type
            )
        for blob in artifacts.blobs:
            self.signatures.registry.put_blob(self.registry, self.repository, blob)

    def key_file(self, data: bytes, mode: int = 0o644, *, symlink: bool = False) -> str:
        path = f"/etc/slurm-image/keys/{uuid.uuid4().hex}.pub"
        self.signatures.keys[path] = MemoryKeyFile(data, mode=mode, symlink=symlink)
        return path


@dataclass
class HttpHarness:
    registry: str
    tmp_path: Path
    repository: str = field(default_factory=lambda: f"slurm-image-contract/sig-{uuid.uuid4().hex}")

    def __post_init__(self) -> None:
        self.signatures = RegistrySignatures(HttpRegistry())

    def request(self, digest: str, max_bytes: int = SIGNATURE_MAX_BYTES) -> SignatureRequest:
        return SignatureRequest(
            self.registry, self.repository, digest, max_bytes, 30.0, allow_http=True
        )

    def publish(self, artifacts: Artifacts) -> None:
        push(self.registry, self.repository, artifacts)

    def key_file(self, data: bytes, mode: int = 0o644, *, symlink: bool = False) -> str:
        path = self.tmp_path / f"{uuid.uuid4().hex}.pub"
        target = path.with_suffix(".target") if symlink else path
        target.write_bytes(data)
        target.chmod(mode)
        if symlink:
            path.symlink_to(target)
        return str(path)


def push(registry: str, repository: str, artifacts: Artifacts) -> None:
    """Push blobs, then manifests (referrers before the index naming them), over plain HTTP."""
    base = f"http://{registry}/v2/{repository}"
    with httpx.Client(timeout=30) as client:
        for blob in artifacts.blobs:
            started = client.post(f"{base}/blobs/uploads/")
            assert started.status_code == 202, started.text
            location = httpx.URL(base).join(started.headers["location"])
            digest = "sha256:" + hashlib.sha256(blob).hexdigest()
            done = client.put(location.copy_merge_params({"digest": digest}), content=blob)
            assert done.status_code == 201, done.text
        for reference, (data, media_type) in sorted(
            artifacts.manifests.items(), key=lambda item: item[0].startswith("sha256-")
        ):
            put = client.put(
                f"{base}/manifests/{reference}",
                content=data,
                headers={"Content-Type": media_type},
            )
            assert put.status_code == 201, put.text


def reachable(registry: str) -> bool:
    host, _, port = registry.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(params=["memory", "registry"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    if request.param == "memory":
        return MemoryHarness()
    registry = os.environ.get("SLURM_IMAGE_TEST_REGISTRY", "localhost:5000")
    registry = registry.replace("localhost", "127.0.0.1")
    if not reachable(registry):
        unavailable(f"the local registry {registry} is not up (scripts/local-registry start)")
    return HttpHarness(registry, tmp_path)


def found(harness: Harness, digest: str = PIN, **request: int) -> list[Candidate | Rejected]:
    return list(harness.signatures.signatures_of(harness.request(digest, **request)))


def test_an_unsigned_digest_has_no_signatures(harness: Harness) -> None:
    assert found(harness) == []


def test_both_cosign_formats_are_found_and_verify(harness: Harness) -> None:
    harness.publish(bundle_signature(KEY, PIN))
    harness.publish(legacy_signature(KEY, PIN))
    candidates = found(harness)
    assert [getattr(candidate, "format", None) for candidate in candidates] == [BUNDLE, LEGACY]
    key = load_public_key(public_pem(KEY), "/k/site.pub")
    for candidate in candidates:
        assert verify([candidate], [key], [PIN], PIN).key_fingerprint == key.fingerprint


def test_a_bundle_manifest_whose_subject_is_another_digest_is_rejected(harness: Harness) -> None:
    junk = bundle_signature(KEY, PIN, subject=OTHER)
    harness.publish(junk)
    (rejected,) = found(harness)
    assert isinstance(rejected, Rejected)
    assert rejected.where in junk.manifests
    assert "signature of another digest" in rejected.reason
    key = load_public_key(public_pem(KEY), "/k/site.pub")
    with pytest.raises(SignatureRefused, match="signature of another digest"):
        verify([rejected], [key], [PIN], PIN)


def test_a_junk_referrer_listed_before_the_real_one_does_not_hide_it(harness: Harness) -> None:
    other_key = ec.generate_private_key(ec.SECP256R1())
    junk = bundle_signature(other_key, PIN, subject=OTHER)
    harness.publish(listed_together(PIN, junk, bundle_signature(KEY, PIN)))
    rejected, real = found(harness)
    assert isinstance(rejected, Rejected) and isinstance(real, Candidate)
    key = load_public_key(public_pem(KEY), "/k/site.pub")
    assert verify(found(harness), [key], [PIN], PIN).digest == real.digest


def test_malformed_legacy_base64_is_rejected(harness: Harness) -> None:
    harness.publish(legacy_signature(KEY, PIN, annotation="not*base64"))
    (rejected,) = found(harness)
    assert isinstance(rejected, Rejected) and "not valid base64" in rejected.reason


def test_a_bundle_over_the_bound_is_rejected_while_read(harness: Harness) -> None:
    large = bundle_bytes(KEY, statement(PIN), padding="x" * 8192)
    harness.publish(bundle_signature(KEY, PIN, bundle=large))
    (rejected,) = found(harness, max_bytes=4096)
    assert isinstance(rejected, Rejected) and "sent more than 4096 bytes" in rejected.reason


def test_a_lookup_looks_no_further_than_its_request_bound(harness: Harness) -> None:
    # Every referrer costs two requests (its manifest, its bundle): a full index needs more.
    keys = [ec.generate_private_key(ec.SECP256R1()) for _ in range(SIGNATURES_MAX)]
    harness.publish(listed_together(PIN, *(bundle_signature(key, PIN) for key in keys)))
    harness.publish(legacy_signature(KEY, PIN))
    *candidates, last = found(harness)
    assert len(candidates) == (SIGNATURE_REQUESTS_MAX - 2) // 2  # the index, then pairs
    assert all(isinstance(candidate, Candidate) for candidate in candidates)
    assert isinstance(last, Rejected)
    assert f"looked no further after {SIGNATURE_REQUESTS_MAX} requests" in last.reason


def test_a_key_file_others_cannot_change_is_read(harness: Harness) -> None:
    path = harness.key_file(public_pem(KEY))
    assert harness.signatures.read_key_file(path, max_bytes=65536) == public_pem(KEY)


@pytest.mark.parametrize(
    ("mode", "symlink", "words"),
    [
        (0o664, False, "writable by group or others"),
        (0o646, False, "writable by group or others"),
        (0o644, True, "symlink"),
    ],
)
def test_a_key_file_others_could_change_is_refused_naming_it(
    harness: Harness, mode: int, symlink: bool, words: str
) -> None:
    path = harness.key_file(public_pem(KEY), mode, symlink=symlink)
    with pytest.raises(KeyFileError) as caught:
        harness.signatures.read_key_file(path, max_bytes=65536)
    assert caught.value.field == path
    assert words in caught.value.rule


def test_a_missing_or_oversized_key_file_is_refused(harness: Harness) -> None:
    with pytest.raises(KeyFileError, match="no such file"):
        harness.signatures.read_key_file("/nonexistent/site.pub", max_bytes=65536)
    path = harness.key_file(public_pem(KEY))
    with pytest.raises(KeyFileError, match="larger than 10 bytes"):
        harness.signatures.read_key_file(path, max_bytes=10)

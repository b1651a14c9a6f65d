"""Cosign signatures read and verified from bytes: real cosign 3.1.1 output in both formats,
and signatures made here with keys the tests generate, for every refusal (docs/design.md,
"Image policy and signatures")."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa

from cosign_artifacts import PrivateKey, bundle_bytes, public_pem, sign, simple_signing, statement
from slurm_image.domain import signatures
from slurm_image.domain.errors import InvalidSignatureKey, SignatureRefused
from slurm_image.domain.signatures import (
    BUNDLE,
    BUNDLE_MEDIA_TYPE,
    LEGACY,
    Candidate,
    PublicKey,
    Rejected,
    bundle_candidate,
    bundle_layer,
    legacy_candidate,
    legacy_layers,
    load_public_key,
    referrer_digests,
    sha256_digest,
    verify,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cosign-3.1.1"
COSIGNED = "sha256:ced03b536b7cbf2fb0f53bbe945557cb2558470c63b7e0102edc402b225e4ed0"
"""The digest cosign 3.1.1 signed in the fixtures (localhost:5000's test client image)."""
PIN = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def bundle(private: PrivateKey, digest: str, payload: bytes | None = None) -> Candidate:
    data = bundle_bytes(private, payload if payload is not None else statement(digest))
    return bundle_candidate(data, sha256_digest(data), "sha256:" + "0" * 64, digest)


def legacy(private: PrivateKey, digest: str, payload: bytes | None = None) -> Candidate:
    payload = payload if payload is not None else simple_signing(digest)
    layer = signatures.LegacyLayer(digest=sha256_digest(payload), signature=sign(private, payload))
    return legacy_candidate(layer, payload, "sha256:" + "1" * 64, digest)


@pytest.fixture(scope="module")
def p256() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def key(p256: ec.EllipticCurvePrivateKey) -> PublicKey:
    return load_public_key(public_pem(p256), "/etc/slurm-image/keys/site.pub")


# -- real cosign output -------------------------------------------------------------------------


def test_cosign_bundle_format_verifies_and_names_the_key_fingerprint() -> None:
    key = load_public_key(fixture("cosign.pub"), "/k/cosign.pub")
    index = fixture("bundle-index.json")
    (manifest_digest,) = referrer_digests(index, COSIGNED)
    manifest = fixture("bundle-manifest.json")
    layer = bundle_layer(manifest, manifest_digest, COSIGNED)
    assert layer is not None
    candidate = bundle_candidate(fixture("bundle.json"), layer, manifest_digest, COSIGNED)
    verified = verify([candidate], [key], [COSIGNED], COSIGNED)
    assert verified.format == BUNDLE
    assert verified.digest == manifest_digest
    assert verified.signed_digest == COSIGNED
    assert verified.key_fingerprint == key.fingerprint
    # cosign's own hint is the same SHA-256 of the DER public key, in base64.
    hint = json.loads(fixture("bundle.json"))["verificationMaterial"]["publicKey"]["hint"]
    assert base64.b64decode(hint).hex() == key.fingerprint.removeprefix("sha256:")


def test_cosign_legacy_format_verifies() -> None:
    key = load_public_key(fixture("cosign.pub"), "/k/cosign.pub")
    manifest = fixture("legacy-manifest.json")
    (layer,) = legacy_layers(manifest, COSIGNED)
    candidate = legacy_candidate(
        layer, fixture("legacy-payload.json"), sha256_digest(manifest), COSIGNED
    )
    verified = verify([candidate], [key], [COSIGNED], COSIGNED)
    assert verified.format == LEGACY
    assert verified.key_fingerprint == key.fingerprint


def test_real_cosign_signatures_are_refused_for_another_key(key: PublicKey) -> None:
    manifest = fixture("legacy-manifest.json")
    (layer,) = legacy_layers(manifest, COSIGNED)
    candidate = legacy_candidate(
        layer, fixture("legacy-payload.json"), sha256_digest(manifest), COSIGNED
    )
    with pytest.raises(SignatureRefused) as caught:
        verify([candidate], [key], [COSIGNED], COSIGNED)
    assert caught.value.field == COSIGNED
    assert "not signed by a policy key" in caught.value.rule


def test_a_real_bundle_manifest_looked_up_for_another_digest_is_refused() -> None:
    manifest = fixture("bundle-manifest.json")
    with pytest.raises(SignatureRefused) as caught:
        bundle_layer(manifest, sha256_digest(manifest), PIN)
    assert "signature of another digest" in caught.value.rule


def test_a_referrer_manifest_with_other_bytes_than_its_digest_is_refused() -> None:
    manifest = fixture("bundle-manifest.json")
    with pytest.raises(SignatureRefused) as caught:
        bundle_layer(manifest, OTHER, COSIGNED)
    assert "holds other bytes" in caught.value.rule


# -- keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: ec.generate_private_key(ec.SECP256R1()),
        lambda: ec.generate_private_key(ec.SECP384R1()),
        lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    ],
    ids=["p256", "p384", "rsa2048"],
)
def test_each_key_kind_verifies_both_formats(make: Any) -> None:
    private = make()
    key = load_public_key(public_pem(private), "/k/site.pub")
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert key.fingerprint == sha256_digest(der)
    for candidate in (bundle(private, PIN), legacy(private, PIN)):
        assert verify([candidate], [key], [PIN], PIN).key_fingerprint == key.fingerprint


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "no PEM PUBLIC KEY"),
        (b"x" * (signatures.KEY_MAX_BYTES + 1), "larger than"),
        (
            b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
            "is not a PEM public key",
        ),
    ],
)
def test_a_file_that_is_no_public_key_is_refused_naming_it(data: bytes, words: str) -> None:
    with pytest.raises(InvalidSignatureKey) as caught:
        load_public_key(data, "/k/bad.pub")
    assert caught.value.field == "/k/bad.pub"
    assert words in caught.value.rule


def test_a_private_key_file_is_refused(p256: ec.EllipticCurvePrivateKey) -> None:
    pem = p256.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(InvalidSignatureKey, match="not the private"):
        load_public_key(pem, "/k/cosign.key")


@pytest.mark.parametrize(
    ("private", "words"),
    [
        (lambda: rsa.generate_private_key(public_exponent=65537, key_size=1024), "1024 bits"),
        (lambda: ec.generate_private_key(ec.SECP256K1()), "secp256k1"),
        (lambda: dsa.generate_private_key(key_size=2048), "neither"),
        (lambda: ed25519.Ed25519PrivateKey.generate(), "Ed25519ph"),
    ],
    ids=["rsa1024", "secp256k1", "dsa", "ed25519"],
)
def test_weak_or_unknown_keys_are_refused(private: Any, words: str) -> None:
    with pytest.raises(InvalidSignatureKey) as caught:
        load_public_key(public_pem(private()), "/k/weak.pub")
    assert words in caught.value.rule


# -- refusals -----------------------------------------------------------------------------------


def test_unsigned_is_refused(key: PublicKey) -> None:
    with pytest.raises(SignatureRefused) as caught:
        verify([], [key], [PIN], PIN)
    assert caught.value.field == PIN
    assert "is not signed" in caught.value.rule


def test_signed_by_another_key_is_refused(key: PublicKey) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    for candidate in (bundle(other, PIN), legacy(other, PIN)):
        with pytest.raises(SignatureRefused, match="not signed by a policy key"):
            verify([candidate], [key], [PIN], PIN)


def test_a_replayed_signature_over_another_digest_is_refused(
    p256: ec.EllipticCurvePrivateKey, key: PublicKey
) -> None:
    for candidate in (
        bundle(p256, PIN, statement(OTHER)),
        legacy(p256, PIN, simple_signing(OTHER)),
    ):
        with pytest.raises(SignatureRefused) as caught:
            verify([candidate], [key], [PIN], PIN)
        assert f"for another digest, {OTHER} (a replayed signature)" in caught.value.rule


@pytest.mark.parametrize(
    "payload",
    [
        statement(PIN, predicate="https://slsa.dev/provenance/v1"),
        simple_signing(PIN).replace(b'"critical"', b'"other"'),
        b"[1, 2]",
        b"not json",
        json.dumps({"_type": "https://example/other", "subject": []}).encode(),
    ],
    ids=["attestation", "no-critical", "array", "not-json", "other-type"],
)
def test_a_verified_payload_of_another_kind_is_refused(
    p256: ec.EllipticCurvePrivateKey, key: PublicKey, payload: bytes
) -> None:
    for candidate in (bundle(p256, PIN, payload), legacy(p256, PIN, payload)):
        with pytest.raises(SignatureRefused) as caught:
            verify([candidate], [key], [PIN], PIN)
        assert "no signature by a policy key over this digest" in caught.value.rule


def test_a_legacy_payload_of_another_type_is_refused(
    p256: ec.EllipticCurvePrivateKey, key: PublicKey
) -> None:
    candidate = legacy(p256, PIN, simple_signing(PIN, kind="atomic container signature"))
    with pytest.raises(SignatureRefused, match="is not a 'cosign container image signature'"):
        verify([candidate], [key], [PIN], PIN)


def test_one_good_signature_among_bad_ones_is_accepted(
    p256: ec.EllipticCurvePrivateKey, key: PublicKey
) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    candidates = [bundle(other, PIN), legacy(p256, PIN, simple_signing(OTHER)), legacy(p256, PIN)]
    assert verify(candidates, [key], [PIN], PIN).format == LEGACY


def test_rejected_pieces_before_a_good_signature_do_not_hide_it(
    p256: ec.EllipticCurvePrivateKey, key: PublicKey
) -> None:
    junk = Rejected(OTHER, "the signature manifest is the signature of another digest")

    def found() -> Iterator[Candidate | Rejected]:
        yield junk
        yield bundle(p256, PIN)
        raise AssertionError("read past the signature that verified")

    assert verify(found(), [key], [PIN], PIN).format == BUNDLE


def test_a_refusal_lists_what_was_rejected_the_first_seven_and_the_last(key: PublicKey) -> None:
    with pytest.raises(SignatureRefused) as caught:
        verify([Rejected(f"sha256-{n}", "malformed") for n in range(10)], [key], [PIN], PIN)
    rule = caught.value.rule
    assert rule.startswith("has no signature by a policy key over this digest: sha256-0:")
    assert rule.endswith("sha256-6: malformed; (2 more); sha256-9: malformed")


def test_a_signature_over_the_architecture_manifest_is_accepted_when_named(
    p256: ec.EllipticCurvePrivateKey, key: PublicKey
) -> None:
    verified = verify([bundle(p256, OTHER)], [key], [PIN, OTHER], PIN)
    assert verified.signed_digest == OTHER
    with pytest.raises(SignatureRefused):
        verify([bundle(p256, OTHER)], [key], [PIN], PIN)


@pytest.mark.parametrize(
    ("envelope", "words"),
    [
        ({"payload": "!!!not base64"}, "not valid base64"),
        ({"payload": ""}, "not a base64 string"),
        ({"payloadType": "text/plain"}, "is not of type"),
        ({"signatures": []}, "does not hold one signature"),
        ({"signatures": [{"sig": "a b"}]}, "not valid base64"),
    ],
)
def test_a_malformed_bundle_is_refused(
    p256: ec.EllipticCurvePrivateKey, envelope: dict[str, Any], words: str
) -> None:
    data = bundle_bytes(p256, statement(PIN), **envelope)
    with pytest.raises(SignatureRefused) as caught:
        bundle_candidate(data, sha256_digest(data), OTHER, PIN)
    assert words in caught.value.rule


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"{", "not JSON"),
        (b"[]", "not a JSON object"),
        (b"\xff", "not JSON"),
        (b" " * (signatures.SIGNATURE_MAX_BYTES + 1), "larger than"),
        (json.dumps({"mediaType": "application/json"}).encode(), "not a Sigstore bundle"),
        (json.dumps({"mediaType": BUNDLE_MEDIA_TYPE}).encode(), "no DSSE envelope"),
    ],
    ids=["truncated", "array", "not-utf8", "too-large", "other-type", "message-signature"],
)
def test_bundle_bytes_that_are_no_bundle_are_refused(data: bytes, words: str) -> None:
    with pytest.raises(SignatureRefused) as caught:
        bundle_candidate(data, sha256_digest(data), OTHER, PIN)
    assert words in caught.value.rule


def test_bundle_bytes_other_than_the_layer_digest_are_refused(
    p256: ec.EllipticCurvePrivateKey,
) -> None:
    data = bundle_bytes(p256, statement(PIN))
    with pytest.raises(SignatureRefused, match="holds other bytes"):
        bundle_candidate(data, OTHER, OTHER, PIN)


def test_a_legacy_payload_other_than_its_layer_digest_is_refused(
    p256: ec.EllipticCurvePrivateKey,
) -> None:
    payload = simple_signing(PIN)
    layer = signatures.LegacyLayer(digest=OTHER, signature=sign(p256, payload))
    with pytest.raises(SignatureRefused, match="holds other bytes"):
        legacy_candidate(layer, payload, OTHER, PIN)


def legacy_manifest(*layers: dict[str, Any]) -> bytes:
    return json.dumps({"schemaVersion": 2, "layers": list(layers)}).encode()


SIGNING = signatures.SIMPLE_SIGNING_MEDIA_TYPE


def signing_layer(digest: str = PIN, annotation: str | None = "c2ln") -> dict[str, Any]:
    layer: dict[str, Any] = {"mediaType": SIGNING, "digest": digest}
    if annotation is not None:
        layer["annotations"] = {signatures.LEGACY_SIGNATURE_ANNOTATION: annotation}
    return layer


@pytest.mark.parametrize(
    ("layer", "words"),
    [
        (signing_layer(annotation=None), "annotation is not a base64 string"),
        (signing_layer(annotation="%%%"), "not valid base64"),
        (signing_layer(digest="x"), "no sha256 digest"),
    ],
    ids=["no-annotation", "bad-base64", "bad-digest"],
)
def test_a_malformed_legacy_layer_is_rejected_and_the_others_still_read(
    layer: dict[str, Any], words: str
) -> None:
    junk, good = legacy_layers(legacy_manifest(layer, signing_layer()), PIN)
    assert isinstance(junk, Rejected)
    assert junk.where == "the .sig manifest's layer 0" and words in junk.reason
    assert good == signatures.LegacyLayer(digest=PIN, signature=b"sig")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (json.dumps({"layers": {}}).encode(), "has no layers"),
        (legacy_manifest(*[{"mediaType": "x"}] * (signatures.SIGNATURES_MAX + 1)), "more than"),
    ],
    ids=["no-layers", "too-many"],
)
def test_a_malformed_legacy_manifest_is_refused(data: bytes, words: str) -> None:
    with pytest.raises(SignatureRefused) as caught:
        legacy_layers(data, PIN)
    assert words in caught.value.rule


def test_legacy_layers_of_another_media_type_are_not_signatures() -> None:
    assert legacy_layers(legacy_manifest({"mediaType": "application/octet-stream"}), PIN) == []


def referrer_manifest(subject: str, artifact: str = BUNDLE_MEDIA_TYPE) -> bytes:
    return json.dumps(
        {
            "schemaVersion": 2,
            "artifactType": artifact,
            "layers": [{"mediaType": BUNDLE_MEDIA_TYPE, "digest": OTHER}],
            "subject": {"digest": subject},
        }
    ).encode()


def test_a_referrer_of_another_kind_is_passed_over() -> None:
    data = referrer_manifest(PIN, artifact="application/spdx+json")
    assert bundle_layer(data, sha256_digest(data), PIN) is None


def test_a_bundle_manifest_for_another_subject_is_refused() -> None:
    data = referrer_manifest(OTHER)
    with pytest.raises(SignatureRefused, match="signature of another digest"):
        bundle_layer(data, sha256_digest(data), PIN)


@pytest.mark.parametrize(
    ("index", "words"),
    [
        ({"manifests": {}}, "lists no manifests"),
        ({"manifests": [{"digest": "sha256:x"}]}, "without a sha256 digest"),
        ({"manifests": [{"digest": PIN}] * (signatures.SIGNATURES_MAX + 1)}, "more than"),
    ],
)
def test_a_malformed_signature_index_is_refused(index: dict[str, Any], words: str) -> None:
    with pytest.raises(SignatureRefused) as caught:
        referrer_digests(json.dumps(index).encode(), PIN)
    assert words in caught.value.rule


def test_the_tags_cosign_writes_under() -> None:
    assert signatures.bundle_tag(PIN) == "sha256-" + "ab" * 32
    assert signatures.legacy_tag(PIN) == "sha256-" + "ab" * 32 + ".sig"

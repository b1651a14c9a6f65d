"""Signatures as cosign 3.1.1 writes them to a registry without the referrers API, made here
with keys the tests generate: the bundle format (an index tagged ``sha256-<hex>`` listing a
referrer manifest whose one layer is a Sigstore bundle v0.3 with a DSSE envelope) and the
legacy one (a manifest tagged ``sha256-<hex>.sig`` of simple-signing payloads). The shapes are
those of tests/fixtures/cosign-3.1.1, which real cosign wrote."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from slurm_image.domain import signatures
from slurm_image.domain.manifest import OCI_INDEX, OCI_MANIFEST

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
EMPTY = b"{}"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def public_pem(private: PrivateKey) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def sign(private: PrivateKey, message: bytes) -> bytes:
    if isinstance(private, ec.EllipticCurvePrivateKey):
        algorithm = {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}
        return private.sign(message, ec.ECDSA(algorithm[private.curve.key_size]))
    if isinstance(private, rsa.RSAPrivateKey):
        return private.sign(message, padding.PKCS1v15(), hashes.SHA256())
    return private.sign(message)


def statement(digest: str, predicate: str = signatures.COSIGN_SIGN_PREDICATE) -> bytes:
    return compact(
        {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"digest": {"sha256": digest.removeprefix("sha256:")}, "annotations": {}}],
            "predicateType": predicate,
            "predicate": {},
        }
    )


def simple_signing(digest: str, kind: str = signatures.SIMPLE_SIGNING_TYPE) -> bytes:
    return compact(
        {
            "critical": {
                "identity": {"docker-reference": "127.0.0.1:5000/x"},
                "image": {"docker-manifest-digest": digest},
                "type": kind,
            },
            "optional": None,
        }
    )


def bundle_bytes(private: PrivateKey, signed: bytes, **envelope: Any) -> bytes:
    pae = signatures.dsse_pae(signatures.DSSE_PAYLOAD_TYPE, signed)
    return compact(
        {
            "mediaType": signatures.BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {"hint": "x"}},
            "dsseEnvelope": {
                "payload": base64.b64encode(signed).decode(),
                "payloadType": signatures.DSSE_PAYLOAD_TYPE,
                "signatures": [{"sig": base64.b64encode(sign(private, pae)).decode()}],
                **envelope,
            },
        }
    )


@dataclass
class Artifacts:
    """What to push: manifests by tag or digest (with their media type), and blobs."""

    manifests: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    blobs: list[bytes] = field(default_factory=list)


def bundle_signature(
    private: PrivateKey,
    digest: str,
    *,
    signed: bytes | None = None,
    subject: str | None = None,
    bundle: bytes | None = None,
) -> Artifacts:
    """cosign's default format for ``digest``: ``signed`` the statement (by default one naming
    ``digest``), ``subject`` the referrer manifest's subject (by default ``digest``)."""
    data = bundle if bundle is not None else bundle_bytes(private, signed or statement(digest))
    manifest = compact(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.empty.v1+json",
                "size": len(EMPTY),
                "digest": sha256(EMPTY),
                "artifactType": signatures.BUNDLE_MEDIA_TYPE,
            },
            "layers": [
                {
                    "mediaType": signatures.BUNDLE_MEDIA_TYPE,
                    "size": len(data),
                    "digest": sha256(data),
                }
            ],
            "annotations": {"dev.sigstore.bundle.content": "dsse-envelope"},
            "subject": {"mediaType": OCI_MANIFEST, "size": 1, "digest": subject or digest},
            "artifactType": signatures.BUNDLE_MEDIA_TYPE,
        }
    )
    index = compact(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "size": len(manifest),
                    "digest": sha256(manifest),
                    "artifactType": "application/vnd.oci.empty.v1+json",
                }
            ],
        }
    )
    return Artifacts(
        manifests={
            sha256(manifest): (manifest, OCI_MANIFEST),
            signatures.bundle_tag(digest): (index, OCI_INDEX),
        },
        blobs=[EMPTY, data],
    )


def listed_together(digest: str, *parts: Artifacts) -> Artifacts:
    """The bundle signatures ``parts`` of ``digest`` listed by one index, in the order given, as
    cosign appends each new signature (and anyone who may push, any referrer) to it."""
    tag = signatures.bundle_tag(digest)
    together = Artifacts()
    entries: list[Any] = []
    for part in parts:
        index, _ = part.manifests[tag]
        entries += json.loads(index)["manifests"]
        together.manifests.update(
            (reference, manifest)
            for reference, manifest in part.manifests.items()
            if reference != tag
        )
        together.blobs += [blob for blob in part.blobs if blob not in together.blobs]
    index = compact({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
    together.manifests[tag] = (index, OCI_INDEX)
    return together


def legacy_signature(
    private: PrivateKey, digest: str, *, payload: bytes | None = None, annotation: str | None = None
) -> Artifacts:
    """cosign's legacy format (``--new-bundle-format=false``) for ``digest``."""
    payload = payload if payload is not None else simple_signing(digest)
    signature = annotation or base64.b64encode(sign(private, payload)).decode()
    config = compact({"architecture": "", "os": "", "rootfs": {"type": "", "diff_ids": []}})
    manifest = compact(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "size": len(config),
                "digest": sha256(config),
            },
            "layers": [
                {
                    "mediaType": signatures.SIMPLE_SIGNING_MEDIA_TYPE,
                    "size": len(payload),
                    "digest": sha256(payload),
                    "annotations": {signatures.LEGACY_SIGNATURE_ANNOTATION: signature},
                }
            ],
        }
    )
    return Artifacts(
        manifests={signatures.legacy_tag(digest): (manifest, OCI_MANIFEST)},
        blobs=[config, payload],
    )

"""Cosign signatures of a pinned digest, read and verified from bytes (docs/design.md, "Image
policy and signatures"). No I/O: the ``Signatures`` port fetches the bytes, this module
decides whether one of them is a signature by a policy key over the digest.

Two formats, both as cosign 3.1.1 writes them with a key and no transparency log
(``cosign sign --key K --use-signing-config=false --tlog-upload=false``):

- ``sigstore-bundle`` (the default): under the tag ``sha256-<hex>`` an OCI index lists
  referrer manifests; one whose ``artifactType`` is a Sigstore bundle holds, as its one layer,
  a bundle v0.3 with a DSSE envelope. The envelope's payload is an in-toto statement whose
  subject names the digest and whose predicate type is cosign's signing predicate; the
  signature is over the DSSE pre-authentication encoding (PAE) of the payload type and payload.
- ``cosign-legacy`` (``--new-bundle-format=false``): the manifest tagged ``sha256-<hex>.sig``,
  whose layers are simple-signing payloads, each with its signature, in base64, in the
  annotation ``dev.cosignproject.cosign/signature``; the signature is over the payload bytes.

Keys are PEM ``PUBLIC KEY`` (SubjectPublicKeyInfo) files as ``cosign generate-key-pair`` and
``cosign public-key`` write them: ECDSA P-256 (SHA-256), P-384 (SHA-384) and P-521 (SHA-512) as
cosign pairs them, and RSA of 2048 bits or more (PKCS#1 v1.5, SHA-256). Ed25519 keys are
refused: cosign 3.1.1 signs with them as Ed25519ph (pre-hashed), which ``cryptography`` does
not verify, so every real signature by one would be refused as another key's. A key's
fingerprint is ``sha256:<hex>`` of its DER SubjectPublicKeyInfo. Keyless signatures (a Fulcio
certificate, a Rekor entry) are not read: they need the Sigstore services' network.

Every value read here came from a registry and is untrusted: sizes are bounded, base64 is
strict, JSON must be an object, and a refusal names the digest and what was missing. Anyone
who may push to the repository may add signature material (a referrer of another subject, a
malformed layer) beside the real signatures: such a piece is a ``Rejected``, never a reason to
stop looking, and ``verify`` accepts the digest when any candidate verifies.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slurm_image.domain.errors import (
    InvalidSignatureKey,
    ReplayedSignature,
    SignatureRefused,
    SignedByOtherKey,
    Unsigned,
)
from slurm_image.domain.signed_by import SignatureFormat, SignedBy
from slurm_image.domain.untrusted_json import UnreadableJson, load_untrusted_json

# ``cryptography`` is imported where a key is read or a signature checked, not with this
# module: a command that checks no signature never loads it (docs/startup.md).
if TYPE_CHECKING:
    from typing import TypeAlias

    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    PublicKeyType: TypeAlias = ec.EllipticCurvePublicKey | rsa.RSAPublicKey

BUNDLE: SignatureFormat = "sigstore-bundle"
LEGACY: SignatureFormat = "cosign-legacy"

SIGNATURE_MAX_BYTES = 1024 * 1024
"""The largest signature manifest, index, bundle or payload read (real ones are under 4 KiB)."""
KEY_MAX_BYTES = 64 * 1024
SIGNATURES_MAX = 32
"""The most entries of a signature index or layers of a ``.sig`` manifest read; more is
refused, not truncated."""
SIGNATURE_REQUESTS_MAX = 64
"""The most requests one digest's lookup makes (a signature costs two or three); past them
the lookup looks no further, and what it found is all there is."""
REASONS_SHOWN = 8
"""The most reasons a refusal lists: the first ones and the last (the others are counted)."""

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
DSSE_PAYLOAD_TYPE = "application/vnd.in-toto+json"
INTOTO_STATEMENT_TYPES = frozenset(
    {"https://in-toto.io/Statement/v1", "https://in-toto.io/Statement/v0.1"}
)
COSIGN_SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1"
SIMPLE_SIGNING_MEDIA_TYPE = "application/vnd.dev.cosign.simplesigning.v1+json"
SIMPLE_SIGNING_TYPE = "cosign container image signature"
LEGACY_SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
RSA_MIN_BITS = 2048

_HEX = frozenset("0123456789abcdef")
_ECDSA_HASHES = {"secp256r1": "SHA256", "secp384r1": "SHA384", "secp521r1": "SHA512"}


def bundle_tag(digest: str) -> str:
    """The tag cosign lists a digest's bundle referrers under (``sha256-<hex>``)."""
    return digest.replace(":", "-", 1)


def legacy_tag(digest: str) -> str:
    """The tag of a digest's legacy signature manifest (``sha256-<hex>.sig``)."""
    return bundle_tag(digest) + ".sig"


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str)
        and value.startswith("sha256:")
        and len(value) == 71
        and set(value[7:]) <= _HEX
    )


# -- keys ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicKey:
    """A policy key: where it was read from, its fingerprint, and the key itself."""

    path: str
    fingerprint: str
    """``sha256:<hex>`` of the DER SubjectPublicKeyInfo."""
    key: PublicKeyType = field(repr=False, compare=False)

    @property
    def algorithm(self) -> str:
        from cryptography.hazmat.primitives.asymmetric import ec

        if isinstance(self.key, ec.EllipticCurvePublicKey):
            return f"ecdsa-{self.key.curve.name}"
        return f"rsa-{self.key.key_size}"


def load_public_key(data: bytes, path: str) -> PublicKey:
    """The key of a PEM ``PUBLIC KEY`` file's bytes. Raises ``InvalidSignatureKey`` naming
    ``path`` and what is wrong."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    def refuse(rule: str) -> InvalidSignatureKey:
        return InvalidSignatureKey(field=path, rule=rule)

    if len(data) > KEY_MAX_BYTES:
        raise refuse(f"is larger than {KEY_MAX_BYTES} bytes: no public key is")
    if b"-----BEGIN PUBLIC KEY-----" not in data:
        raise refuse(
            "holds no PEM PUBLIC KEY (the .pub file cosign generate-key-pair writes, not the"
            " private .key)"
        )
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise refuse("is not a PEM public key cryptography can read") from None
    if isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name not in _ECDSA_HASHES:
            raise refuse(f"is an ECDSA key on {key.curve.name}: only P-256, P-384, P-521")
    elif isinstance(key, rsa.RSAPublicKey):
        if key.key_size < RSA_MIN_BITS:
            raise refuse(f"is an RSA key of {key.key_size} bits: at least {RSA_MIN_BITS}")
    elif isinstance(key, ed25519.Ed25519PublicKey):
        raise refuse(
            "is an Ed25519 key: cosign signs with it as Ed25519ph, which is not verified here;"
            " use an ECDSA (cosign generate-key-pair) or RSA key"
        )
    else:
        raise refuse("is neither an ECDSA nor an RSA key")
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return PublicKey(path=path, fingerprint=sha256_digest(der), key=key)


def _verifies(key: PublicKey, signature: bytes, message: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding

    try:
        if isinstance(key.key, ec.EllipticCurvePublicKey):
            algorithm = getattr(hashes, _ECDSA_HASHES[key.key.curve.name])
            key.key.verify(signature, message, ec.ECDSA(algorithm()))
        else:
            key.key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


# -- what a registry answered -------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One signature found for a digest, not yet verified: the bytes signed (``message``), the
    signature, and the payload whose claims are checked once the signature verifies."""

    format: SignatureFormat
    digest: str
    """The digest of what holds the signature: the referrer manifest or the ``.sig``
    manifest (with the layer's digest for a legacy signature: ``<manifest>#<layer>``)."""
    message: bytes = field(repr=False)
    signature: bytes = field(repr=False)
    payload: bytes = field(repr=False)


@dataclass(frozen=True)
class Rejected:
    """Signature material found for a digest that is no signature to verify: a referrer of
    another subject, a malformed manifest, layer or bundle, one missing or too large.
    ``where`` names it (a digest or a tag), ``reason`` says what is wrong with it; a refusal
    lists it, and the lookup goes on."""

    where: str
    reason: str


@dataclass(frozen=True)
class Verified:
    """A signature that verified against a policy key and names an accepted digest."""

    format: SignatureFormat
    digest: str
    key_fingerprint: str
    signed_digest: str
    """The digest its payload names (the pin, or the architecture's manifest of the pin)."""

    def record(self) -> SignedBy:
        """What the plan and the store keep of it."""
        return SignedBy(
            key_fingerprint=self.key_fingerprint,
            format=self.format,
            digest=self.digest,
            signed_digest=self.signed_digest,
        )


def _json_object(data: bytes, what: str, looked_up: str) -> dict[str, Any]:
    if len(data) > SIGNATURE_MAX_BYTES:
        raise SignatureRefused(
            field=looked_up, rule=f"{what} is larger than {SIGNATURE_MAX_BYTES} bytes: refused"
        )
    try:
        value = load_untrusted_json(data)
    except UnreadableJson as error:
        raise SignatureRefused(field=looked_up, rule=f"{what} {error.reason}") from None
    if not isinstance(value, dict):
        raise SignatureRefused(field=looked_up, rule=f"{what} is not a JSON object")
    return value


def _b64(value: object, what: str, looked_up: str) -> bytes:
    if not isinstance(value, str) or not value:
        raise SignatureRefused(field=looked_up, rule=f"{what} is not a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureRefused(field=looked_up, rule=f"{what} is not valid base64") from None


def _check_bytes(data: bytes, digest: str, what: str, looked_up: str) -> None:
    if sha256_digest(data) != digest:
        raise SignatureRefused(
            field=looked_up, rule=f"{what} answered for {digest} holds other bytes: refused"
        )


def referrer_digests(index: bytes, looked_up: str) -> list[str]:
    """The manifests the index tagged ``sha256-<hex>`` lists (cosign's referrers for a
    registry without the referrers API), in order."""
    body = _json_object(index, "the signature index", looked_up)
    manifests = body.get("manifests")
    if not isinstance(manifests, list):
        raise SignatureRefused(field=looked_up, rule="the signature index lists no manifests")
    if len(manifests) > SIGNATURES_MAX:
        raise SignatureRefused(
            field=looked_up, rule=f"the signature index lists more than {SIGNATURES_MAX} entries"
        )
    digests = []
    for entry in manifests:
        if not isinstance(entry, dict) or not _is_digest(entry.get("digest")):
            raise SignatureRefused(
                field=looked_up, rule="the signature index has an entry without a sha256 digest"
            )
        digests.append(str(entry["digest"]))
    return digests


def bundle_layer(manifest: bytes, manifest_digest: str, looked_up: str) -> str | None:
    """The digest of the bundle layer of a referrer manifest (fetched by ``manifest_digest``),
    or None when the manifest is no Sigstore bundle (another kind of referrer). A bundle
    manifest whose ``subject`` is not ``looked_up`` is refused: it was answered for another
    digest."""
    _check_bytes(manifest, manifest_digest, "the referrer manifest", looked_up)
    body = _json_object(manifest, "the referrer manifest", looked_up)
    if body.get("artifactType") != BUNDLE_MEDIA_TYPE:
        return None
    subject = body.get("subject")
    if not isinstance(subject, dict) or subject.get("digest") != looked_up:
        raise SignatureRefused(
            field=looked_up,
            rule=f"the signature manifest {manifest_digest} is the signature of another digest"
            " (its subject is not this one): refused",
        )
    layers = body.get("layers")
    if (
        not isinstance(layers, list)
        or len(layers) != 1
        or not isinstance(layers[0], dict)
        or layers[0].get("mediaType") != BUNDLE_MEDIA_TYPE
        or not _is_digest(layers[0].get("digest"))
    ):
        raise SignatureRefused(
            field=looked_up,
            rule=f"the signature manifest {manifest_digest} holds no single bundle layer",
        )
    return str(layers[0]["digest"])


def dsse_pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what a DSSE signature is over."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def bundle_candidate(
    bundle: bytes, layer_digest: str, manifest_digest: str, looked_up: str
) -> Candidate:
    """The signature a Sigstore bundle v0.3 layer holds (its bytes checked against the layer's
    digest). Only a DSSE envelope of an in-toto payload is read."""
    _check_bytes(bundle, layer_digest, "the bundle", looked_up)
    body = _json_object(bundle, "the bundle", looked_up)
    if body.get("mediaType") != BUNDLE_MEDIA_TYPE:
        raise SignatureRefused(field=looked_up, rule="the bundle is not a Sigstore bundle v0.3")
    envelope = body.get("dsseEnvelope")
    if not isinstance(envelope, dict):
        raise SignatureRefused(
            field=looked_up, rule="the bundle holds no DSSE envelope (the form cosign signs in)"
        )
    payload_type = envelope.get("payloadType")
    if payload_type != DSSE_PAYLOAD_TYPE:
        raise SignatureRefused(
            field=looked_up, rule=f"the bundle's payload is not of type {DSSE_PAYLOAD_TYPE}"
        )
    payload = _b64(envelope.get("payload"), "the bundle's payload", looked_up)
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or len(signatures) != 1:
        raise SignatureRefused(field=looked_up, rule="the bundle does not hold one signature")
    entry = signatures[0]
    sig = _b64(entry.get("sig") if isinstance(entry, dict) else None, "the signature", looked_up)
    return Candidate(
        format=BUNDLE,
        digest=manifest_digest,
        message=dsse_pae(DSSE_PAYLOAD_TYPE, payload),
        signature=sig,
        payload=payload,
    )


@dataclass(frozen=True)
class LegacyLayer:
    """One layer of a ``.sig`` manifest: the payload's digest and its signature."""

    digest: str
    signature: bytes = field(repr=False)


def legacy_layers(manifest: bytes, looked_up: str) -> list[LegacyLayer | Rejected]:
    """The simple-signing layers of the manifest tagged ``sha256-<hex>.sig``; a malformed one is
    a ``Rejected`` in its place (the others are still read). A manifest that is no ``.sig``
    manifest at all is refused (``SignatureRefused``)."""
    body = _json_object(manifest, "the .sig manifest", looked_up)
    layers = body.get("layers")
    if not isinstance(layers, list):
        raise SignatureRefused(field=looked_up, rule="the .sig manifest has no layers")
    if len(layers) > SIGNATURES_MAX:
        raise SignatureRefused(
            field=looked_up, rule=f"the .sig manifest has more than {SIGNATURES_MAX} layers"
        )
    found: list[LegacyLayer | Rejected] = []
    for position, layer in enumerate(layers):
        if not isinstance(layer, dict) or layer.get("mediaType") != SIMPLE_SIGNING_MEDIA_TYPE:
            continue
        where = f"the .sig manifest's layer {position}"
        if not _is_digest(layer.get("digest")):
            found.append(Rejected(where, "a .sig layer has no sha256 digest"))
            continue
        annotations = layer.get("annotations")
        value = (
            annotations.get(LEGACY_SIGNATURE_ANNOTATION) if isinstance(annotations, dict) else None
        )
        try:
            signature = _b64(value, f"the {LEGACY_SIGNATURE_ANNOTATION} annotation", looked_up)
        except SignatureRefused as error:
            found.append(Rejected(where, error.rule))
            continue
        found.append(LegacyLayer(digest=str(layer["digest"]), signature=signature))
    return found


def legacy_candidate(
    layer: LegacyLayer, payload: bytes, manifest_digest: str, looked_up: str
) -> Candidate:
    """The signature of one ``.sig`` layer over its payload (checked against its digest)."""
    _check_bytes(payload, layer.digest, "the signed payload", looked_up)
    return Candidate(
        format=LEGACY,
        digest=f"{manifest_digest}#{layer.digest}",
        message=payload,
        signature=layer.signature,
        payload=payload,
    )


# -- what a payload says ------------------------------------------------------------------------


def _signed_digest(candidate: Candidate, looked_up: str) -> str:
    """The digest the payload of a verified signature names, or ``SignatureRefused``."""
    body = _json_object(candidate.payload, "the signed payload", looked_up)
    if candidate.format == LEGACY:
        critical = body.get("critical")
        if not isinstance(critical, dict) or critical.get("type") != SIMPLE_SIGNING_TYPE:
            raise SignatureRefused(
                field=looked_up,
                rule=f"the signed payload is not a {SIMPLE_SIGNING_TYPE!r}",
            )
        image = critical.get("image")
        named = image.get("docker-manifest-digest") if isinstance(image, dict) else None
        if not _is_digest(named):
            raise SignatureRefused(field=looked_up, rule="the signed payload names no digest")
        return str(named)
    if body.get("_type") not in INTOTO_STATEMENT_TYPES:
        raise SignatureRefused(field=looked_up, rule="the signed payload is no in-toto statement")
    if body.get("predicateType") != COSIGN_SIGN_PREDICATE:
        raise SignatureRefused(
            field=looked_up,
            rule=f"the signed statement's predicate is not {COSIGN_SIGN_PREDICATE}"
            " (an attestation is not a signature)",
        )
    subjects = body.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        raise SignatureRefused(field=looked_up, rule="the signed statement has not one subject")
    digests = subjects[0].get("digest")
    value = digests.get("sha256") if isinstance(digests, dict) else None
    named = f"sha256:{value}" if isinstance(value, str) else None
    if not _is_digest(named):
        raise SignatureRefused(field=looked_up, rule="the signed statement names no sha256")
    return str(named)


def verify(
    found: Iterable[Candidate | Rejected],
    keys: Iterable[PublicKey],
    accepted: Iterable[str],
    looked_up: str,
) -> Verified:
    """The first candidate of ``found`` whose signature verifies against one of ``keys`` and
    whose payload names one of the ``accepted`` digests; ``found`` is read no further than that
    (a lookup that asks the registry as it is read asks nothing more). Every other candidate
    and every ``Rejected`` is passed over. None: a ``SignatureRefused`` of ``looked_up`` saying
    what was missing: no signature (``Unsigned``), none by a policy key (``SignedByOtherKey``),
    a verified one whose payload names another digest (``ReplayedSignature``) or is of another
    kind, or what was wrong with each piece found (``SignatureRefused`` itself); of several,
    the class that says most (``stronger``)."""
    keys = list(keys)
    accepted = frozenset(accepted)
    reasons: list[str] = []
    refusal: type[SignatureRefused] = Unsigned
    for candidate in found:
        if isinstance(candidate, Rejected):
            reasons.append(f"{candidate.where}: {candidate.reason}")
            refusal = stronger(refusal, SignatureRefused)
            continue
        key = next((k for k in keys if _verifies(k, candidate.signature, candidate.message)), None)
        if key is None:
            reasons.append(f"{candidate.format} {candidate.digest}: not signed by a policy key")
            refusal = stronger(refusal, SignedByOtherKey)
            continue
        try:
            named = _signed_digest(candidate, looked_up)
        except SignatureRefused as error:
            reasons.append(f"{candidate.format} {candidate.digest}: {error.rule}")
            refusal = stronger(refusal, type(error))
            continue
        if named not in accepted:
            reasons.append(
                f"{candidate.format} {candidate.digest}: signed by a policy key for another"
                f" digest, {named} (a replayed signature)"
            )
            refusal = ReplayedSignature
            continue
        return Verified(
            format=candidate.format,
            digest=candidate.digest,
            key_fingerprint=key.fingerprint,
            signed_digest=named,
        )
    if not reasons:
        raise Unsigned(field=looked_up, rule="is not signed (no cosign signature found)")
    if len(reasons) > REASONS_SHOWN:  # the last one kept: where the lookup stopped, if it did
        more = len(reasons) - REASONS_SHOWN
        reasons = [*reasons[: REASONS_SHOWN - 1], f"({more} more)", reasons[-1]]
    raise refusal(
        field=looked_up,
        rule="has no signature by a policy key over this digest: " + "; ".join(reasons),
    )


def stronger(one: type[SignatureRefused], other: type[SignatureRefused]) -> type[SignatureRefused]:
    """Of two refusals of one pin, the one that says most (``SignatureRefused.strength``)."""
    return other if other.strength > one.strength else one

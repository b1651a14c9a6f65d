"""Check the pin's origin against the site policy before anything is staged (docs/design.md,
"Image policy and signatures").

``CheckSignature`` reads the policy's key files (``Signatures.read_key_file``, refused unless
others cannot change them), asks the registry for the pin's cosign signatures
(``Signatures.signatures_of``) and accepts the import as soon as one verifies against a policy
key and its payload names the pin: signature material that is none (a referrer of another
subject, a malformed piece) is passed over, never a reason to stop looking. For an index pin
with an architecture asked for, a signature of the manifest that the index (fetched by the
pin's digest and checked against it) names for that architecture is accepted too. Every
request of the check together takes at most ``timeout_s`` (``RegistryBudget``); each digest's
lookup makes at most ``SIGNATURE_REQUESTS_MAX`` requests. Keyless signatures are not
verified.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from slurm_image.application.credentials import read_registry_credentials
from slurm_image.application.registry_budget import RegistryBudget
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.errors import SignatureRefused
from slurm_image.domain.manifest import ACCEPT, MANIFEST_MAX_BYTES, read_manifest
from slurm_image.domain.profile import SiteProfile
from slurm_image.domain.reference import OciReference, parse_reference
from slurm_image.domain.request import Request
from slurm_image.domain.signatures import (
    KEY_MAX_BYTES,
    SIGNATURE_MAX_BYTES,
    Candidate,
    PublicKey,
    Rejected,
    load_public_key,
    stronger,
    verify,
)
from slurm_image.domain.signed_by import SignedBy
from slurm_image.ports.clock import Clock
from slurm_image.ports.credentials import CredentialsFile
from slurm_image.ports.registry import ManifestRequest, Registry
from slurm_image.ports.signatures import SignatureRequest, Signatures

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
"""How long the whole check may ask the registry (every lookup and request together)."""


def policy_keys(profile: SiteProfile, signatures: Signatures) -> list[PublicKey]:
    """The policy's keys, each read under the key-file rules and parsed. Raises
    ``KeyFileError`` or ``InvalidSignatureKey`` naming the first bad file."""
    policy = profile.policy
    keys = policy.keys if policy is not None else ()
    return [
        load_public_key(signatures.read_key_file(path, max_bytes=KEY_MAX_BYTES), path)
        for path in keys
    ]


class CheckSignature:
    """Raises ``SignatureRefused`` (field: the pinned digest) when no signature is accepted,
    the key files' errors, the credentials file's, and the ``Registry`` port's."""

    def __init__(
        self,
        signatures: Signatures,
        registry: Registry,
        clock: Clock,
        credentials: CredentialsFile | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._signatures = signatures
        self._registry = registry
        self._clock = clock
        self._credentials = credentials
        self._timeout_s = timeout_s

    def satisfies(self, signed_by: SignedBy | None, profile: SiteProfile) -> bool:
        """Whether a stored record's signature satisfies the profile's policy now: always when
        no signature is required, else only a signature by a key still in ``policy.keys``
        (read and checked now: the key files' errors are raised)."""
        policy = profile.policy
        if policy is None or not policy.require_signature:
            return True
        if signed_by is None:
            return False
        fingerprints = {key.fingerprint for key in policy_keys(profile, self._signatures)}
        return signed_by.key_fingerprint in fingerprints

    def __call__(self, request: Request, profile: SiteProfile) -> SignedBy | None:
        """The signature the policy accepts for an import's pin; None when the profile requires
        none (or the request is an inspect, which never reaches a registry)."""
        policy = profile.policy
        if request.operation != "import_oci" or policy is None or not policy.require_signature:
            return None
        keys = policy_keys(profile, self._signatures)
        reference = parse_reference(request.source)
        credentials = read_registry_credentials(
            profile, self._credentials, reference.enroot_registry
        )
        pin = reference.digest
        budget = RegistryBudget(self._clock, self._timeout_s)
        try:
            found = self._find(reference, pin, profile, credentials, budget)
            verified = verify(found, keys, [pin], pin)
        except SignatureRefused as refused:
            architecture = request.architecture or profile.image_build.arch
            child = self._child(reference, architecture, profile, credentials, budget)
            if child is None:
                raise
            try:
                found = self._find(reference, child, profile, credentials, budget)
                verified = verify(found, keys, [child], child)
            except SignatureRefused as second:
                raise stronger(type(refused), type(second))(
                    field=pin,
                    rule=f"{refused.rule}; nor its {architecture} manifest {child}: {second.rule}",
                ) from None
        log.info(
            "%s: signed (%s) by the policy key %s", pin, verified.format, verified.key_fingerprint
        )
        return verified.record()

    def _find(
        self,
        reference: OciReference,
        digest: str,
        profile: SiteProfile,
        credentials: RegistryCredentials | None,
        budget: RegistryBudget,
    ) -> Iterator[Candidate | Rejected]:
        registry = reference.enroot_registry
        return self._signatures.signatures_of(
            SignatureRequest(
                registry=registry,
                repository=reference.enroot_repository,
                digest=digest,
                max_bytes=SIGNATURE_MAX_BYTES,
                timeout_s=budget.left(registry, f"the signature lookup of {digest}"),
                allow_http=profile.enroot.allows_http,
                credentials=credentials,
            )
        )

    def _child(
        self,
        reference: OciReference,
        architecture: str | None,
        profile: SiteProfile,
        credentials: RegistryCredentials | None,
        budget: RegistryBudget,
    ) -> str | None:
        """The manifest the pinned index names for ``architecture`` (its bytes checked
        against the pin), or None for a manifest pin or no architecture asked for."""
        if architecture is None:
            return None
        answer = self._registry.fetch_manifest(
            ManifestRequest(
                registry=reference.enroot_registry,
                repository=reference.enroot_repository,
                reference=reference.digest,
                accept=ACCEPT,
                max_bytes=MANIFEST_MAX_BYTES,
                timeout_s=budget.left(reference.enroot_registry, f"the index {reference.digest}"),
                allow_http=profile.enroot.allows_http,
                credentials=credentials,
            )
        )
        manifest = read_manifest(
            answer.data,
            content_type=answer.content_type,
            content_digest=answer.content_digest,
            field=str(reference),
        )
        if manifest.digest != reference.digest or not manifest.is_index:
            return None
        return manifest.manifest_for(architecture)

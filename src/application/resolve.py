"""Resolve a tag to the pin the product proves (docs/design.md, "Resolving a tag").

``ResolveTag`` asks the registry for ``registry/repo:TAG`` with the media types an import reads,
hashes the bytes it got, and answers ``registry/repo:TAG@sha256:<digest of those bytes>``, the
reference ``import`` takes, exactly as a user would type it. A ``Docker-Content-Digest`` that
disagrees with the bytes, an answer over 4 MiB, or one that is no manifest or index is refused
(``domain.manifest``). For an index it also names the manifest an import for an architecture
gets. The credentials are the profile's: the one netrc entry of the registry's host in
``enroot.credentials_file`` (``application.credentials``); a plain-HTTP registry is asked only
when the profile's ``ENROOT_ALLOW_HTTP`` lets the job's Enroot ask it too. Nothing is created.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from slurm_image.application.credentials import (
    check_given_credentials,
    read_registry_credentials,
)
from slurm_image.domain.architecture import check_architecture
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.manifest import ACCEPT, MANIFEST_MAX_BYTES, RegistryManifest, read_manifest
from slurm_image.domain.profile import SiteProfile
from slurm_image.domain.reference import TagReference, parse_tag_reference
from slurm_image.domain.resolution import ResolvedFrom, utc_time_text
from slurm_image.ports.clock import Clock
from slurm_image.ports.credentials import CredentialsFile
from slurm_image.ports.registry import ManifestRequest, Registry, RegistryAuthFailed

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
"""How long one resolution may take, every try and retry included."""


@dataclass(frozen=True)
class Resolution:
    """A tag as the registry answered it at ``resolved_at``: ``manifest`` what it answered
    (digest, media type, an index's entries); ``architecture`` the one asked for, with
    ``arch_manifest`` the digest of its manifest."""

    reference: TagReference
    manifest: RegistryManifest
    resolved_at: str
    architecture: str | None = None
    arch_manifest: str | None = None

    @property
    def digest(self) -> str:
        return self.manifest.digest

    @property
    def pinned(self) -> str:
        """``registry/repo:TAG@sha256:<hex>``, as the tag was written: what ``import`` takes."""
        return str(self.reference.pinned(self.manifest.digest))

    @property
    def resolved_from(self) -> ResolvedFrom:
        """What the plan and the published entry record of this resolution."""
        return ResolvedFrom(
            tag=str(self.reference), digest=self.manifest.digest, resolved_at=self.resolved_at
        )

    def manifest_for(self, architecture: str) -> str:
        """The manifest an import of the pin for ``architecture`` gets
        (``RegistryManifest.manifest_for``)."""
        return self.manifest.manifest_for(architecture)

    def as_dict(self) -> dict[str, object]:
        """The keys ``resolve --json`` prints (docs/cli.md, "resolve")."""
        return {
            "reference": str(self.reference),
            "pinned": self.pinned,
            "digest": self.manifest.digest,
            "media_type": self.manifest.media_type,
            "size": self.manifest.size,
            "index": self.manifest.is_index,
            "registry": self.reference.enroot_registry,
            "repository": self.reference.enroot_repository,
            "resolved_at": self.resolved_at,
            "manifests": [entry.as_dict() for entry in self.manifest.entries],
            "architecture": self.architecture,
            "manifest": self.arch_manifest,
        }


class ResolveTag:
    """Resolve one tag through the ``Registry`` port (see the module docstring).

    Raises ``InvalidReference`` (not a reference by tag), ``InvalidRequest`` (an unknown
    architecture), ``NoImageForArchitecture`` (an index without that architecture),
    ``InvalidRegistryAnswer`` (the answer is refused), the credentials file's errors, and the
    ``Registry`` port's.
    """

    def __init__(
        self, registry: Registry, clock: Clock, credentials: CredentialsFile | None = None
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._credentials = credentials

    def __call__(
        self,
        text: str,
        profile: SiteProfile,
        *,
        arch: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        credentials: RegistryCredentials | None = None,
    ) -> Resolution:
        """``credentials``: the requester's own entry for the registry (through the gateway),
        else the profile's file's."""
        reference = parse_tag_reference(text)
        if arch is not None:
            check_architecture(arch)
        registry = reference.enroot_registry
        if credentials is not None:
            check_given_credentials(registry, credentials)
        else:
            credentials = read_registry_credentials(profile, self._credentials, registry)
        request = ManifestRequest(
            registry=registry,
            repository=reference.enroot_repository,
            reference=reference.tag,
            accept=ACCEPT,
            max_bytes=MANIFEST_MAX_BYTES,
            timeout_s=timeout_s,
            allow_http=profile.enroot.allows_http,
            credentials=credentials,
        )
        try:
            answer = self._registry.fetch_manifest(request)
        except RegistryAuthFailed as error:
            error.add_note(_credentials_hint(profile, registry, credentials))
            raise
        resolved_at = utc_time_text(self._clock.now())
        manifest = read_manifest(
            answer.data,
            content_type=answer.content_type,
            content_digest=answer.content_digest,
            field=str(reference),
        )
        arch_manifest = manifest.manifest_for(arch) if arch is not None else None
        log.info(
            "%s is %s (%s%s)",
            reference,
            manifest.digest,
            manifest.media_type,
            f"; {arch}: {arch_manifest}" if arch_manifest else "",
        )
        return Resolution(reference, manifest, resolved_at, arch, arch_manifest)


def _credentials_hint(
    profile: SiteProfile, registry: str, credentials: RegistryCredentials | None
) -> str:
    path = profile.enroot.credentials_file
    if path is None:
        return (
            "the profile names no [enroot] credentials_file: put `machine HOST login LOGIN"
            " password PASSWORD` for the registry in a netrc file of yours (chmod 600) and name"
            " it there (README, Private registries)"
        )
    if credentials is None:
        return (
            f"{path} has no entry for {registry}: add `machine {registry} login ... password ...`"
        )
    return f"that entry is in {path}"

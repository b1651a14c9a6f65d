"""The Signatures port over the Registry port (``ports.signatures``): cosign's tags and
blobs asked through the same adapter, authentication and bounds as ``resolve``, and key files
read from the local filesystem."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRegistryAnswer, SignatureRefused
from slurm_image.domain.manifest import DOCKER_V2S2, OCI_INDEX, OCI_MANIFEST, check_content_digest
from slurm_image.domain.signatures import (
    Candidate,
    bundle_candidate,
    bundle_layer,
    bundle_tag,
    legacy_candidate,
    legacy_layers,
    legacy_tag,
    referrer_digests,
)
from slurm_image.ports.registry import ManifestRequest, Registry, RegistryNotFound
from slurm_image.ports.signatures import KeyFileError, SignatureRequest


class RegistrySignatures:
    """Finds signatures through ``registry`` (an ``HttpRegistry`` in the product)."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def signatures_of(self, request: SignatureRequest) -> tuple[Candidate, ...]:
        return (*self._bundles(request), *self._legacy(request))

    def _get(
        self, request: SignatureRequest, reference: str, accept: str, kind: str = "manifests"
    ) -> bytes | None:
        ask = ManifestRequest(
            registry=request.registry,
            repository=request.repository,
            reference=reference,
            accept=accept,
            max_bytes=request.max_bytes,
            timeout_s=request.timeout_s,
            allow_http=request.allow_http,
            credentials=request.credentials,
            kind="blobs" if kind == "blobs" else "manifests",
        )
        try:
            answer = self._registry.fetch_manifest(ask)
        except RegistryNotFound:
            return None
        try:
            check_content_digest(answer.data, answer.content_digest, field=request.digest)
        except InvalidRegistryAnswer as error:
            raise SignatureRefused(field=request.digest, rule=error.rule) from None
        return answer.data

    def _bundles(self, request: SignatureRequest) -> list[Candidate]:
        digest = request.digest
        index = self._get(request, bundle_tag(digest), OCI_INDEX)
        if index is None:
            return []
        found = []
        for manifest_digest in referrer_digests(index, digest):
            manifest = self._get(request, manifest_digest, OCI_MANIFEST)
            if manifest is None:
                continue
            layer = bundle_layer(manifest, manifest_digest, digest)
            if layer is None:
                continue
            bundle = self._get(request, layer, "*/*", kind="blobs")
            if bundle is None:
                raise SignatureRefused(
                    field=digest, rule=f"the bundle {layer} its signature manifest lists is missing"
                )
            found.append(bundle_candidate(bundle, layer, manifest_digest, digest))
        return found

    def _legacy(self, request: SignatureRequest) -> list[Candidate]:
        digest = request.digest
        manifest = self._get(request, legacy_tag(digest), f"{OCI_MANIFEST}, {DOCKER_V2S2}")
        if manifest is None:
            return []
        manifest_digest = check_content_digest(manifest, None, field=digest)
        found = []
        for layer in legacy_layers(manifest, digest):
            payload = self._get(request, layer.digest, "*/*", kind="blobs")
            if payload is None:
                raise SignatureRefused(
                    field=digest, rule=f"the signed payload {layer.digest} is missing"
                )
            found.append(legacy_candidate(layer, payload, manifest_digest, digest))
        return found

    def read_key_file(self, path: str, *, max_bytes: int) -> bytes:
        return read_key_file(path, max_bytes=max_bytes, uid=os.geteuid())


def read_key_file(path: str, *, max_bytes: int, uid: int) -> bytes:
    """A key file read as ``ports.signatures`` says: its directories and the file held to the
    rules of a file others cannot change, through one descriptor that follows no symlink."""
    for directory in paths.ancestors(str(Path(path).parent)):
        try:
            info = os.lstat(directory)
        except FileNotFoundError:
            raise KeyFileError(
                field=path, rule=f"no such file (no directory {directory})"
            ) from None
        except OSError as error:
            raise KeyFileError(
                field=path, rule=f"cannot read {directory}: {error.strerror}"
            ) from None
        if not stat.S_ISDIR(info.st_mode):
            raise KeyFileError(field=path, rule=f"{directory} is not a directory")
        problem = paths.shared_directory_problem(info.st_mode, info.st_uid, uid)
        if problem is not None:
            raise KeyFileError(
                field=path,
                rule=f"its directory {directory} {problem}: others could replace the key",
            )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise KeyFileError(field=path, rule="no such file") from None
    except OSError as error:
        rule = "is a symlink, not a file" if Path(path).is_symlink() else error.strerror
        raise KeyFileError(field=path, rule=f"cannot be read: {rule}") from None
    try:
        info = os.fstat(fd)
        problem = paths.unchangeable_file_problem(info.st_mode, info.st_uid, uid)
        if problem is not None:
            raise KeyFileError(field=path, rule=f"{problem}: others could replace the key")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise KeyFileError(field=path, rule=f"cannot be read: {error.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise KeyFileError(field=path, rule=f"is larger than {max_bytes} bytes")
    return data

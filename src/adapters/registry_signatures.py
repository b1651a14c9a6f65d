"""The Signatures port over the Registry port (``ports.signatures``): cosign's tags and
blobs asked through the same adapter, authentication and bounds as ``resolve``, one digest's
lookup bounded in requests and time, and key files read from the local filesystem."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRegistryAnswer, SignatureRefused
from slurm_image.domain.manifest import DOCKER_V2S2, OCI_INDEX, OCI_MANIFEST, check_content_digest
from slurm_image.domain.signatures import (
    SIGNATURE_REQUESTS_MAX,
    Candidate,
    LegacyLayer,
    Rejected,
    bundle_candidate,
    bundle_layer,
    bundle_tag,
    legacy_candidate,
    legacy_layers,
    legacy_tag,
    referrer_digests,
)
from slurm_image.ports.registry import (
    AnswerRefused,
    ManifestRequest,
    Registry,
    RegistryNotFound,
    RegistryUnavailable,
)
from slurm_image.ports.signatures import KeyFileError, SignatureRequest


class _Unread(Exception):
    """A piece of signature material that was not read (``reason``); never leaves this
    module: it becomes a ``Rejected``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class _Exhausted(Exception):
    """The lookup made its ``SIGNATURE_REQUESTS_MAX`` requests."""


def _reason(error: _Unread | SignatureRefused) -> str:
    return error.reason if isinstance(error, _Unread) else error.rule


class RegistrySignatures:
    """Finds signatures through ``registry`` (an ``HttpRegistry`` in the product); a lookup's
    time is read from ``monotonic`` (the registry's own clock for the memory one)."""

    def __init__(self, registry: Registry, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._registry = registry
        self._monotonic = monotonic

    def signatures_of(self, request: SignatureRequest) -> Iterator[Candidate | Rejected]:
        lookup = _Lookup(self._registry, request, self._monotonic)
        try:
            yield from lookup.bundles()
            yield from lookup.legacy()
        except _Exhausted:
            yield Rejected(
                request.digest,
                f"looked no further after {SIGNATURE_REQUESTS_MAX} requests, the most one"
                " digest's lookup makes",
            )

    def read_key_file(self, path: str, *, max_bytes: int) -> bytes:
        return read_key_file(path, max_bytes=max_bytes, uid=os.geteuid())


class _Lookup:
    """One digest's lookup: its requests, counted, and its deadline (``ports.signatures``)."""

    def __init__(
        self, registry: Registry, request: SignatureRequest, monotonic: Callable[[], float]
    ) -> None:
        self.registry = registry
        self.request = request
        self.monotonic = monotonic
        self.deadline = monotonic() + request.timeout_s
        self.requests = 0

    def fetch(self, reference: str, accept: str, kind: str = "manifests") -> bytes | None:
        """The bytes answered for ``reference`` (a ``Docker-Content-Digest`` checked against
        them), None when the registry has no such thing. Raises ``_Unread`` for an answer the
        product will not read, ``_Exhausted`` past the request bound, and the registry's own
        errors (``RegistryUnavailable`` past the lookup's deadline)."""
        request = self.request
        if self.requests >= SIGNATURE_REQUESTS_MAX:
            raise _Exhausted
        left = self.deadline - self.monotonic()
        if left <= 0:
            raise RegistryUnavailable(
                field=request.registry,
                rule=f"did not answer the signature lookup of {request.digest} in time"
                f" (within {request.timeout_s:.3g} s, every request included)",
            )
        self.requests += 1
        ask = ManifestRequest(
            registry=request.registry,
            repository=request.repository,
            reference=reference,
            accept=accept,
            max_bytes=request.max_bytes,
            timeout_s=left,
            allow_http=request.allow_http,
            credentials=request.credentials,
            kind="blobs" if kind == "blobs" else "manifests",
        )
        try:
            answer = self.registry.fetch_manifest(ask)
        except RegistryNotFound:
            return None
        except AnswerRefused as error:
            raise _Unread(error.rule) from None
        try:
            check_content_digest(answer.data, answer.content_digest, field=request.digest)
        except InvalidRegistryAnswer as error:
            raise _Unread(error.rule) from None
        return answer.data

    def bundles(self) -> Iterator[Candidate | Rejected]:
        digest = self.request.digest
        tag = bundle_tag(digest)
        try:
            index = self.fetch(tag, OCI_INDEX)
            referrers = [] if index is None else referrer_digests(index, digest)
        except (_Unread, SignatureRefused) as error:
            yield Rejected(tag, _reason(error))
            return
        for manifest_digest in referrers:
            found = self._referrer(manifest_digest)
            if found is not None:
                yield found

    def _referrer(self, manifest_digest: str) -> Candidate | Rejected | None:
        """The signature a referrer manifest holds; None for a referrer of another kind."""
        digest = self.request.digest
        try:
            manifest = self.fetch(manifest_digest, OCI_MANIFEST)
            if manifest is None:
                raise _Unread("the signature index lists it, but the registry has no such manifest")
            layer = bundle_layer(manifest, manifest_digest, digest)
            if layer is None:
                return None
            bundle = self.fetch(layer, "*/*", kind="blobs")
            if bundle is None:
                raise _Unread(f"the bundle {layer} its signature manifest lists is missing")
            return bundle_candidate(bundle, layer, manifest_digest, digest)
        except (_Unread, SignatureRefused) as error:
            return Rejected(manifest_digest, _reason(error))

    def legacy(self) -> Iterator[Candidate | Rejected]:
        digest = self.request.digest
        tag = legacy_tag(digest)
        try:
            manifest = self.fetch(tag, f"{OCI_MANIFEST}, {DOCKER_V2S2}")
            if manifest is None:
                return
            layers = legacy_layers(manifest, digest)
        except (_Unread, SignatureRefused) as error:
            yield Rejected(tag, _reason(error))
            return
        manifest_digest = check_content_digest(manifest, None, field=digest)
        for layer in layers:
            yield layer if isinstance(layer, Rejected) else self._payload(layer, manifest_digest)

    def _payload(self, layer: LegacyLayer, manifest_digest: str) -> Candidate | Rejected:
        digest = self.request.digest
        try:
            payload = self.fetch(layer.digest, "*/*", kind="blobs")
            if payload is None:
                raise _Unread(f"the signed payload {layer.digest} is missing")
            return legacy_candidate(layer, payload, manifest_digest, digest)
        except (_Unread, SignatureRefused) as error:
            return Rejected(f"{manifest_digest}#{layer.digest}", _reason(error))


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

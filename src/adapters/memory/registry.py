"""``MemoryRegistry``: a ``Registry`` over registries held in memory, each anonymous, Basic or
Bearer, over TLS or plain HTTP, keeping the port's rules (``ports.registry``): credentials only
over TLS and only to the registry or its token realm, tokens kept for their lifetime, bounded
answers, a registry's text quoted through ``domain.registry_text``. It records every login it was
sent and where, and every token its realms issued, so tests can ask."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from slurm_image.adapters.memory.clock import FakeClock
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.registry_text import registry_text
from slurm_image.ports.registry import (
    AnswerTooLarge,
    ManifestAnswer,
    ManifestRequest,
    RegistryAuthFailed,
    RegistryNotFound,
    RegistryUnavailable,
)

Auth = Literal["anonymous", "basic", "bearer"]


@dataclass
class MemoryManifest:
    data: bytes
    media_type: str
    content_digest: str | None = None
    """The ``Docker-Content-Digest`` sent; None: the true one."""


@dataclass
class MemoryRegistryHost:
    """One registry: ``tls`` (else plain HTTP), how it authenticates, its accounts (login ->
    password), the repositories a Bearer realm gives anonymous tokens for, the lifetime of its
    tokens, and its manifests by (repository, reference)."""

    tls: bool = True
    auth: Auth = "anonymous"
    accounts: dict[str, str] = field(default_factory=dict)
    public: set[str] = field(default_factory=set)
    token_lifetime_s: int = 300
    realm: str = ""
    manifests: dict[tuple[str, str], MemoryManifest] = field(default_factory=dict)
    blobs: dict[tuple[str, str], bytes] = field(default_factory=dict)
    answer_s: float = 0.0
    """How long each of its answers takes, on the registry's clock: one longer than a request's
    ``timeout_s`` is ``RegistryUnavailable`` at that deadline, as the HTTP adapter ends it."""
    denial: str | None = None
    """When set, every request that passes authentication is answered 403 with this error
    message, ``{authorization}`` in it replaced by the ``Authorization`` the registry received
    (as a registry that echoes it does)."""


@dataclass
class Sent:
    """A login a registry (or its realm) received: ``where`` is the host or realm."""

    where: str
    login: str


@dataclass
class MemoryRegistry:
    """Registries by host[:port]; ``clock`` is the fake time tokens expire by and answers take
    (``advance``): a use case given the same clock sees that time pass."""

    hosts: dict[str, MemoryRegistryHost] = field(default_factory=dict)
    clock: FakeClock = field(default_factory=FakeClock)
    sent: list[Sent] = field(default_factory=list)
    token_requests: int = 0
    issued: list[str] = field(default_factory=list)
    """Every token a realm issued, in order."""
    _tokens: dict[tuple[str, str, str | None], tuple[str, float]] = field(default_factory=dict)

    def host(
        self,
        registry: str,
        *,
        tls: bool = True,
        auth: Auth = "anonymous",
        accounts: dict[str, str] | None = None,
        public: set[str] | None = None,
        token_lifetime_s: int = 300,
        realm: str = "",
    ) -> MemoryRegistryHost:
        """The registry ``registry``, created with these settings when new."""
        if registry not in self.hosts:
            self.hosts[registry] = MemoryRegistryHost(
                tls=tls,
                auth=auth,
                accounts=dict(accounts or {}),
                public=set(public or ()),
                token_lifetime_s=token_lifetime_s,
                realm=realm or f"auth.{registry}",
            )
        return self.hosts[registry]

    def put(
        self,
        registry: str,
        repository: str,
        reference: str,
        data: bytes,
        media_type: str,
        content_digest: str | None = None,
    ) -> str:
        """Serve ``data`` for ``reference`` (a tag) and by its digest; returns the digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        host = self.host(registry)
        manifest = MemoryManifest(data, media_type, content_digest)
        host.manifests[(repository, reference)] = manifest
        host.manifests[(repository, digest)] = MemoryManifest(data, media_type)
        return digest

    def put_blob(self, registry: str, repository: str, data: bytes) -> str:
        """Serve ``data`` as a blob by its digest; returns the digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.host(registry).blobs[(repository, digest)] = data
        return digest

    @property
    def now(self) -> float:
        return self.clock.now().timestamp()

    def advance(self, seconds: float) -> None:
        self.clock.advance(timedelta(seconds=seconds))

    def fetch_manifest(self, request: ManifestRequest) -> ManifestAnswer:
        registry = request.registry
        host = self.hosts.get(registry)
        if host is None:
            raise RegistryUnavailable(field=registry, rule=f"cannot connect to {registry}")
        if host.answer_s > request.timeout_s:
            self.advance(request.timeout_s)
            raise RegistryUnavailable(
                field=registry,
                rule=f"{registry} did not answer in time (within {request.timeout_s:.3g} s,"
                " retries included)",
            )
        self.advance(host.answer_s)
        if not host.tls and not request.allow_http:
            raise RegistryUnavailable(
                field=registry,
                rule="does not speak TLS on its port; a plain-HTTP registry is asked only"
                " when [enroot] environment sets ENROOT_ALLOW_HTTP, as for the import job",
            )
        authorization = self._authenticate(host, request)
        if host.denial is not None:
            raise self._denied(host.denial, authorization, request)
        if request.kind == "blobs":
            blob = host.blobs.get((request.repository, request.reference))
            found = None if blob is None else MemoryManifest(blob, "application/octet-stream")
            manifest = found
        else:
            manifest = host.manifests.get((request.repository, request.reference))
        if manifest is None:
            raise RegistryNotFound(
                field=registry,
                rule=f"has no {request.repository}:{request.reference} (answered 404)",
            )
        if len(manifest.data) > request.max_bytes:
            raise AnswerTooLarge(
                field=registry,
                rule=f"sent more than {request.max_bytes} bytes for"
                f" {request.repository}:{request.reference}: refused",
            )
        digest = manifest.content_digest
        if digest is None:
            digest = "sha256:" + hashlib.sha256(manifest.data).hexdigest()
        return ManifestAnswer(manifest.data, manifest.media_type, digest)

    @staticmethod
    def _denied(message: str, authorization: str, request: ManifestRequest) -> RegistryAuthFailed:
        credentials = request.credentials
        secrets = [*(credentials.secrets() if credentials else ()), authorization.split(" ")[-1]]
        text = registry_text(
            "DENIED: " + message.replace("{authorization}", authorization), secrets
        )
        entry = (
            f" (with the netrc entry '{credentials.describe()}')"
            if credentials
            else " (no credentials were sent)"
        )
        return RegistryAuthFailed(
            field=request.registry,
            rule=f"denies access to {request.repository}:{request.reference} (403 {text})" + entry,
        )

    def _authenticate(self, host: MemoryRegistryHost, request: ManifestRequest) -> str:
        """The ``Authorization`` the registry received ("" for none)."""
        credentials = request.credentials
        registry = request.registry
        if host.auth == "anonymous":
            return ""
        if host.auth == "basic":
            if credentials is None:
                raise self._none_given(request, "Basic")
            if not host.tls:
                raise RegistryAuthFailed(
                    field=registry,
                    rule="asks for credentials over plain HTTP: they are sent over HTTPS only",
                )
            self.sent.append(Sent(registry, credentials.login))
            if host.accounts.get(credentials.login) != credentials.password:
                raise RegistryAuthFailed(
                    field=registry,
                    rule=f"refuses the credentials of the netrc entry '{credentials.describe()}'",
                )
            return credentials.basic()
        return "Bearer " + self._token(host, request, credentials if host.tls else None)

    def _token(
        self,
        host: MemoryRegistryHost,
        request: ManifestRequest,
        credentials: RegistryCredentials | None,
    ) -> str:
        login = credentials.login if credentials else None
        key = (request.registry, request.repository, login)
        token, expires = self._tokens.get(key, ("", 0.0))
        if token and expires > self.now:
            return token
        self.token_requests += 1
        if credentials is None:
            if request.repository not in host.public:
                raise self._none_given(request, "Bearer", host.realm)
        else:
            self.sent.append(Sent(host.realm, credentials.login))
            if host.accounts.get(credentials.login) != credentials.password:
                raise RegistryAuthFailed(
                    field=request.registry,
                    rule=f"its token service {host.realm} refuses the credentials of the netrc"
                    f" entry '{credentials.describe()}'",
                )
        token = f"memory-token-{len(self.issued) + 1}-for-{request.registry}"
        self.issued.append(token)
        self._tokens[key] = (token, self.now + host.token_lifetime_s)
        return token

    @staticmethod
    def _none_given(request: ManifestRequest, scheme: str, realm: str = "") -> RegistryAuthFailed:
        via = f" (token service {realm})" if realm else ""
        return RegistryAuthFailed(
            field=request.registry,
            rule=f"asks for credentials ({scheme}{via}) for {request.repository}, and none"
            f" were given for {request.registry}",
        )

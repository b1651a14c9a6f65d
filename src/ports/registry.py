"""The Registry port: asking an OCI registry for a manifest by tag, as the registry API's
``GET /v2/<repository>/manifests/<tag>`` does (docs/design.md, "Resolving a tag").

An adapter returns the answer's bytes exactly as received, with the ``Content-Type`` and
``Docker-Content-Digest`` the registry sent; what those bytes are (and whether the header tells
the truth about them) is the domain's to decide (``domain.manifest``). The rules every adapter
keeps, because a registry, a mirror or a proxy answering for it is untrusted:

- reads are bounded: more than ``max_bytes`` is ``AnswerTooLarge``, found while reading (a
  ``Content-Length`` is never believed), and nothing past the bound is kept;
- credentials (``RegistryCredentials``: the one netrc entry of the registry's host) are sent
  only over HTTPS, only to the registry's own origin and to the token realm its Bearer
  challenge names (an https URL), never along a redirect to another origin, and they never
  appear in an error, a log line or a return value, not even when the registry echoes them: a
  registry's own text reaches an error only through ``domain.registry_text``; a plain-HTTP
  registry is asked anonymously, and only when ``allow_http`` is set;
- a Bearer token lives in the adapter's memory only, for the lifetime its issuer gave, and
  goes only to the registry (scheme, host and port) it was asked for: another registry whose
  challenge names the same realm gets a token of its own;
- transient failures (connection errors, timeouts, 429, 502, 503, 504) are retried within
  ``timeout_s``, a 429's ``Retry-After`` honoured up to a bound;
- everything one request does (connecting, every try, retry, redirect and token request,
  every byte of headers and body) ends by its deadline, ``timeout_s`` after it began, however
  the registry sends its answer: past it, ``RegistryUnavailable``.

Errors (``field`` names the registry, the reference or the setting; ``rule`` says what went
wrong, never with a secret in it): ``RegistryUnavailable`` (unreachable or failing, after the
retries), ``RegistryAuthFailed`` (credentials needed, refused, or not sendable),
``RegistryRejected`` (any other refusal of the request), ``RegistryNotFound`` (no such tag or
repository), ``AnswerRefused`` (an answer the product will not read: too large, a redirect it
must not follow, a token answer it cannot use).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.errors import InvalidRegistryAnswer, SlurmImageError


class RegistryError(SlurmImageError):
    """Base of the errors a ``Registry`` adapter raises."""


class RegistryUnavailable(RegistryError):
    """The registry could not be reached or kept failing (after the retries within the
    request's ``timeout_s``)."""


class RegistryRejected(RegistryError):
    """The registry refused the request (an answer other than the manifest, not worth
    retrying)."""


class RegistryAuthFailed(RegistryRejected):
    """The registry asks for credentials that are missing, refuses the ones sent (named by
    their netrc entry, never by the password), or asks for them where they must not go."""


class RegistryNotFound(RegistryError):
    """The registry has no such repository or tag."""


class AnswerRefused(RegistryError):
    """An answer the product will not read: too large, a redirect it must not follow, or a
    token answer it cannot use."""

    refusal = InvalidRegistryAnswer.refusal


class AnswerTooLarge(AnswerRefused):
    """The answer holds more than the request's ``max_bytes``."""


@dataclass(frozen=True)
class ManifestRequest:
    """One manifest to fetch: ``registry`` is host[:port] as the API is asked
    (``TagReference.enroot_registry``), ``repository`` the API's repository path, ``reference``
    the tag (or digest); ``accept`` the media types asked for; ``credentials`` the netrc entry
    of the registry's host, if any; ``allow_http`` whether a registry that does not speak TLS
    may be asked over plain HTTP (anonymously); ``max_bytes`` the read bound; ``timeout_s`` the
    time everything the request does together may take (module docstring)."""

    registry: str
    repository: str
    reference: str
    accept: str
    max_bytes: int
    timeout_s: float
    allow_http: bool = False
    credentials: RegistryCredentials | None = field(default=None, repr=False)
    kind: Literal["manifests", "blobs"] = "manifests"
    """``blobs``: ``GET /v2/<repository>/blobs/<digest>`` instead, under the same rules (a
    signature's payload; docs/design.md, "Image policy and signatures")."""


@dataclass(frozen=True)
class ManifestAnswer:
    """The registry's answer as received: the bytes, and what it said about them."""

    data: bytes
    content_type: str | None
    content_digest: str | None
    """The ``Docker-Content-Digest`` header, as sent (a claim to check, never a fact)."""


@runtime_checkable
class Registry(Protocol):
    """Fetches manifests from OCI registries under the rules of the module docstring."""

    def fetch_manifest(self, request: ManifestRequest) -> ManifestAnswer:
        """The answer to ``GET /v2/<repository>/manifests/<reference>`` with ``Accept:
        <accept>``, authenticated as the registry asks (anonymously, Basic, or a Bearer token
        from its realm). Raises the port's errors (module docstring)."""
        ...

"""The Authenticator port: what a credential sent with a request over TCP says about who sent
it (docs/gateway.md, "Who is asking"). The unix socket needs none: there the kernel names the
peer.

``authenticate(credential)`` decodes one MUNGE credential (the text ``munge -n`` prints, without
its newline: ``MUNGE:<base64>:``) with the site's munged and returns the uid and gid it was made
by. A credential is accepted once: the same credential again is refused (replayed), as is one
past its time to live (expired), one made with another key or not decodable (invalid), text that
is no armored credential, one whose payload is not empty, or one restricted to a uid or gid
other than the decoding process's (``munge --restrict-uid``/``--restrict-gid``). "Once" is as
far as the deciding memories reach: munged's, which is per daemon and lost when it restarts, and
the adapter's own, per process until the credential's time to live ends; a credential replayed
to a gateway on another host, asking another munged, is not recognised (docs/gateway.md, "Who is
asking").

Errors: ``CredentialRefused`` (field: ``authorization``, rule: why; maps to 401) and
``AuthenticatorUnavailable`` (field: the daemon's socket, rule: why; maps to 503) when munged
cannot be asked. Neither holds the credential.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError

FIELD = "authorization"


class AuthenticationError(SlurmImageError):
    """Base of the port's errors."""


class CredentialRefused(AuthenticationError):
    """The credential proves nothing: missing, malformed, expired, replayed or made with
    another key."""

    refusal = "unauthenticated"


class AuthenticatorUnavailable(AuthenticationError):
    """The site's authentication service (munged) could not be asked."""


@dataclass(frozen=True)
class Authenticated:
    """Who made a credential, as the authentication service decoded it."""

    uid: int
    gid: int


@runtime_checkable
class Authenticator(Protocol):
    def authenticate(self, credential: str) -> Authenticated:
        """The uid and gid that made ``credential``, accepted once."""
        ...


@runtime_checkable
class CredentialSource(Protocol):
    """The client's side: a fresh credential for one request (``munge -n``)."""

    def credential(self, restrict_uid: int | None = None) -> str:
        """A new MUNGE credential with an empty payload, made as the calling process's
        account; with ``restrict_uid``, one that only a process of that uid can decode (the
        gateway's, so that no other account's service could take it as the caller's)."""
        ...

"""Who is asking (docs/gateway.md, "Who is asking"): no request acts without an identity.

- On the unix socket, the kernel's word: the peer's uid (``peer.PEER_STATE``).
- Over TCP, a MUNGE credential in ``Authorization: Munge <credential>``, decoded once by the
  site's munged (``ports.authentication``); TLS is required (the connection's own, never what
  ``X-Forwarded-Proto`` says), except on a loopback listener the operator opened with plain
  HTTP (for tests).

The uid is then an account of the site (``ports.accounts``); the requester is its name and uid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurm_image.domain.errors import NotAuthenticated
from slurm_image.gateway.peer import PEER_STATE, TLS_STATE, PeerCredentials

if TYPE_CHECKING:
    from starlette.requests import Request as HttpRequest

    from slurm_image.domain.requester import Account
    from slurm_image.ports.accounts import Accounts
    from slurm_image.ports.authentication import Authenticator

SCHEME = "munge"
FIELD = "authorization"


@dataclass(frozen=True)
class Asker:
    """An authenticated requester and the host it asked from."""

    account: Account
    host: str


class Who:
    """Tell who asks an HTTP request (see the module docstring)."""

    def __init__(
        self,
        accounts: Accounts,
        authenticator: Authenticator | None,
        *,
        plain_http_ok: bool = False,
    ) -> None:
        self._accounts = accounts
        self._authenticator = authenticator
        self._plain_http_ok = plain_http_ok

    def __call__(self, request: HttpRequest) -> Asker:
        peer = request.scope.get("state", {}).get(PEER_STATE)
        if isinstance(peer, PeerCredentials):
            return Asker(self._account(peer.uid), host="localhost")
        over_tls = request.scope.get("state", {}).get(TLS_STATE) is True
        if not over_tls and not self._plain_http_ok:
            raise NotAuthenticated(field=FIELD, rule="over TCP the gateway answers HTTPS only")
        uid = self._munge_uid(request.headers.get(FIELD))
        client = request.client
        return Asker(self._account(uid), host=client.host if client is not None else "unknown")

    def anonymous_ok(self, request: HttpRequest) -> Asker | None:
        """Who asks, or None when the request carries no identity at all (a page a site opens
        to everyone); a credential that is there must still be good."""
        peer = request.scope.get("state", {}).get(PEER_STATE)
        if peer is None and request.headers.get(FIELD) is None:
            return None
        return self(request)

    def _munge_uid(self, header: str | None) -> int:
        if header is None:
            raise NotAuthenticated(
                field=FIELD, rule="a request over TCP carries 'Authorization: Munge <credential>'"
            )
        scheme, _, credential = header.partition(" ")
        if scheme.lower() != SCHEME or not credential.strip():
            raise NotAuthenticated(field=FIELD, rule="must be 'Munge <credential>' (munge -n)")
        if self._authenticator is None:
            raise NotAuthenticated(field=FIELD, rule="this gateway takes no MUNGE credentials")
        return self._authenticator.authenticate(credential.strip()).uid

    def _account(self, uid: int) -> Account:
        from slurm_image.ports.accounts import UnknownAccount

        try:
            return self._accounts.account(uid)
        except UnknownAccount:
            raise NotAuthenticated(
                field=FIELD, rule=f"uid {uid} is no account of this site"
            ) from None

"""``MemoryMunge``: a munged in memory, the Authenticator port's fake, and the credential sources
that ask it (``source``).

Like munged, it encodes a credential for a uid and gid under its key with a time to live
(armored as ``munge`` armors one: ``MUNGE:<base64>:``), decodes only what its key made, refuses
a credential past its time to live against its clock and one it decoded before, refuses to
decode one restricted to a uid or gid other than the decoding process's (``decoder``), and
forgets what it decoded when it restarts (``stop``, ``start``). Like ``MungeAuthenticator`` over
unmunge, it refuses a credential with a payload and remembers what it accepted until its time to
live ends (``AcceptedCredentials``, which outlives a restart), with the same words
(``adapters/munge.py``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from slurm_image.adapters.munge import (
    CANNOT_CONNECT,
    DEFAULT_SOCKET,
    EXPIRED,
    INVALID,
    NOT_A_CREDENTIAL,
    PAYLOAD,
    REPLAYED,
    RESTRICTED,
    AcceptedCredentials,
    check_credential,
    credential_digest,
)
from slurm_image.ports.authentication import (
    FIELD,
    Authenticated,
    AuthenticatorUnavailable,
    CredentialRefused,
)
from slurm_image.ports.clock import Clock

DEFAULT_TTL_S = 300
"""munge's own default time to live."""
_MAC_BYTES = 32


@dataclass
class MemoryMunge:
    """A munged with ``key``, answering on ``socket`` while ``running``, with time from
    ``clock`` (a ``FakeClock`` in tests). It is itself the Authenticator of one process
    (``authenticate``); ``authenticator()`` is another process's, asking the same daemon; both
    run as ``decoder``'s uid and gid (the gateway's)."""

    clock: Clock
    key: bytes = b"memory munge key"
    decoder: tuple[int, int] = (0, 0)
    socket: str = DEFAULT_SOCKET
    running: bool = True
    decoded: set[bytes] = field(default_factory=set)
    """The SHA-256 of every credential the daemon decoded since it started."""

    def __post_init__(self) -> None:
        self._process = MemoryAuthenticator(self)

    def encode(
        self,
        uid: int,
        gid: int,
        *,
        ttl_s: int = DEFAULT_TTL_S,
        payload: bytes = b"",
        restrict_uid: int | None = None,
        restrict_gid: int | None = None,
    ) -> str:
        """A credential made by ``uid`` and ``gid``, as munged makes one for a process,
        decodable only by ``restrict_uid`` and ``restrict_gid`` when given."""
        self._require_running()
        body = json.dumps(
            {
                "uid": uid,
                "gid": gid,
                "encoded_at": int(self.clock.now().timestamp()),
                "ttl": ttl_s,
                "nonce": secrets.token_hex(16),
                "payload": len(payload),
                "restrict_uid": restrict_uid,
                "restrict_gid": restrict_gid,
            }
        ).encode()
        armored = base64.b64encode(body + self._mac(body)).decode("ascii")
        return f"MUNGE:{armored}:"

    def decode(self, credential: str) -> dict[str, Any]:
        """The daemon's part: its key, the time to live, its own memory of replays."""
        self._require_running()
        try:
            raw = base64.b64decode(credential[len("MUNGE:") : -1], validate=True)
        except binascii.Error:
            raise CredentialRefused(field=FIELD, rule=NOT_A_CREDENTIAL) from None
        body, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        if not hmac.compare_digest(mac, self._mac(body)):
            raise CredentialRefused(field=FIELD, rule=INVALID)
        fields: dict[str, Any] = json.loads(body)
        if self.clock.now().timestamp() > fields["encoded_at"] + fields["ttl"]:
            raise CredentialRefused(field=FIELD, rule=EXPIRED)
        uid, gid = self.decoder
        if fields["restrict_uid"] not in (None, uid) or fields["restrict_gid"] not in (None, gid):
            raise CredentialRefused(field=FIELD, rule=RESTRICTED)
        digest = credential_digest(credential)
        if digest in self.decoded:
            raise CredentialRefused(field=FIELD, rule=REPLAYED)
        self.decoded.add(digest)
        return fields

    def authenticate(self, credential: str) -> Authenticated:
        return self._process.authenticate(credential)

    def authenticator(self, accepted: AcceptedCredentials | None = None) -> MemoryAuthenticator:
        """The Authenticator of another process asking this daemon: its own memory, or
        ``accepted`` (an ``AcceptedCredentialsFile`` a process before it kept)."""
        return MemoryAuthenticator(self, accepted)

    def source(self, uid: int, gid: int, *, ttl_s: int = DEFAULT_TTL_S) -> MemoryCredentialSource:
        """The CredentialSource of a process running as ``uid`` and ``gid``."""
        return MemoryCredentialSource(self, uid, gid, ttl_s)

    def stop(self) -> None:
        self.running = False

    def start(self) -> None:
        """Start again, having forgotten every credential decoded before, as munged does."""
        self.running = True
        self.decoded.clear()

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self.key, body, hashlib.sha256).digest()

    def _require_running(self) -> None:
        if not self.running:
            raise AuthenticatorUnavailable(field=self.socket, rule=CANNOT_CONNECT)


class MemoryAuthenticator:
    """One process's Authenticator over a ``MemoryMunge``, as ``MungeAuthenticator`` is over
    unmunge: the daemon decodes, and the process remembers what it accepted."""

    def __init__(self, daemon: MemoryMunge, accepted: AcceptedCredentials | None = None) -> None:
        self._daemon = daemon
        self._accepted = accepted if accepted is not None else AcceptedCredentials(daemon.clock)

    def authenticate(self, credential: str) -> Authenticated:
        check_credential(credential)
        digest = credential_digest(credential)
        if self._accepted.seen(digest):
            raise CredentialRefused(field=FIELD, rule=REPLAYED)
        fields = self._daemon.decode(credential)
        if fields["payload"]:
            raise CredentialRefused(field=FIELD, rule=PAYLOAD)
        self._accepted.remember(digest, float(fields["encoded_at"] + fields["ttl"]))
        return Authenticated(uid=fields["uid"], gid=fields["gid"])


@dataclass(frozen=True)
class MemoryCredentialSource:
    daemon: MemoryMunge
    uid: int
    gid: int
    ttl_s: int = DEFAULT_TTL_S

    def credential(self, restrict_uid: int | None = None) -> str:
        return self.daemon.encode(self.uid, self.gid, ttl_s=self.ttl_s, restrict_uid=restrict_uid)

"""The Authenticator and CredentialSource ports through MUNGE's command-line clients: ``unmunge``
decodes a credential with the site's munged, ``munge -n`` makes one (docs/gateway.md, "Who is
asking").

Both run from an argument vector (no shell) with a minimal environment (a fixed ``PATH``,
``LC_ALL=C``), ``/`` as their directory and a bounded time, and talk to the daemon on the socket
they are given (``--socket``). What ``unmunge`` prints is read as untrusted text: only its exit
status and the numeric ``STATUS``, ``UID``, ``GID``, ``LENGTH``, ``TTL``, ``ENCODE_TIME`` and
``DECODE_TIME`` lines (``--numeric --keys``; the payload goes to ``/dev/null``), each exactly
once, and a credential is accepted only when both the exit status and ``STATUS`` say success.

Replays. munged refuses a credential it has already decoded, but that memory is its own: it is
per daemon and lives in the daemon's memory only. A credential decoded by one host's munged is
not known to another host's (a credential sent to one gateway host can be replayed to a second
gateway host that asks its own munged), and a munged that restarts has forgotten every
credential it decoded. ``MungeAuthenticator`` therefore also remembers, by SHA-256, every
credential it accepted until its time to live ends, and refuses it again without asking
munged: that closes the restart case for this process, and, kept in a file
(``accepted_credentials_file``), for the gateway process after it. It cannot close the case of
two hosts;
there the defences are TLS (a credential cannot be read off the wire), a short time to live
(``munge -n -t``) and one gateway host per store.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from slurm_image.adapters.system_clock import SystemClock
from slurm_image.domain.requester import MAX_ID
from slurm_image.ports.authentication import (
    FIELD,
    Authenticated,
    AuthenticatorUnavailable,
    CredentialRefused,
)
from slurm_image.ports.clock import Clock

DEFAULT_SOCKET = "/run/munge/munge.socket.2"
CREDENTIAL = re.compile(r"MUNGE:[A-Za-z0-9+/]+={0,2}:")
"""A credential as ``munge`` armors it: the prefix, base64, the closing colon."""
MAX_CREDENTIAL_CHARS = 4096
"""Far above a credential with an empty payload (about 150 characters)."""
DEFAULT_TIMEOUT_S = 10.0
_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
_MAX_ANSWER = 64 * 1024

# What a refusal says; the in-memory munged says the same (adapters/memory/munge.py).
NOT_A_CREDENTIAL = "is not a MUNGE credential (MUNGE:<base64>:, as munge -n prints it)"
INVALID = "the MUNGE credential is invalid: made with another key, or altered"
EXPIRED = "the MUNGE credential has expired: make a new one (munge -n)"
REPLAYED = "the MUNGE credential was already used (replayed): every request needs a new one"
PAYLOAD = "the MUNGE credential carries a payload: only credentials made with munge -n are taken"
CANNOT_CONNECT = "cannot connect to munged on this socket (is munged running?)"
RESTRICTED = "the MUNGE credential is restricted to another user or group than the gateway's"

# munge_err_t, the exit status of munge and unmunge (munge.h): the daemon could not be asked ...
_UNAVAILABLE = {
    1: "munged failed (an internal error)",
    5: "munged ran out of memory",
    6: CANNOT_CONNECT,
    7: "munged did not answer in time",
}
# ... or it refused the credential.
_REFUSED = {
    2: NOT_A_CREDENTIAL,
    3: NOT_A_CREDENTIAL,
    4: NOT_A_CREDENTIAL,
    8: NOT_A_CREDENTIAL,
    9: "the MUNGE credential's version is not one this site's munged reads",
    10: "the MUNGE credential's cipher is not one this site's munged accepts",
    11: "the MUNGE credential's MAC is not one this site's munged accepts",
    12: "the MUNGE credential's compression is not one this site's munged accepts",
    13: "the MUNGE credential was made for another security realm",
    14: INVALID,
    15: EXPIRED,
    16: "the MUNGE credential was made in the future: the hosts' clocks disagree",
    17: REPLAYED,
    18: RESTRICTED,
}
_KEYS = ("STATUS", "UID", "GID", "LENGTH", "TTL", "ENCODE_TIME", "DECODE_TIME")
_NUMBER = re.compile(r"[0-9]{1,20}")


def check_credential(credential: str) -> None:
    """Refuse, before any daemon is asked, text that is no armored MUNGE credential."""
    if len(credential) > MAX_CREDENTIAL_CHARS or not CREDENTIAL.fullmatch(credential):
        raise CredentialRefused(field=FIELD, rule=NOT_A_CREDENTIAL)


def credential_digest(credential: str) -> bytes:
    return hashlib.sha256(credential.encode("ascii")).digest()


@dataclass(frozen=True)
class _Answer:
    returncode: int
    stdout: str


def _run(argv: Sequence[str], *, stdin: bytes | None, timeout_s: float, socket: str) -> _Answer:
    try:
        done = subprocess.run(
            list(argv),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            env=_ENV,
            cwd="/",
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AuthenticatorUnavailable(
            field=socket, rule=f"{argv[0]} did not answer within {timeout_s:g}s"
        ) from None
    except OSError as exc:
        raise AuthenticatorUnavailable(
            field=socket, rule=f"{argv[0]} could not be run: {exc.strerror or exc}"
        ) from None
    return _Answer(done.returncode, done.stdout[:_MAX_ANSWER].decode("ascii", "replace"))


class AcceptedCredentials:
    """The credentials one process accepted, by SHA-256, each until its time to live ends
    (epoch seconds on ``clock``), at most ``max_kept`` (past it, those nearest their end are
    forgotten first); safe to share between threads. ``AcceptedCredentialsFile`` keeps them in
    a file as well, for the next process (``adapters/accepted_credentials_file.py``)."""

    def __init__(self, clock: Clock, *, max_kept: int = 100_000) -> None:
        self._clock = clock
        self._max_kept = max_kept
        self._until: dict[bytes, float] = {}
        self._ends: list[tuple[float, bytes]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._forget_ended()
            return len(self._until)

    def seen(self, digest: bytes) -> bool:
        with self._lock:
            self._forget_ended()
            return digest in self._until

    def remember(self, digest: bytes, until: float) -> None:
        with self._lock:
            self._until[digest] = max(until, self._until.get(digest, until))
            heapq.heappush(self._ends, (until, digest))
            self._forget_ended()

    def alive(self) -> list[tuple[bytes, float]]:
        """Every credential remembered whose time to live has not ended, and its end."""
        with self._lock:
            self._forget_ended()
            return list(self._until.items())

    def _forget_ended(self) -> None:
        now = self._clock.now().timestamp()
        while self._ends and (self._ends[0][0] < now or len(self._until) > self._max_kept):
            until, digest = heapq.heappop(self._ends)
            if self._until.get(digest) == until:
                del self._until[digest]


class MungeAuthenticator:
    """``unmunge --socket SOCKET``: the uid and gid munged says made a credential, accepted once
    by munged and once by ``accepted`` (this object's memory unless given; the module's
    docstring: Replays)."""

    def __init__(
        self,
        *,
        socket: str = DEFAULT_SOCKET,
        unmunge: str = "unmunge",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Clock | None = None,
        accepted: AcceptedCredentials | None = None,
    ) -> None:
        self._socket = socket
        self._unmunge = unmunge
        self._timeout_s = timeout_s
        self._accepted = (
            accepted
            if accepted is not None
            else AcceptedCredentials(clock if clock is not None else SystemClock())
        )

    def __repr__(self) -> str:
        return f"MungeAuthenticator(socket={self._socket!r}, unmunge={self._unmunge!r})"

    def authenticate(self, credential: str) -> Authenticated:
        check_credential(credential)
        digest = credential_digest(credential)
        if self._accepted.seen(digest):
            raise CredentialRefused(field=FIELD, rule=REPLAYED)
        argv = [
            self._unmunge,
            "--socket",
            self._socket,
            "--numeric",
            "--keys",
            ",".join(_KEYS),
            "--output",
            "/dev/null",
        ]
        answer = _run(
            argv, stdin=credential.encode("ascii"), timeout_s=self._timeout_s, socket=self._socket
        )
        if answer.returncode in _UNAVAILABLE:
            raise AuthenticatorUnavailable(field=self._socket, rule=_UNAVAILABLE[answer.returncode])
        if answer.returncode != 0:
            status = answer.returncode
            rule = _REFUSED.get(status, f"munged refused the MUNGE credential (status {status})")
            raise CredentialRefused(field=FIELD, rule=rule)
        fields = self._read_answer(answer.stdout)
        if fields["STATUS"] != 0:
            self._unreadable(f"it exited 0 but says status {fields['STATUS']}")
        if fields["LENGTH"] != 0:
            raise CredentialRefused(field=FIELD, rule=PAYLOAD)
        for key in ("UID", "GID"):
            if fields[key] > MAX_ID:
                self._unreadable(f"its {key} {fields[key]} is no uid or gid")
        until = max(fields["ENCODE_TIME"], fields["DECODE_TIME"]) + fields["TTL"]
        self._accepted.remember(digest, float(until))
        return Authenticated(uid=fields["UID"], gid=fields["GID"])

    def _read_answer(self, text: str) -> dict[str, int]:
        fields: dict[str, int] = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            key, colon, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if not colon or key not in _KEYS:
                self._unreadable("a line that is none of its metadata keys")
            if key in fields:
                self._unreadable(f"{key} twice")
            if not _NUMBER.fullmatch(value):
                self._unreadable(f"{key} is not a number")
            fields[key] = int(value)
        missing = [key for key in _KEYS if key not in fields]
        if missing:
            self._unreadable(f"no {', '.join(missing)}")
        return fields

    def _unreadable(self, why: str) -> NoReturn:
        raise AuthenticatorUnavailable(
            field=self._socket, rule=f"unmunge's answer cannot be read: {why}"
        )


class MungeCredentialSource:
    """``munge -n --socket SOCKET [-t TTL] [--restrict-uid UID]``: a new credential with an
    empty payload, made by munged as the calling process's uid and gid, decodable only by a
    process of ``UID`` when one is given (munged refuses anyone else's unmunge, root's too)."""

    def __init__(
        self,
        *,
        socket: str = DEFAULT_SOCKET,
        munge: str = "munge",
        ttl_s: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if ttl_s is not None and ttl_s < 1:
            raise ValueError("a credential's time to live is at least 1 second")
        self._socket = socket
        self._munge = munge
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"MungeCredentialSource(socket={self._socket!r}, munge={self._munge!r})"

    def credential(self, restrict_uid: int | None = None) -> str:
        argv = [self._munge, "--no-input", "--socket", self._socket]
        if self._ttl_s is not None:
            argv += ["--ttl", str(self._ttl_s)]
        if restrict_uid is not None:
            argv += ["--restrict-uid", str(restrict_uid)]
        answer = _run(argv, stdin=None, timeout_s=self._timeout_s, socket=self._socket)
        if answer.returncode != 0:
            why = _UNAVAILABLE.get(answer.returncode, f"status {answer.returncode}")
            raise AuthenticatorUnavailable(
                field=self._socket, rule=f"munge could not make a credential: {why}"
            )
        credential = answer.stdout.strip()
        if len(credential) > MAX_CREDENTIAL_CHARS or not CREDENTIAL.fullmatch(credential):
            raise AuthenticatorUnavailable(
                field=self._socket, rule="munge printed no MUNGE credential"
            )
        return credential

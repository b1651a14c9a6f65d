"""Who connects to a unix socket, as the kernel says (``SO_PEERCRED``; docs/gateway.md, "Who is
asking"): uvicorn's HTTP protocol, with the peer's uid, gid and pid put in every request's
state, as slurmrestd's ``rest_auth/local`` reads them. Nothing a client sends can set them."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

PEER_STATE = "peer"
"""The key of the peer's credentials in a request's ``state`` (absent over TCP)."""
TLS_STATE = "tls"
"""The key of whether the connection itself is TLS in a request's ``state``: the transport's
word, which no header changes (``X-Forwarded-Proto`` rewrites the request's scheme)."""


@dataclass(frozen=True)
class PeerCredentials:
    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """The credentials of the process at the other end of the unix socket ``sock``, from the
    kernel (as they were when it connected)."""
    size = struct.calcsize("3i")
    pid, uid, gid = struct.unpack(
        "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size)
    )
    return PeerCredentials(pid=pid, uid=uid, gid=gid)


class PeerCredentialsProtocol(H11Protocol):
    """uvicorn's h11 protocol, with each unix-socket connection's peer credentials, and whether
    each connection is TLS, in the state of its requests."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        tls = transport.get_extra_info("sslcontext") is not None
        self.app_state = {**self.app_state, TLS_STATE: tls}
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family == socket.AF_UNIX:
            self.app_state = {**self.app_state, PEER_STATE: peer_credentials(sock)}

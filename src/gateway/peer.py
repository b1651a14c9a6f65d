"""Who connects to a unix socket, as the kernel says (``SO_PEERCRED``; docs/gateway.md, "Who is
asking"): uvicorn's HTTP protocol (httptools, the C parser), with the peer's uid, gid and pid put
in every request's state, as slurmrestd's ``rest_auth/local`` reads them. Nothing a client sends
can set them. And the connections' limits (docs/gateway.md, "Limits"): how many one peer and all
may keep open, and how long and how large a request's head may be."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from slurm_image.domain.errors import Busy
from slurm_image.domain.limits import Slots

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


class PeerCredentialsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with each unix-socket connection's peer credentials, and
    whether each connection is TLS, in the state of its requests."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        tls = transport.get_extra_info("sslcontext") is not None
        self.app_state = {**self.app_state, TLS_STATE: tls}
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family == socket.AF_UNIX:
            self.app_state = {**self.app_state, PEER_STATE: peer_credentials(sock)}


class ConnectionLimits:
    """The connections one gateway keeps open (``[gateway] max_connections``, and
    ``max_connections_per_peer``: per uid on a unix socket, per address over TCP; counted by
    ``domain.limits.Slots``), and how long a connection may take to send a request's head
    (``header_timeout_s``), and how many bytes a connection may send while a request's head is
    unfinished (``head_bytes``; the parser itself buffers a head without bound); ``counted`` is
    told how many are open whenever that changes. Touched only from the event loop."""

    def __init__(
        self,
        *,
        total: int,
        per_peer: int,
        header_timeout_s: float,
        head_bytes: int,
        counted: Callable[[int], None] | None = None,
    ) -> None:
        self.slots = Slots(
            per_key=per_peer,
            total=total,
            what="connections",
            per_key_field="max_connections_per_peer",
            total_field="max_connections",
        )
        self.header_timeout_s = header_timeout_s
        self.head_bytes = head_bytes
        self._counted = counted

    @property
    def in_use(self) -> int:
        return self.slots.in_use

    def admit(self, peer: object) -> Busy | None:
        """Count a new connection of ``peer``, or the refusal that names the limit."""
        try:
            self.slots.open(peer, f"peer {peer}")
        except Busy as refused:
            return refused
        self._count()
        return None

    def release(self, peer: object) -> None:
        self.slots.close(peer)
        self._count()

    def _count(self) -> None:
        if self._counted is not None:
            self._counted(self.slots.in_use)


def refusal(refused: Busy) -> bytes:
    """What a connection past a limit is told before it is closed: the gateway's one error
    body, 429 with ``Retry-After``."""
    from slurm_image.wire import shapes
    from slurm_image.wire.exit_codes import EXIT_BUSY

    rule = f"too many connections open ([gateway] {refused.field}): ask again later"
    body = json.dumps(shapes.error_json(refused.field, rule, EXIT_BUSY)).encode()
    head = (
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
        f"retry-after: {refused.retry_after_s}\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


def guarded_protocol(limits: ConnectionLimits) -> type[PeerCredentialsProtocol]:
    """``PeerCredentialsProtocol`` within ``limits``: a connection past them is answered 429 and
    closed at once; one that has sent no whole request head ``header_timeout_s`` after it
    connected, or after its last answer, is closed; one that sends more than ``head_bytes``
    while a request's head is unfinished is answered 400 and closed."""

    class Guarded(PeerCredentialsProtocol):
        _peer: object = None
        _head_timer: Any = None
        _awaiting_head = True
        _head_received = 0

        def data_received(self, data: bytes) -> None:
            if self._awaiting_head:
                self._head_received += len(data)
            super().data_received(data)
            if (
                self._awaiting_head
                and self._head_received > limits.head_bytes
                and not self.transport.is_closing()
            ):
                self.send_400_response("Invalid HTTP request received.")

        def on_headers_complete(self) -> None:
            self._awaiting_head = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._awaiting_head, self._head_received = True, 0
            super().on_message_complete()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            credentials = self.app_state.get(PEER_STATE)
            peer: object = (
                ("uid", credentials.uid)
                if isinstance(credentials, PeerCredentials)
                else ("host", self.client[0] if self.client else None)
            )
            refused = limits.admit(peer)
            if refused is not None:
                transport.write(refusal(refused))
                transport.close()
                return
            self._peer = peer
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            if self._peer is not None:
                limits.release(self._peer)
                self._peer = None
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(limits.header_timeout_s, self._head_late)

        def _head_late(self) -> None:
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is being answered: its head came in time
            if not self.transport.is_closing():
                self.transport.close()

    return Guarded

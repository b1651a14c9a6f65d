"""A deadline for one HTTP conversation with httpx: httpx's timeouts bound each read, so a
server sending a byte every few seconds would hold the caller for as long as it liked.
``Watchdog`` shuts the conversation's connections down when its time is up (the registry's, in
``oci_registry``; slurmrestd's, in ``slurmrest.client``)."""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from typing import Any

CONNECTED = ("connect_tcp.complete", "connect_unix_socket.complete", "start_tls.complete")
"""The httpcore trace events of a connection made (TCP, a unix socket, its TLS)."""


class Watchdog:
    """Shuts a conversation's connections down ``seconds`` after it began. It learns of each
    connection through httpcore's ``trace`` extension (pass ``extensions={"trace":
    watchdog.trace}`` with each request), the moment it is made; a read blocked on a connection
    shut down returns at once, and the conversation sees its deadline has passed
    (``expired``)."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._streams: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if not event.endswith(CONNECTED):
            return
        stream = info.get("return_value")
        with self._lock:
            self._streams.append(stream)
            expired = self.expired
        if expired:
            shut_down(stream)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            streams = list(self._streams)
        for stream in streams:
            shut_down(stream)

    def cancel(self) -> None:
        self._timer.cancel()


def shut_down(stream: Any) -> None:
    """Shut down the socket under an httpcore network stream (TLS or not), waking a read
    blocked on it in another thread; closing is left to the thread that owns it."""
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        # OSError: closed already, or detached when TLS wrapped it. The plain socket's
        # shutdown, also for a TLS one: no TLS state is touched from this thread.
        with suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)

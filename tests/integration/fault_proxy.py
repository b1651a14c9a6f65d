"""A loopback TCP proxy that can swallow the answer to a job submission.

It forwards each connection to the upstream port. While ``drop_submits`` is positive, a
connection whose request is a ``POST .../job/submit`` is forwarded, its answer read from
upstream (so the job exists), and then the client connection is closed without a byte of it:
the client cannot know whether the job was accepted.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class DroppingProxy:
    def __init__(self, upstream_port: int, *, on_drop: Callable[[], None] | None = None) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.drop_submits = 0
        self.dropped = 0
        self._on_drop = on_drop
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DroppingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        client.settimeout(30)
        with client, socket.create_connection(self.upstream, timeout=30) as upstream:
            request = self._read_request(client)
            upstream.sendall(request)
            is_submit = (
                request.startswith(b"POST ") and b"/job/submit" in request.split(b"\r\n", 1)[0]
            )
            if is_submit and self.drop_submits > 0:
                self.drop_submits -= 1
                upstream.recv(65536)  # the answer exists upstream: the job was accepted
                self.dropped += 1
                if self._on_drop is not None:
                    self._on_drop()
                return  # close the client connection without answering
            upstream.shutdown(socket.SHUT_WR)
            while chunk := upstream.recv(65536):
                client.sendall(chunk)

    @staticmethod
    def _read_request(client: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = client.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body

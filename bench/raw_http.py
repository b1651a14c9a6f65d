"""The load's client for bench/gateway.py: one kept-alive HTTP/1.1 connection over a unix socket,
asking GETs one at a time and reading each answer whole by its ``content-length``.

It is as small as a client can be so that the two cores go to the gateway it measures: httpx's
``AsyncClient`` spent about 0.6 ms of CPU per request (0.56 of a core at 845 requests a
second), about half of what the gateway spent answering it, and the latencies it timed included
its own queue. Only what the gateway answers is read: a status line, headers, a body of the
length they declare (an answer without one is refused, since the gateway sends none)."""

from __future__ import annotations

import asyncio
from pathlib import Path

HEAD_END = b"\r\n\r\n"
LENGTH = b"\r\ncontent-length:"


class NotUnderstood(Exception):
    """An answer this client does not read: no ``content-length``, or no HTTP/1.1 status line."""


class Connection:
    """One connection to the gateway's unix socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, sock: Path) -> Connection:
        reader, writer = await asyncio.open_unix_connection(str(sock), limit=1 << 20)
        return cls(reader, writer)

    async def get(self, target: str) -> tuple[int, bytes]:
        """The status and body of ``GET target``."""
        self._writer.write(f"GET {target} HTTP/1.1\r\nhost: gateway\r\n\r\n".encode())
        head = await self._reader.readuntil(HEAD_END)
        if not head.startswith(b"HTTP/1.1 "):
            raise NotUnderstood(f"no HTTP/1.1 status line: {head[:100]!r}")
        lowered = head.lower()
        at = lowered.find(LENGTH)
        if at < 0:
            raise NotUnderstood(f"no content-length: {head[:300]!r}")
        end = lowered.index(b"\r\n", at + len(LENGTH))
        length = int(lowered[at + len(LENGTH) : end])
        return int(head[9:12]), await self._reader.readexactly(length)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()

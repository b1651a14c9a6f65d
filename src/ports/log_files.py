"""The LogFiles port: the job's output and error logs, which the scheduler writes into the
attempt directory while the job runs (``logs`` reads them as they grow)."""

from __future__ import annotations

from typing import Protocol


class LogFiles(Protocol):
    def read_from(self, path: str, offset: int, max_bytes: int) -> bytes:
        """At most ``max_bytes`` of the regular file ``path`` from ``offset`` (b"" at its end,
        and while the file does not exist yet). Never follows a symlink at ``path`` and never
        blocks on a FIFO: either is ``ports.workspace.NotRegularFile``."""
        ...

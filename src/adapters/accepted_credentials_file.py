"""The credentials a gateway accepted, kept in a file of its own so that a gateway that restarts
still refuses them (docs/gateway.md, "Replays, and what "once" covers"): ``AcceptedCredentials``
whose every ``remember`` is also appended to the file, read back when the next process starts.

The file holds one line per credential, its SHA-256 in hex and the epoch second its time to live
ends (never the credential). It is the gateway account's: made 0600 without following a link,
and refused when another account owns it or others may read or write it. Lines whose time has
ended are dropped when the file is rewritten, which happens once it holds twice the lines still
alive (and at least ``REWRITE_AFTER``); unreadable lines are skipped. At most ``MAX_KEPT``
credentials are kept: past it, those nearest their end are forgotten first. An append is not
synced to the disk: a host that crashes loses its last appends, and munged's memory with them,
within a credential's time to live. Each worker of a gateway (``serve --workers``) keeps a file
of its own and reads its siblings' (``also``) when it starts.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

from slurm_image.adapters.munge import AcceptedCredentials
from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.ports.clock import Clock

FIELD = "replay_file"
MAX_KEPT = 100_000
"""Credentials kept at most (about 8 MB of file): a thousand requests a second for 100 s."""
REWRITE_AFTER = 1024
_LINE = re.compile(r"([0-9a-f]{64}) ([0-9]{1,12})")
_MAX_BYTES = 2 * (MAX_KEPT + REWRITE_AFTER) * 80


class AcceptedCredentialsFile(AcceptedCredentials):
    """``AcceptedCredentials`` kept in ``path`` as well (see the module docstring)."""

    def __init__(
        self, path: str, clock: Clock, *, max_kept: int = MAX_KEPT, also: Sequence[str] = ()
    ) -> None:
        super().__init__(clock, max_kept=max_kept)
        self._path = Path(path)
        self._file_lock = threading.Lock()
        self._lines = 0
        self._fd = self._open()
        now = clock.now().timestamp()
        for digest, until in self._read(self._path, *(Path(other) for other in also)):
            if until >= now:
                super().remember(digest, until)
        self._rewrite()

    def __repr__(self) -> str:
        return f"AcceptedCredentialsFile({str(self._path)!r})"

    def remember(self, digest: bytes, until: float) -> None:
        super().remember(digest, until)
        line = f"{digest.hex()} {int(until)}\n".encode("ascii")
        with self._file_lock:
            os.write(self._fd, line)
            self._lines += 1
            if self._lines >= max(REWRITE_AFTER, 2 * len(self)):
                self._rewrite_locked()

    def close(self) -> None:
        with self._file_lock:
            os.close(self._fd)

    def _open(self) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self._path, flags, 0o600)
        except OSError as error:
            raise InvalidRequest(
                field=FIELD, rule=f"{self._path} cannot be opened: {error.strerror or error}"
            ) from None
        info = os.fstat(fd)
        problem = paths.secret_file_problem(info.st_mode, info.st_uid, os.geteuid())
        if problem is not None:
            os.close(fd)
            raise InvalidRequest(field=FIELD, rule=f"{self._path} {problem}")
        return fd

    def _read(self, *files: Path) -> list[tuple[bytes, float]]:
        kept = []
        for path in files:
            try:
                with open(path, "rb") as file:
                    data = file.read(_MAX_BYTES)
            except FileNotFoundError:
                continue
            for line in data.decode("ascii", "replace").splitlines():
                match = _LINE.fullmatch(line)
                if match is not None:
                    kept.append((bytes.fromhex(match[1]), float(match[2])))
        return kept

    def _rewrite(self) -> None:
        with self._file_lock:
            self._rewrite_locked()

    def _rewrite_locked(self) -> None:
        """The file anew with the credentials still alive, put in place by a rename."""
        alive = self.alive()
        text = "".join(f"{digest.hex()} {int(until)}\n" for digest, until in alive)
        partial = self._path.with_name(f".{self._path.name}.{os.getpid()}.new")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(partial, flags, 0o600)
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)
        try:
            partial.replace(self._path)
        except OSError:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        os.close(self._fd)
        self._fd = self._open()
        self._lines = len(alive)

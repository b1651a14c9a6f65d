"""A munged of the tests' own, with its own key, on a socket of its own (docs/testing.md,
"munged").

``start_munged(directory)`` runs Debian's ``munged`` in the foreground as a child of the test
process (so it is stopped by its pid, and dies with nothing else) with every file in
``directory``: ``--socket``, ``--key-file`` (1024 random bytes unless ``key`` is given: two
daemons with one key decode each other's credentials), ``--pid-file``, ``--log-file`` and
``--seed-file``. What munged insists on, found by running it as root and as an ordinary user:

- its key, log and seed files and their directory belong to the uid munged runs as (as root: to
  root; a log file owned by another uid is "insecure" and munged exits), and the key file is
  closed to group and others (0600);
- every directory on the way to the socket is searchable by everyone ("execute permissions for
  all required"), so the directory is 0755 and lies in /tmp, not under pytest's ``tmp_path``
  (``/tmp/pytest-of-root`` is 0700, which munged refuses and an ordinary uid cannot pass);
- nothing else: no ``--force``, no munge account, no /etc/munge. Run as root, as CI runs, it
  takes this directory as it is; run as an ordinary user it works the same with the files that
  user owns.

With ``--foreground`` munged logs to its stderr, which goes to ``munged.log`` beside the key.

``munge_daemons`` is a session fixture (register it by importing it): two daemons, ``good``
and ``other``, each with its own key, for the forgery case. munged keeps the credentials it has
decoded in memory, for as long as it runs: every test makes its own credentials, so tests
sharing the daemons never see each other's replays.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import unavailable

KEY_BYTES = 1024
_START_WITHIN_S = 20.0


@dataclass
class MungeDaemon:
    directory: Path
    key: bytes
    process: subprocess.Popen[bytes]

    @property
    def socket(self) -> str:
        return str(self.directory / "munge.socket")

    @property
    def log(self) -> str:
        path = self.directory / "munged.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop this daemon (our own child, by its pid)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> MungeDaemon:
        """The same key and socket, a new daemon: it has forgotten every credential it
        decoded."""
        self.stop()
        return start_munged(self.directory, key=self.key)


def munged_program() -> str:
    program = shutil.which("munged", path="/usr/sbin:/usr/bin:/sbin:/bin")
    if program is None:
        unavailable("munged is not installed (Debian: apt-get install munge)")
    return program


def start_munged(directory: Path, *, key: bytes | None = None) -> MungeDaemon:
    """A munged on ``directory/munge.socket``; ``directory`` is made (0755) when absent."""
    program = munged_program()
    directory.mkdir(mode=0o755, exist_ok=True)
    directory.chmod(0o755)
    key = os.urandom(KEY_BYTES) if key is None else key
    key_file = directory / "munge.key"
    key_file.unlink(missing_ok=True)
    descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as written:
        written.write(key)
    sock = directory / "munge.socket"
    with (directory / "munged.log").open("ab") as log:
        process = subprocess.Popen(
            [
                program,
                "--foreground",
                f"--socket={sock}",
                f"--key-file={key_file}",
                f"--pid-file={directory / 'munged.pid'}",
                f"--log-file={directory / 'munged.log'}",
                f"--seed-file={directory / 'munged.seed'}",
                "--num-threads=2",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=directory,
        )
    daemon = MungeDaemon(directory, key, process)
    deadline = time.monotonic() + _START_WITHIN_S
    while not _answers(sock):
        if process.poll() is not None or time.monotonic() > deadline:
            daemon.stop()
            raise AssertionError(f"munged did not start on {sock}:\n{daemon.log}")
        time.sleep(0.05)
    return daemon


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class MungeDaemons:
    good: MungeDaemon
    other: MungeDaemon
    """Another key: what it makes, ``good`` cannot decode."""
    base: Path


@contextlib.contextmanager
def running_daemons() -> Iterator[MungeDaemons]:
    base = Path(tempfile.mkdtemp(prefix="slurm-image-munge-"))
    base.chmod(0o755)
    started: list[MungeDaemon] = []
    try:
        started.append(start_munged(base / "good"))
        started.append(start_munged(base / "other"))
        yield MungeDaemons(started[0], started[1], base)
    finally:
        for daemon in started:
            daemon.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def munge_daemons() -> Iterator[MungeDaemons]:
    with running_daemons() as daemons:
        yield daemons

"""slurmrestd that answers a byte at a time: each read of the answer comes within httpx's
timeout, but the exchange as a whole ends at ``timeout_s`` (``adapters.deadline``), so a
request to the scheduler cannot hold the gateway's call for as long as slurmrestd likes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_image.adapters.slurmrest.client import RestClient
from slurm_image.submitters import TransientFailure

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 40


class DribblingRestd:
    """Answers the first request with a head sent a byte every ``every_s`` (some 20 s in all),
    then hangs up; ``cut_off`` is set when the client hung up first."""

    def __init__(self, path: Path, every_s: float = 0.2) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(4)
        self.every_s = every_s
        self.stopped = threading.Event()
        self.cut_off = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            connection, _ = self.server.accept()
        except OSError:
            return
        with connection:
            connection.recv(65536)
            try:
                for byte in HEAD:
                    if self.stopped.wait(self.every_s):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:
                self.cut_off.set()

    def stop(self) -> None:
        self.stopped.set()
        self.server.close()


@pytest.fixture
def restd(tmp_path: Path) -> Iterator[DribblingRestd]:
    server = DribblingRestd(tmp_path / "slurmrestd.sock")
    try:
        yield server
    finally:
        server.stop()


def test_an_answer_sent_a_byte_at_a_time_ends_at_the_timeout(
    restd: DribblingRestd, tmp_path: Path
) -> None:
    client = RestClient(f"unix://{tmp_path / 'slurmrestd.sock'}", timeout_s=1.0)
    with pytest.raises(TransientFailure) as failed:
        client.request("GET", "/slurm/v0.0.40/ping", sent=False)
    assert "did not answer within 1s" in failed.value.reason
    assert failed.value.field == "slurmrestd"
    assert restd.cut_off.wait(30), "the connection was shut down while slurmrestd still sent"

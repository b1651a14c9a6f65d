"""One ``RestClient`` asked from several threads at once, as the gateway's scheduler calls ask
it: each exchange has a connection of its own, and one ending never cuts another short."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import pytest

from slurm_image.adapters.slurmrest.client import RestClient

BODY = b'{"pings": []}'
ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    + b"Content-Length: %d\r\n\r\n" % len(BODY)
    + BODY
)


class SlowRestd:
    """Answers every request on its own thread; the first ``clients`` only once all of them
    have asked, so that their exchanges overlap."""

    def __init__(self, path: Path, clients: int) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(clients)
        self.all_asking = threading.Barrier(clients, timeout=30)
        self.held = clients
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            hold, self.held = self.held > 0, self.held - 1
            threading.Thread(target=self._answer, args=(connection, hold), daemon=True).start()

    def _answer(self, connection: socket.socket, hold: bool) -> None:
        with connection:
            connection.recv(65536)
            if hold:
                with suppress(threading.BrokenBarrierError):
                    self.all_asking.wait()
            connection.sendall(ANSWER)

    def stop(self) -> None:
        self.server.close()


CLIENTS = 8


@pytest.fixture
def restd(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "slurmrestd.sock"
    server = SlowRestd(path, CLIENTS)
    try:
        yield path
    finally:
        server.stop()


def test_concurrent_exchanges_of_one_client_each_get_their_answer(restd: Path) -> None:
    client = RestClient(f"unix://{restd}", timeout_s=20.0)

    def ping(_: int) -> tuple[int, object]:
        answer = client.request("GET", "/slurm/v0.0.40/ping", sent=False)
        return answer.status, answer.body

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(ping, range(CLIENTS)))
    assert answers == [(200, {"pings": []})] * CLIENTS
    # and the client still answers afterwards
    assert client.request("GET", "/slurm/v0.0.40/ping", sent=False).status == 200

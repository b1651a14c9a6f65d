"""``gateway.accept_share``: the workers' counts of open connections are seen across a fork, and a
worker's listener declines a waiting connection while that worker holds more than the fewest
plus ``SLACK``, for at most ``DEFER_S``, then takes it."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_image.gateway.accept_share import DEFER_S, SLACK, OpenCounts, SharedListener


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[tuple[socket.socket, Path]]:
    sock = socket.socket(socket.AF_UNIX)
    path = tmp_path / "s.sock"
    sock.bind(str(path))
    sock.listen(16)
    sock.setblocking(False)
    yield sock, path
    sock.close()


def test_a_count_published_in_a_forked_worker_is_seen_by_the_others() -> None:
    counts = OpenCounts(2)
    pid = os.fork()
    if pid == 0:
        counts.publish(1, SLACK + 5)
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert not counts.crowded(0)
    assert counts.crowded(1)
    counts.publish(0, 5)
    assert not counts.crowded(1), "within SLACK of the fewest"


def test_a_crowded_worker_declines_a_waiting_connection_then_takes_it(
    listening: tuple[socket.socket, Path],
) -> None:
    sock, path = listening
    counts = OpenCounts(2)
    counts.publish(0, SLACK + 1)
    listener = SharedListener(fileno=os.dup(sock.fileno()), counts=counts, index=0)
    listener.listen(1)  # leaves the shared socket's queue as it is
    client = socket.socket(socket.AF_UNIX)
    client.connect(str(path))
    began = time.monotonic()
    with pytest.raises(BlockingIOError):
        listener.accept()
    while True:
        try:
            accepted, _ = listener.accept()
            break
        except BlockingIOError:
            assert time.monotonic() - began < 10 * DEFER_S + 1
    assert time.monotonic() - began >= DEFER_S
    accepted.close()
    client.close()


def test_a_worker_with_no_more_than_its_share_takes_a_connection_at_once(
    listening: tuple[socket.socket, Path],
) -> None:
    sock, path = listening
    counts = OpenCounts(2)
    counts.publish(0, SLACK)
    listener = SharedListener(fileno=os.dup(sock.fileno()), counts=counts, index=0)
    clients = [socket.socket(socket.AF_UNIX) for _ in range(2)]
    for client in clients:
        client.connect(str(path))
    accepted, _ = listener.accept()
    accepted.close()
    counts.publish(0, SLACK + 1)
    counts.publish(1, SLACK + 1)  # crowded no more than the other
    accepted, _ = listener.accept()
    accepted.close()
    for client in clients:
        client.close()

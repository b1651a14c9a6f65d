"""The Hasher contract (ports.hasher), for every adapter."""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_image.adapters.sha256_hasher import Sha256Hasher
from slurm_image.ports.hasher import ChangedWhileHashing, Hasher, NotHashable


@pytest.fixture(params=["sha256"])
def hasher(request: pytest.FixtureRequest) -> Hasher:
    return Sha256Hasher(buffer_bytes=4096)


@pytest.fixture(autouse=True)
def never_blocks() -> Iterator[None]:
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError("the hasher blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_every_adapter_is_a_hasher(hasher) -> None:
    assert isinstance(hasher, Hasher)


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 4096 + 17])
def test_digest_file_equals_sha256_of_the_content_across_buffer_edges(
    hasher, tmp_path: Path, size: int
) -> None:
    data = os.urandom(size)
    path = tmp_path / "image.sqsh"
    path.write_bytes(data)
    digest = hasher.digest_file(str(path))
    assert digest.sha256 == hashlib.sha256(data).hexdigest()
    assert digest.size == size
    assert digest.identity.inode == path.stat().st_ino


def test_digest_bytes_is_sha256(hasher) -> None:
    assert hasher.digest_bytes(b"abc") == hashlib.sha256(b"abc").hexdigest()


@pytest.mark.parametrize("plant", ["symlink", "fifo", "directory", "missing"])
def test_digest_file_refuses_what_is_not_a_regular_file(hasher, tmp_path: Path, plant) -> None:
    real = tmp_path / "real.sqsh"
    real.write_bytes(b"x")
    path = tmp_path / "image.sqsh"
    if plant == "symlink":
        path.symlink_to(real)
    elif plant == "fifo":
        os.mkfifo(path)
    elif plant == "directory":
        path.mkdir()
    with pytest.raises(NotHashable):
        hasher.digest_file(str(path))


def test_digest_file_notices_a_file_that_changes_while_hashed(tmp_path: Path) -> None:
    path = tmp_path / "image.sqsh"
    path.write_bytes(b"x" * 10_000)

    hasher = Sha256Hasher(buffer_bytes=4096)
    original = os.readv
    calls = []

    def readv_and_grow(fd: int, buffers: list[bytearray]) -> int:
        if not calls:
            with path.open("ab") as handle:
                handle.write(b"more")
        calls.append(1)
        return original(fd, buffers)

    os.readv = readv_and_grow  # type: ignore[assignment]
    try:
        with pytest.raises(ChangedWhileHashing):
            hasher.digest_file(str(path))
    finally:
        os.readv = original

"""The CredentialsFile port, against every adapter: the user's own private file is read, any
other is refused with an error that names the setting and never shows the content."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurm_image.adapters.credentials_file import LocalCredentialsFile
from slurm_image.adapters.memory import MemoryCredentialsFile
from slurm_image.ports.credentials import CredentialsFile, CredentialsFileError

SECRET = b"machine nvcr.io login u password s3cr3t\n"
OTHER_UID = 65534


@dataclass
class Harness:
    reader: CredentialsFile
    home: str
    put: Callable[..., str]  # put(name, data, mode=0o600, owned=True) -> absolute path


def _local(tmp_path: Path) -> Harness:
    home = tmp_path / "home"
    home.mkdir()

    def put(name: str, data: bytes, mode: int = 0o600, owned: bool = True) -> str:
        path = home / name
        path.write_bytes(data)
        path.chmod(mode)
        if not owned:
            if os.geteuid() != 0:
                pytest.skip("a file owned by someone else needs root to make")
            os.chown(path, OTHER_UID, OTHER_UID)
        return str(path)

    return Harness(LocalCredentialsFile(), str(home), put)


def _memory(tmp_path: Path) -> Harness:
    reader = MemoryCredentialsFile(home="/home/user")

    def put(name: str, data: bytes, mode: int = 0o600, owned: bool = True) -> str:
        path = f"/home/user/{name}"
        reader.files[path] = (data, mode, owned)
        return path

    return Harness(reader, "/home/user", put)


@pytest.fixture(params=["local", "memory"])
def harness(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch) -> Harness:
    built = {"local": _local, "memory": _memory}[request.param](tmp_path)
    monkeypatch.setenv("HOME", built.home)
    return built


def test_adapters_implement_the_port(harness: Harness) -> None:
    assert isinstance(harness.reader, CredentialsFile)


def test_the_users_private_file_is_read(harness: Harness) -> None:
    path = harness.put("netrc", SECRET)
    assert harness.reader.read_credentials_file(path, max_bytes=1024) == SECRET


def test_a_path_under_the_home_directory_is_expanded(harness: Harness) -> None:
    harness.put("netrc", SECRET)
    assert harness.reader.read_credentials_file("~/netrc", max_bytes=1024) == SECRET


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o700 | 0o001])
def test_a_file_open_to_group_or_others_is_refused(harness: Harness, mode: int) -> None:
    path = harness.put("netrc", SECRET, mode=mode)
    with pytest.raises(CredentialsFileError) as caught:
        harness.reader.read_credentials_file(path, max_bytes=1024)
    assert caught.value.field == "enroot.credentials_file"
    assert "group or others" in caught.value.reason
    assert "s3cr3t" not in str(caught.value)


def test_a_file_owned_by_someone_else_is_refused(harness: Harness) -> None:
    path = harness.put("netrc", SECRET, owned=False)
    with pytest.raises(CredentialsFileError, match="is owned by uid"):
        harness.reader.read_credentials_file(path, max_bytes=1024)


def test_a_missing_file_is_refused(harness: Harness) -> None:
    with pytest.raises(CredentialsFileError, match="no file"):
        harness.reader.read_credentials_file(harness.home + "/absent", max_bytes=1024)


def test_a_file_over_the_bound_is_refused(harness: Harness) -> None:
    path = harness.put("netrc", SECRET)
    with pytest.raises(CredentialsFileError, match="larger than"):
        harness.reader.read_credentials_file(path, max_bytes=len(SECRET) - 1)


# -- what only a real filesystem has -----------------------------------------------------------


def test_a_symlink_fifo_or_directory_is_refused_without_blocking(tmp_path: Path) -> None:
    reader = LocalCredentialsFile()
    real = tmp_path / "real"
    real.write_bytes(SECRET)
    real.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(real)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    directory = tmp_path / "dir"
    directory.mkdir(mode=0o700)
    for path, words in ((link, "symlink"), (fifo, "not a regular file"),
                        (directory, "not a regular file")):  # fmt: skip
        with pytest.raises(CredentialsFileError, match=words):
            reader.read_credentials_file(str(path), max_bytes=1024)

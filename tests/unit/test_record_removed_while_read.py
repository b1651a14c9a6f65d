"""A store record removed between the look and the read (an order book closed by another
request's publication, an alias unregistered) is no record, as one never there: never a
verification failure naming a file that does not exist. One replaced while it was read (a
book rewritten by a request joining it) is read again."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_image.adapters.local_store import LocalStore
from slurm_image.adapters.memory import MemoryFilesystem
from slurm_image.adapters.memory.store import MemoryStore
from slurm_image.application.catalog_reader import RECORD_READ_ATTEMPTS, read_record
from slurm_image.application.errors import VerificationFailed
from slurm_image.ports.store import ChangedWhileRead, Store
from slurm_image.ports.workspace import VerifiedRead


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    root = tmp_path / "store"
    root.mkdir(mode=0o700)
    if request.param == "local":
        return LocalStore(str(root))
    filesystem = MemoryFilesystem()
    filesystem.makedirs("/site/store")
    filesystem.chown("/site/store", 1000)
    return MemoryStore("/site/store", filesystem, uid=1000)


@pytest.fixture
def record(store: Store) -> str:
    """The path of a record written whole into ``store``, as an order book is."""
    directory = f"{store.root}/orders"
    path = f"{directory}/img-1.json"
    store.ensure_directory(directory, mode=0o700)
    store.publish_file(path, b"{}", mode=0o600, staging=directory)
    return path


def removed_once_looked_at(
    store: Store, path: str, monkeypatch: pytest.MonkeyPatch
) -> list[str | None]:
    """Make the store remove ``path`` right after it answers what is there."""
    looked: list[str | None] = []
    entry_kind = store.entry_kind

    def look_then_remove(asked: str) -> str | None:
        kind = entry_kind(asked)
        looked.append(kind)
        if asked == path and kind is not None:
            store.remove_file(path)
        return kind

    monkeypatch.setattr(store, "entry_kind", look_then_remove)
    return looked


def test_a_record_removed_after_the_look_reads_as_none(
    store: Store, record: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked = removed_once_looked_at(store, record, monkeypatch)

    assert read_record(store, record) is None
    assert looked == ["file"], "the record was there when looked at"


def test_a_record_there_throughout_is_read(store: Store, record: str) -> None:

    assert read_record(store, record) == b"{}"


def replaced_while_read(store: Store, times: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the store's next ``times`` reads find the record replaced while they read it."""
    reads: list[str] = []
    read_stable = store.read_stable

    def read_or_replaced(path: str, *, max_bytes: int) -> VerifiedRead:
        reads.append(path)
        if len(reads) <= times:
            raise ChangedWhileRead(field=path, rule="changed while it was read")
        return read_stable(path, max_bytes=max_bytes)

    monkeypatch.setattr(store, "read_stable", read_or_replaced)
    return reads


def test_a_record_replaced_while_read_is_read_again(
    store: Store, record: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = replaced_while_read(store, RECORD_READ_ATTEMPTS - 1, monkeypatch)

    assert read_record(store, record) == b"{}"
    assert len(reads) == RECORD_READ_ATTEMPTS


def test_a_record_that_keeps_changing_fails_verification(
    store: Store, record: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    replaced_while_read(store, RECORD_READ_ATTEMPTS, monkeypatch)

    with pytest.raises(VerificationFailed) as failed:
        read_record(store, record)
    assert (failed.value.field, failed.value.rule) == (record, "changed while it was read")

"""A store record removed between the look and the read (an order book closed by another
request's publication, an alias unregistered) is no record, as one never there: never a
verification failure naming a file that does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_image.adapters.local_store import LocalStore
from slurm_image.adapters.memory import MemoryFilesystem
from slurm_image.adapters.memory.store import MemoryStore
from slurm_image.application.catalog_reader import read_record
from slurm_image.ports.store import Store


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
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = f"{store.root}/orders"
    path = f"{directory}/img-1.json"
    store.ensure_directory(directory, mode=0o700)
    store.publish_file(path, b"{}", mode=0o600, staging=directory)
    looked = removed_once_looked_at(store, path, monkeypatch)

    assert read_record(store, path) is None
    assert looked == ["file"], "the record was there when looked at"


def test_a_record_there_throughout_is_read(store: Store) -> None:
    directory = f"{store.root}/orders"
    path = f"{directory}/img-1.json"
    store.ensure_directory(directory, mode=0o700)
    store.publish_file(path, b"{}", mode=0o600, staging=directory)

    assert read_record(store, path) == b"{}"

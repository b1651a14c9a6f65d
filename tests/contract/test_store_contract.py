"""The Store contract (ports.store), asserted identically for every adapter."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from publish_support import during_read, store_for
from slurm_image.ports.store import ChangedWhileRead, Store
from slurm_image.ports.workspace import (
    AlreadyExists,
    NotFound,
    NotRegularFile,
    TooLarge,
    UnsafePath,
    WorkspaceError,
)

GROUP = "daemon"
"""A group of every test host, that the store's owner (root here) may give a directory."""


@pytest.fixture
def store(workspace_harness: Any) -> Store:
    return store_for(workspace_harness)


@pytest.fixture
def area(workspace_harness: Any, store: Store) -> str:
    path = f"{workspace_harness.root}/images/area"
    store.ensure_directory(path, mode=0o700)
    return path


def test_every_adapter_is_a_store(store: Store) -> None:
    assert isinstance(store, Store)


def test_read_stable_and_digest_give_the_bytes_and_their_sha256(
    workspace_harness: Any, store: Store, area: str
) -> None:
    workspace_harness.write(f"{area}/f", b"data")
    assert store.read_stable(f"{area}/f", max_bytes=4).data == b"data"
    digest = store.digest(f"{area}/f")
    assert (digest.sha256, digest.size) == (hashlib.sha256(b"data").hexdigest(), 4)


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_read_stable_and_digest_refuse_what_is_not_a_regular_file(
    workspace_harness: Any, store: Store, area: str, kind: str
) -> None:
    path = f"{area}/f"
    workspace_harness.write(f"{area}/target", b"data")
    if kind == "fifo":
        workspace_harness.mkfifo(path)
    elif kind == "symlink":
        workspace_harness.symlink(f"{area}/target", path)
    else:
        workspace_harness.mkdir(path)
    with pytest.raises(NotRegularFile):
        store.read_stable(path, max_bytes=100)
    with pytest.raises(NotRegularFile):
        store.digest(path)
    assert store.entry_kind(path) == kind


def test_read_stable_checks_the_bound_before_reading(
    workspace_harness: Any, store: Store, area: str
) -> None:
    workspace_harness.write(f"{area}/f", b"12345")
    with pytest.raises(TooLarge):
        store.read_stable(f"{area}/f", max_bytes=4)


def test_a_file_changed_while_read_is_refused(
    workspace_harness: Any, store: Store, area: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = f"{area}/f"
    workspace_harness.write(path, b"data")
    during_read(
        workspace_harness, store, monkeypatch, lambda _: workspace_harness.append(path, b"!")
    )
    with pytest.raises(ChangedWhileRead):
        store.read_stable(path, max_bytes=100)


def test_install_moves_exclusively_with_the_mode_and_never_replaces(
    workspace_harness: Any, store: Store, area: str
) -> None:
    workspace_harness.write(f"{area}/a", b"image")
    workspace_harness.write(f"{area}/taken", b"other")
    digest = store.digest(f"{area}/a")
    with pytest.raises(AlreadyExists):
        store.install(f"{area}/a", f"{area}/taken", expected=digest, mode=0o444)
    assert workspace_harness.read(f"{area}/taken") == b"other"
    identity = store.install(f"{area}/a", f"{area}/b", expected=digest, mode=0o444)
    assert identity == digest.identity
    assert workspace_harness.read(f"{area}/b") == b"image"
    assert workspace_harness.mode(f"{area}/b") == 0o444
    assert store.entry_kind(f"{area}/a") is None
    with pytest.raises(NotFound):
        store.digest(f"{area}/a")


def test_install_refuses_a_file_changed_since_it_was_hashed(
    workspace_harness: Any, store: Store, area: str
) -> None:
    workspace_harness.write(f"{area}/a", b"image")
    digest = store.digest(f"{area}/a")
    workspace_harness.append(f"{area}/a", b"+")
    with pytest.raises(ChangedWhileRead):
        store.install(f"{area}/a", f"{area}/b", expected=digest, mode=0o444)
    assert store.entry_kind(f"{area}/b") is None


def test_set_mode_gives_an_installed_file_exactly_the_mode_and_follows_nothing(
    workspace_harness: Any, store: Store, area: str
) -> None:
    workspace_harness.write(f"{area}/a", b"image")
    digest = store.digest(f"{area}/a")
    store.install(f"{area}/a", f"{area}/b", expected=digest, mode=0o440)
    store.set_mode(f"{area}/b", mode=0o444)
    assert workspace_harness.mode(f"{area}/b") == 0o444
    assert workspace_harness.read(f"{area}/b") == b"image"
    with pytest.raises(NotFound):
        store.set_mode(f"{area}/missing", mode=0o444)


def test_publish_file_replaces_atomically_and_leaves_no_temporary(
    workspace_harness: Any, store: Store, area: str
) -> None:
    staging = f"{workspace_harness.root}/images/staging"
    store.ensure_directory(staging, mode=0o700)
    store.publish_file(f"{area}/r.json", b"one", mode=0o644, staging=staging)
    store.publish_file(f"{area}/r.json", b"two", mode=0o644, staging=staging)
    assert workspace_harness.read(f"{area}/r.json") == b"two"
    assert workspace_harness.mode(f"{area}/r.json") == 0o644
    assert store.list_directory(staging) == []
    assert store.list_directory(area) == ["r.json"]


def test_file_sizes_lists_the_regular_files_with_their_sizes_and_follows_nothing(
    workspace_harness: Any, store: Store, area: str
) -> None:
    workspace_harness.write(f"{area}/a.sqsh", b"12345")
    workspace_harness.write(f"{area}/empty", b"")
    workspace_harness.write(f"{workspace_harness.root}/images/outside", b"0123456789")
    workspace_harness.symlink(f"{workspace_harness.root}/images/outside", f"{area}/link")
    workspace_harness.mkfifo(f"{area}/fifo")
    workspace_harness.mkdir(f"{area}/directory")
    workspace_harness.write(f"{area}/directory/inner", b"123")
    assert dict(store.file_sizes(area)) == {"a.sqsh": 5, "empty": 0}


def test_file_sizes_of_a_missing_or_unsafe_directory_raises(
    workspace_harness: Any, store: Store, area: str
) -> None:
    with pytest.raises(NotFound):
        store.file_sizes(f"{area}/missing")
    workspace_harness.mkdir(f"{workspace_harness.root}/images/elsewhere")
    workspace_harness.symlink(f"{workspace_harness.root}/images/elsewhere", f"{area}/linked")
    with pytest.raises(UnsafePath):
        store.file_sizes(f"{area}/linked")


def test_ensure_directory_opens_the_way_for_readers(workspace_harness: Any, store: Store) -> None:
    images = f"{workspace_harness.root}/images"
    store.ensure_directory(f"{images}/.tmp", mode=0o700)
    assert workspace_harness.mode(images) == 0o700
    store.ensure_directory(f"{images}/aliases", mode=0o755)
    assert workspace_harness.mode(images) == 0o755
    assert workspace_harness.mode(f"{images}/aliases") == 0o755
    assert workspace_harness.mode(f"{images}/.tmp") == 0o700


def test_set_link_swaps_a_symlink_in_place_and_read_link_names_its_target(
    workspace_harness: Any, store: Store, area: str
) -> None:
    link = f"{area}/app.sqsh"
    assert store.read_link(link) is None
    store.set_link(link, "../artifacts/one.sqsh")
    assert workspace_harness.readlink(link) == "../artifacts/one.sqsh"
    store.set_link(link, "../artifacts/two.sqsh")
    assert store.read_link(link) == "../artifacts/two.sqsh"
    assert store.list_directory(area) == ["app.sqsh"]  # the fresh link was renamed over it
    workspace_harness.write(f"{area}/file", b"x")
    with pytest.raises(NotRegularFile):
        store.read_link(f"{area}/file")


def test_set_link_refuses_a_directory_and_leaves_nothing_beside_it(
    workspace_harness: Any, store: Store, area: str
) -> None:
    workspace_harness.mkdir(f"{area}/app.sqsh")
    with pytest.raises(WorkspaceError, match="is a directory"):
        store.set_link(f"{area}/app.sqsh", "../artifacts/one.sqsh")
    assert store.list_directory(area) == ["app.sqsh"]
    assert workspace_harness.kind_of(f"{area}/app.sqsh") == "directory"


def test_ensure_directory_with_a_group_gives_it_that_group_and_exactly_the_mode(
    workspace_harness: Any,
) -> None:
    store = store_for(workspace_harness, frozenset({GROUP}))
    shared = f"{workspace_harness.root}/images/shared"
    store.ensure_directory(shared, mode=0o755)
    path = f"{shared}/{GROUP}"
    store.ensure_directory(path, mode=0o750, group=GROUP)
    assert workspace_harness.group_of(path) == GROUP
    assert workspace_harness.mode(path) == 0o750
    assert workspace_harness.mode(shared) == 0o755
    with pytest.raises(WorkspaceError, match="does not exist here"):
        store.ensure_directory(f"{shared}/other", mode=0o750, group="no-such-group-here")


def test_each_bump_grows_the_stamp_by_one_and_a_missing_one_is_none(
    workspace_harness: Any, store: Store, area: str
) -> None:
    path = f"{area}/changes"
    assert store.stamp(path) is None
    store.bump(path)
    first = store.stamp(path)
    store.bump(path)
    store.bump(path)
    second = store.stamp(path)
    assert first is not None and second is not None
    assert (first.size, second.size) == (1, 3)
    assert (first.device, first.inode) == (second.device, second.inode)
    assert workspace_harness.mode(path) == 0o644


def test_a_stamp_is_none_for_what_is_not_a_regular_file_and_bump_follows_no_symlink(
    workspace_harness: Any, store: Store, area: str
) -> None:
    workspace_harness.mkdir(f"{area}/directory")
    assert store.stamp(f"{area}/directory") is None
    workspace_harness.write(f"{area}/target", b"")
    workspace_harness.symlink(f"{area}/target", f"{area}/link")
    assert store.stamp(f"{area}/link") is None
    with pytest.raises((NotRegularFile, UnsafePath)):
        store.bump(f"{area}/link")
    assert workspace_harness.read(f"{area}/target") == b""

"""``gc`` bounds the layer cache (README, "The layer cache") on both Workspace adapters: blobs
last used before the age bound go, then the oldest-used until the rest fit the size bound;
downloads never finished and registry tokens only once older than the age bound; nothing but
regular files named as Enroot names them, nothing followed, nothing in a cache another user
could change; ``--dry-run`` lists and removes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from publish_support import PublishLab
from slurm_image.application.maintain import Maintain, Removed
from slurm_image.domain.layer_cache import CacheBound

DAY = 24 * 3600.0
WEEK = timedelta(days=7)


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def blob(n: int) -> str:
    return f"{n:064x}"


class Cache:
    """A layer cache below the workspace, filled through the harness."""

    def __init__(self, lab: PublishLab) -> None:
        self.lab = lab
        self.harness = lab.harness
        self.path = f"{self.harness.root}/images/layer-cache"
        self.now = lab.clock.now().timestamp()
        self.harness.makedirs(self.path)

    def put(self, name: str, size: int, days_ago: float) -> str:
        path = f"{self.path}/{name}"
        self.harness.write(path, b"x" * size)
        self.harness.set_used(path, self.now - days_ago * DAY)
        return path

    def names(self) -> list[str]:
        return [entry.name for entry in self.harness.workspace.cache_entries(self.path)]

    def gc(self, max_bytes: int = 1 << 40, *, dry_run: bool = False) -> list[Removed]:
        maintain = Maintain(
            self.lab.store, self.lab.locks, self.lab.observe, self.lab.clock, lock_timeout_s=5
        )
        bound = CacheBound(self.path, max_bytes)
        removed = maintain.gc(older_than=WEEK, dry_run=dry_run, layer_cache=bound)
        return [item for item in removed if item.path.startswith(self.path + "/")]


def removed_names(cache: Cache, removed: list[Removed]) -> list[tuple[str, str]]:
    return sorted((item.kind, item.path.removeprefix(cache.path + "/")) for item in removed)


def test_blobs_unused_for_longer_than_the_age_bound_go_and_recent_ones_stay(
    lab: PublishLab,
) -> None:
    cache = Cache(lab)
    cache.put(blob(1), 10, days_ago=8)
    cache.put(blob(2), 10, days_ago=1)

    removed = cache.gc()

    assert removed_names(cache, removed) == [("layer", blob(1))]
    assert cache.names() == [blob(2)]


def test_the_size_bound_removes_the_oldest_used_blobs_first(lab: PublishLab) -> None:
    cache = Cache(lab)
    cache.put(blob(1), 100, days_ago=3)
    cache.put(blob(2), 100, days_ago=1)
    cache.put(blob(3), 100, days_ago=2)

    removed = cache.gc(max_bytes=150)

    assert removed_names(cache, removed) == [("layer", blob(1)), ("layer", blob(3))]
    assert cache.names() == [blob(2)]


def test_a_dry_run_lists_what_would_go_and_removes_nothing(lab: PublishLab) -> None:
    cache = Cache(lab)
    cache.put(blob(1), 100, days_ago=30)
    cache.put(blob(2), 100, days_ago=0)

    removed = cache.gc(max_bytes=150, dry_run=True)

    assert removed_names(cache, removed) == [("layer", blob(1))]
    assert cache.names() == [blob(1), blob(2)]


def test_downloads_and_tokens_of_a_running_import_stay_until_past_the_age_bound(
    lab: PublishLab,
) -> None:
    cache = Cache(lab)
    cache.put(f"{blob(1)}.Abcdefghij", 5, days_ago=0)
    cache.put(f"{blob(2)}.Klmnopqrst", 5, days_ago=9)
    cache.harness.mkdir(f"{cache.path}/.tokens.1000")
    cache.put(".tokens.1000/registry.example.org.4242", 5, days_ago=0)
    cache.put(".tokens.1000/registry.example.org.4243", 5, days_ago=9)

    removed = cache.gc(max_bytes=1)

    assert removed_names(cache, removed) == [
        ("layer-temporary", f"{blob(2)}.Klmnopqrst"),
        ("token", ".tokens.1000/registry.example.org.4243"),
    ]
    assert f"{blob(1)}.Abcdefghij" in cache.names()
    assert ".tokens.1000/registry.example.org.4242" in cache.names()


def test_only_regular_files_named_as_enroot_names_blobs_are_touched(lab: PublishLab) -> None:
    cache = Cache(lab)
    elsewhere = f"{cache.harness.root}/elsewhere"
    cache.harness.mkdir(elsewhere)
    target = f"{elsewhere}/{blob(9)}"
    cache.harness.write(target, b"keep")
    cache.harness.symlink(target, f"{cache.path}/{blob(1)}")
    cache.harness.mkdir(f"{cache.path}/{blob(2)}")
    cache.put("notes.txt", 5, days_ago=100)
    upper = "ABC" + blob(3)[3:]
    cache.put(upper, 5, days_ago=100)

    removed = cache.gc(max_bytes=1)

    assert removed == []
    assert cache.harness.read(target) == b"keep"
    assert cache.names() == sorted([upper, blob(1), blob(2), "notes.txt"])


def test_a_cache_another_user_could_change_is_left_alone(lab: PublishLab) -> None:
    cache = Cache(lab)
    cache.put(blob(1), 10, days_ago=100)
    cache.harness.chmod(cache.path, 0o1770)  # sticky: still anyone in the group may add

    assert cache.harness.workspace.cache_problem(cache.path) == (
        f"{cache.path} is writable by group or others, who could plant a layer in it"
    )
    assert cache.gc() == []
    cache.harness.chmod(cache.path, 0o700)
    assert cache.names() == [blob(1)]


def test_a_missing_cache_is_nothing_to_do(lab: PublishLab) -> None:
    cache = Cache(lab)
    cache.path += "-on-a-node"

    assert cache.gc() == []
    assert cache.harness.workspace.cache_problem(cache.path) is None


def test_a_symlinked_cache_or_parent_of_another_user_is_a_problem(lab: PublishLab) -> None:
    cache = Cache(lab)
    link = f"{cache.harness.root}/link"
    cache.harness.symlink(cache.path, link)
    workspace = cache.harness.workspace

    assert workspace.cache_problem(link) == f"{link} is a symlink, not a directory"
    parent = f"{cache.harness.root}/parent-link"
    cache.harness.symlink(f"{cache.harness.root}/images", parent)
    assert workspace.cache_problem(f"{parent}/layer-cache") is None
    cache.harness.chown_link(parent, 4242)
    assert workspace.cache_problem(f"{parent}/layer-cache") == (
        f"{parent} is a symlink owned by uid 4242, neither by uid {cache.harness.uid} nor by root"
    )


def test_removing_refuses_names_that_are_no_entry_of_the_cache(lab: PublishLab) -> None:
    cache = Cache(lab)
    workspace = cache.harness.workspace
    for name in ("../x", "a/b", ".tokens.1/../x", ""):
        with pytest.raises(Exception, match="no entry of the layer cache"):
            workspace.remove_cache_file(cache.path, name)

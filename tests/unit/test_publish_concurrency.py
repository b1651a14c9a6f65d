"""Concurrent publishers in separate processes over one real store (fcntl locks)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from typing import Any

import pytest

from publish_support import SQSH_BYTES, PublishLab
from slurm_image.adapters.fcntl_lock import FcntlLocks
from slurm_image.adapters.local_store import LocalStore
from slurm_image.application.errors import AliasExists
from slurm_image.application.observe import Observe
from slurm_image.application.publish import Publish

IDS = [f"img-{n:032x}" for n in range(1, 7)]
WON, LOST = 10, 11


def _publish(root: str, lifecycle_id: str, lab: PublishLab, start: Any) -> None:
    store = LocalStore(root)
    publish = Publish(store, FcntlLocks(store), Observe(store, lab.scheduler), lab.clock)
    start.wait()
    try:
        publish(lifecycle_id)
    except AliasExists:
        os._exit(LOST)
    os._exit(WON)


def _race(lab: PublishLab, ids: list[str]) -> list[int | None]:
    context = multiprocessing.get_context("fork")
    start = context.Event()
    children = [
        context.Process(target=_publish, args=(lab.harness.root, i, lab, start)) for i in ids
    ]
    for child in children:
        child.start()
    start.set()
    for child in children:
        child.join(60)
    return [child.exitcode for child in children]


@pytest.fixture
def local_lab(
    world_readable_tmp: Any, profile_for: Any, runtime_files: Any, local_harness: Any
) -> PublishLab:
    return PublishLab(local_harness(world_readable_tmp), profile_for, runtime_files)


def test_publishers_of_one_alias_end_with_one_consistent_winner(local_lab: PublishLab) -> None:
    lab = local_lab
    images = {i: SQSH_BYTES + i.encode() for i in IDS[:4]}
    for lifecycle_id, data in images.items():
        lab.finished(lifecycle_id, name="race", sqsh=data)
    codes = _race(lab, list(images))
    assert sorted(codes) == [WON, LOST, LOST, LOST]
    winner = list(images)[codes.index(WON)]
    record = lab.alias_entry("race")
    assert record.lifecycle_id == winner
    assert lab.harness.read(record.path) == images[winner]
    assert hashlib.sha256(lab.harness.read(record.path)).hexdigest() == record.sqsh_sha256
    assert lab.harness.listing().count(lab.layout.alias("race")) == 1
    assert lab.store.list_directory(lab.layout.artifacts) == [f"{record.sqsh_sha256}.sqsh"]
    assert lab.store.list_directory(lab.layout.markers) == []
    assert lab.store.list_directory(lab.layout.publishing) == []


def test_two_aliases_of_one_artifact_published_at_once_keep_both_bindings(
    local_lab: PublishLab,
) -> None:
    lab = local_lab
    lab.finished(IDS[0], name="one")
    lab.finished(IDS[1], name="two")
    assert _race(lab, IDS[:2]) == [WON, WON]
    one, two = (lab.alias_entry(n) for n in ("one", "two"))
    assert one.path == two.path and lab.harness.read(one.path) == SQSH_BYTES
    assert lab.store.list_directory(lab.layout.artifacts) == [f"{one.sqsh_sha256}.sqsh"]


def test_an_artifact_linked_by_another_publisher_while_it_is_hashed_is_hashed_again(
    local_lab: PublishLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = local_lab
    lab.finished(IDS[0], name="one")
    artifact = lab.publish(IDS[0]).record.path
    lab.finished(IDS[1], name="two")
    original_readv = os.readv
    disturbed: list[str] = []

    def readv(fd: int, buffers: Any) -> int:
        count = original_readv(fd, buffers)
        if not disturbed and os.readlink(f"/proc/self/fd/{fd}") == artifact:
            disturbed.append(artifact)
            os.link(artifact, f"{artifact}.peer")  # a peer's candidate name, then its unlink
            os.unlink(f"{artifact}.peer")
        return count

    monkeypatch.setattr(os, "readv", readv)
    two = lab.publish(IDS[1]).record
    assert disturbed == [artifact]
    assert two.path == artifact and lab.harness.read(artifact) == SQSH_BYTES
    assert lab.alias_entry("one").path == artifact

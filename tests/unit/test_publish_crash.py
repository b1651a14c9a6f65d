"""The crash matrix: publication stopped after each step leaves the old alias or the new one,
never a torn one, and the next publisher finishes (or rolls back) what the marker describes.

In-process with both stores (the step raises), and for the local store by SIGKILL of a forked
publisher, with a fresh publisher in another process afterwards.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
from typing import Any

import pytest

from publish_support import SQSH_BYTES, PublishLab
from slurm_image.adapters.fcntl_lock import FcntlLocks
from slurm_image.adapters.local_store import LocalStore
from slurm_image.application.publish import CHECKPOINTS
from slurm_image.domain.publication import AliasRecord

OLD, NEW = "img-" + "0" * 31 + "1", "img-" + "0" * 31 + "2"
NEW_BYTES = SQSH_BYTES + b" new"


class Crash(BaseException):
    """Stands for the process dying: nothing below the step runs, no handler cleans up."""


def _crash_at(step: str) -> Any:
    def checkpoint(reached: str) -> None:
        if reached == step:
            raise Crash(step)

    return checkpoint


def _alias(lab: PublishLab) -> AliasRecord | None:
    path = lab.layout.alias("app")
    return lab.alias_entry("app") if lab.harness.exists(path) else None


def _check_not_torn(lab: PublishLab, old: AliasRecord) -> None:
    current = _alias(lab)
    assert current is not None
    assert current.lifecycle_id in (OLD, NEW)
    if current.lifecycle_id == OLD:
        assert current == old
    assert hashlib.sha256(lab.harness.read(current.path)).hexdigest() == current.sqsh_sha256


def _check_finished(lab: PublishLab, old: AliasRecord) -> None:
    current = _alias(lab)
    assert current is not None and current.lifecycle_id == NEW
    assert lab.harness.read(current.path) == NEW_BYTES
    assert current.path == lab.layout.artifact(hashlib.sha256(NEW_BYTES).hexdigest())
    assert lab.harness.read(old.path) == SQSH_BYTES  # the replaced artifact stays
    assert not lab.harness.exists(lab.layout.marker("app"))
    leftovers = [p for p in lab.store_listing() if p.endswith(".tmp") and p != lab.layout.tmp]
    assert leftovers == []


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    lab = PublishLab(workspace_harness, profile_for, runtime_files)
    lab.finished(OLD)
    lab.publish(OLD)
    lab.finished(NEW, sqsh=NEW_BYTES)
    return lab


@pytest.mark.parametrize("step", CHECKPOINTS)
def test_a_publication_interrupted_after_each_step_is_finished_by_the_next(
    lab: PublishLab, step: str
) -> None:
    old = _alias(lab)
    assert old is not None
    with pytest.raises(Crash):
        lab.publisher(checkpoint=_crash_at(step))(NEW, replace=True)
    _check_not_torn(lab, old)
    again = lab.publish(NEW, replace=True)
    assert again.record.lifecycle_id == NEW
    _check_finished(lab, old)


def _publish_and_die(root: str, lifecycle_id: str, step: str, lab: PublishLab) -> None:
    def die(reached: str) -> None:
        if reached == step:
            os.kill(os.getpid(), signal.SIGKILL)

    store = LocalStore(root)
    from slurm_image.application.observe import Observe
    from slurm_image.application.publish import Publish

    publish = Publish(
        store, FcntlLocks(store), Observe(store, lab.scheduler), lab.clock, checkpoint=die
    )
    publish(lifecycle_id, replace=True)
    os._exit(0)


@pytest.mark.parametrize("step", CHECKPOINTS)
def test_sigkill_after_each_step_then_a_fresh_process_recovers(
    world_readable_tmp: Any, profile_for: Any, runtime_files: Any, local_harness: Any, step: str
) -> None:

    lab = PublishLab(local_harness(world_readable_tmp), profile_for, runtime_files)
    lab.finished(OLD)
    old = lab.publish(OLD).record
    lab.finished(NEW, sqsh=NEW_BYTES)
    child = multiprocessing.get_context("fork").Process(
        target=_publish_and_die, args=(lab.harness.root, NEW, step, lab)
    )
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    _check_not_torn(lab, old)
    fresh = PublishLab(lab.harness, profile_for, runtime_files, scheduler=lab.scheduler)
    assert fresh.publish(NEW, replace=True).record.lifecycle_id == NEW
    _check_finished(fresh, old)


def test_a_temporary_record_left_by_a_crash_is_removed_by_the_next_publisher(
    lab: PublishLab,
) -> None:
    leftover = f"{lab.layout.publishing}/app.json.0123456789abcdef.tmp"
    neighbour = f"{lab.layout.publishing}/app.json.json.0123456789abcdef.tmp"
    lab.harness.write(leftover, b"half")
    lab.harness.write(neighbour, b"another alias's")
    lab.publish(NEW, replace=True)
    assert not lab.harness.exists(leftover)
    assert lab.harness.exists(neighbour)  # the alias "app.json" is not ours to clean

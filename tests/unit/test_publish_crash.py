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
from datetime import timedelta
from typing import Any

import pytest

from publish_support import SQSH_BYTES, PublishLab
from slurm_image.adapters.fcntl_lock import FcntlLocks
from slurm_image.adapters.local_history import LocalHistory
from slurm_image.adapters.local_store import LocalStore
from slurm_image.application.history import Actor, RecordHistory
from slurm_image.application.maintain import Maintain
from slurm_image.application.observe import Observe
from slurm_image.application.publish import CHECKPOINTS, Publish
from slurm_image.domain.publication import AliasRecord

OLD, NEW = "img-" + "0" * 31 + "1", "img-" + "0" * 31 + "2"
PUBLISHER = Actor(user="ada", uid=1000, host="login1")
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


def _publish_recording_and_die(root: str, lifecycle_id: str, step: str, lab: PublishLab) -> None:
    def die(reached: str) -> None:
        if reached == step:
            os.kill(os.getpid(), signal.SIGKILL)

    store = LocalStore(root)
    locks = FcntlLocks(store)
    history = RecordHistory(LocalHistory(store, locks), lab.clock, PUBLISHER)
    publish = Publish(
        store, locks, Observe(store, lab.scheduler), lab.clock, checkpoint=die, history=history
    )
    publish(lifecycle_id, replace=True)
    os._exit(0)


@pytest.mark.parametrize("step", ["marker", "artifact", "source", "alias"])
def test_a_publisher_killed_after_its_marker_is_recorded_once_by_the_process_that_recovers(
    world_readable_tmp: Any, profile_for: Any, runtime_files: Any, local_harness: Any, step: str
) -> None:
    """SIGKILL after the marker and before the publisher's own event; then a command that
    recovers it (here ``gc``, in another process, as another user): one ``replaced`` event,
    ``recovered``, naming the killed publisher."""
    lab = PublishLab(local_harness(world_readable_tmp), profile_for, runtime_files)
    lab.finished(OLD)
    old = lab.publish(OLD).record
    lab.finished(NEW, sqsh=NEW_BYTES)
    child = multiprocessing.get_context("fork").Process(
        target=_publish_recording_and_die, args=(lab.harness.root, NEW, step, lab)
    )
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    store = LocalStore(lab.harness.root)
    locks = FcntlLocks(store)
    history = LocalHistory(store, locks)
    assert history.read().events == ()
    other = Actor(user="bob", uid=1001, host="login2")
    maintain = Maintain(
        store,
        locks,
        Observe(store, lab.scheduler),
        lab.clock,
        history=RecordHistory(history, lab.clock, other),
    )
    maintain.gc(older_than=timedelta(days=1))
    maintain.gc(older_than=timedelta(days=1))
    events = history.read().events
    (event,) = (e for e in events if e.event in ("published", "replaced"))
    assert (event.event, event.recovered, event.lifecycle_id) == ("replaced", True, NEW)
    assert (event.user, event.uid, event.host) == (PUBLISHER.user, PUBLISHER.uid, PUBLISHER.host)
    assert (event.artifact, event.previous_artifact) == (
        hashlib.sha256(NEW_BYTES).hexdigest(),
        old.sqsh_sha256,
    )
    assert _alias(lab) is not None and _alias(lab).lifecycle_id == NEW  # type: ignore[union-attr]
    assert not lab.harness.exists(lab.layout.marker("app"))
    assert {e.event for e in events} <= {"replaced", "gc_artifact", "gc_removed"}  # the old one


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

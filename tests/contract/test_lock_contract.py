"""The Locks contract (ports.lock), asserted identically for every adapter."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from publish_support import locks_for, store_for
from slurm_image.ports.lock import Locks, LockTimeout


@pytest.fixture
def locks(workspace_harness: Any) -> Locks:
    return locks_for(workspace_harness, store_for(workspace_harness))


def _in_thread(act: Any) -> BaseException | None:
    outcome: list[BaseException | None] = [None]

    def run() -> None:
        try:
            act()
        except BaseException as error:
            outcome[0] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    return outcome[0]


def test_every_adapter_is_a_locks(locks: Locks) -> None:
    assert isinstance(locks, Locks)


def test_an_exclusive_lock_held_elsewhere_times_out_with_its_name(locks: Locks) -> None:
    def second() -> None:
        with locks.exclusive("alias.x", timeout_s=0.2):
            pass

    with locks.exclusive("alias.x", timeout_s=1):
        error = _in_thread(second)
    assert isinstance(error, LockTimeout)
    assert error.field == "lock alias.x"
    assert _in_thread(second) is None  # released


def test_different_names_never_wait_on_each_other(locks: Locks) -> None:
    def other() -> None:
        with locks.exclusive("alias.y", timeout_s=0.2):
            pass

    with locks.exclusive("alias.x", timeout_s=1):
        assert _in_thread(other) is None


def test_shared_holders_coexist_and_keep_an_exclusive_holder_out(locks: Locks) -> None:
    def shared() -> None:
        with locks.shared("store", timeout_s=0.2):
            pass

    def exclusive() -> None:
        with locks.exclusive("store", timeout_s=0.2):
            pass

    with locks.shared("store", timeout_s=1):
        assert _in_thread(shared) is None
        assert isinstance(_in_thread(exclusive), LockTimeout)
    with locks.exclusive("store", timeout_s=1):
        assert isinstance(_in_thread(shared), LockTimeout)
    assert _in_thread(exclusive) is None

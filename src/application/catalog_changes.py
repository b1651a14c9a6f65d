"""How a reader learns that the published aliases changed: every change of ``aliases/`` (a
publication, a replacement, a recovery, an unregistration) appends one byte to the store's
``aliases.begun`` before it and one to ``aliases.done`` after it (``StoreLayout``), whichever
process makes it. A reader that saw both of the same size, ``aliases.done`` first, knows no change
was under way then; while ``aliases.begun`` keeps that size, nothing changed since.

A process killed inside a change leaves ``aliases.begun`` ahead: readers then keep nothing and
read every alias as it is, until ``settle_changes`` (under the store lock held alone, so no change
is under way) brings ``aliases.done`` level again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from slurm_image.domain.store_layout import StoreLayout
from slurm_image.ports.store import ChangeStamp, Store


@contextmanager
def changing(store: Store, layout: StoreLayout) -> Iterator[None]:
    """Count a change of ``aliases/`` made while the block runs (see the module docstring)."""
    store.bump(layout.aliases_begun)
    try:
        yield
    finally:
        store.bump(layout.aliases_done)


def quiet_stamp(store: Store, layout: StoreLayout) -> ChangeStamp | None:
    """``aliases.begun`` as it is now when no change of ``aliases/`` was under way (its size is
    ``aliases.done``'s, read first), else None (a change is under way, one was interrupted, or
    the store has never counted one)."""
    done = store.stamp(layout.aliases_done)
    begun = store.stamp(layout.aliases_begun)
    if done is None or begun is None or done.size != begun.size:
        return None
    return begun


def settle_changes(store: Store, layout: StoreLayout) -> int:
    """Level ``aliases.done`` with ``aliases.begun`` after changes a killed process left
    unfinished, and count them. The caller holds the store lock alone (no change is under
    way), or the readers would trust a change not made yet."""
    begun = store.stamp(layout.aliases_begun)
    done = store.stamp(layout.aliases_done)
    missing = (begun.size if begun is not None else 0) - (done.size if done is not None else 0)
    for _ in range(missing):
        store.bump(layout.aliases_done)
    return max(missing, 0)

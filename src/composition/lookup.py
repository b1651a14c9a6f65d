"""The catalog reads of the command line (``show NAME`` and ``list``), which sites run at every
job launch, and ``history``, which whoever may read the store may run: the selected profile's
``workspace_root`` (``profile_loader.store_root``), the store's read-only adapter (the factory
of the container's ``store_reader`` provider) and the catalog reader or the history's reader
(``composition.factories``). Nothing here loads dependency-injector (it imports asyncio) or,
for ``show`` and ``list``, the model library; ``show --verify`` and the Python API go through
the container and validate the whole profile and the record."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from slurm_image.composition import factories
from slurm_image.composition.profile_loader import profile_path, store_root

if TYPE_CHECKING:
    from slurm_image.application.catalog_reader import CatalogReader
    from slurm_image.application.read_history import FollowHistory, ReadHistory


def catalog_reader(
    profile: str | None, *, cluster: str | None, environ: Mapping[str, str] | None = None
) -> CatalogReader:
    env = os.environ if environ is None else environ
    root = store_root(profile_path(profile, env), cluster=cluster, environ=env)
    return factories.catalog_reader(factories.store_reader(root))


def history_reader(
    profile: str | None, *, cluster: str | None, environ: Mapping[str, str] | None = None
) -> ReadHistory:
    """The store's history as anyone who may read the store reads it: no lock, no scheduler."""
    env = os.environ if environ is None else environ
    root = store_root(profile_path(profile, env), cluster=cluster, environ=env)
    return factories.read_history(factories.history(factories.store_reader(root)))


def history_follower(
    profile: str | None, *, cluster: str | None, environ: Mapping[str, str] | None = None
) -> FollowHistory:
    """The store's history as it grows (``history --follow``), read as ``history_reader``."""
    env = os.environ if environ is None else environ
    root = store_root(profile_path(profile, env), cluster=cluster, environ=env)
    return factories.follow_history(factories.history(factories.store_reader(root)))

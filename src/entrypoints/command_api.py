"""What a command calls, built from the global options: the Python API (``Lifecycles``) or, for
``show`` and ``list``, the catalog reader alone, for ``history`` the history's reader alone
(``entrypoints.lookup``). Each is imported when
first asked for, so that a command loads only its own side."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurm_image.application.catalog_reader import CatalogReader
    from slurm_image.application.read_history import FollowHistory, ReadHistory
    from slurm_image.entrypoints.api import Lifecycles
    from slurm_image.entrypoints.arguments import Options


def catalog_reader(options: Options) -> CatalogReader:
    from slurm_image.entrypoints.lookup import catalog_reader

    return catalog_reader(options.profile, cluster=options.cluster)


def history_reader(options: Options) -> ReadHistory:
    from slurm_image.entrypoints.lookup import history_reader

    return history_reader(options.profile, cluster=options.cluster)


def history_follower(options: Options) -> FollowHistory:
    from slurm_image.entrypoints.lookup import history_follower

    return history_follower(options.profile, cluster=options.cluster)


def lifecycles(options: Options) -> Lifecycles:
    from slurm_image.entrypoints.api import Lifecycles

    return Lifecycles.from_profile(options.profile, cluster=options.cluster)

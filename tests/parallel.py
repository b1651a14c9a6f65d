"""How the suite shares the machine when pytest-xdist runs it on several workers (scripts/test).

- Every test of one local cluster runs on one worker, one at a time (``xdist_group`` by the
  cluster's series, with ``--dist loadgroup``): a test may stop that cluster's controller or
  count the jobs on its node, and the three clusters still run side by side.
- Machine-wide identities a test checks for leftovers are the worker's own: the ordinary
  account a job runs as (``ordinary_uid``) and the name of the survivor processes
  (``survivors.NAME``), so one worker's running job is never another worker's leftover.
"""

from __future__ import annotations

import os

import pytest

from clusters import CLUSTERS

DEFAULT_CLUSTER = "22.05"
"""The cluster of the ``local_slurm`` fixture outside the integration suite (tests/conftest.py)."""


def worker_index() -> int:
    """0 outside xdist, else the worker's number (``gw3``: 3)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0


def ordinary_uid(base: int = 4242) -> int:
    """An id no account on the test machine has, one per worker."""
    return base + worker_index()


def _series_in(value: object) -> str | None:
    if isinstance(value, str):
        return value if value in CLUSTERS else None
    if isinstance(value, tuple | list):
        for part in value:
            if (series := _series_in(part)) is not None:
                return series
    return None


def cluster_of(item: pytest.Item) -> str | None:
    """The series of the local cluster ``item`` runs against, or None: a parameter naming a
    series (alone or in a tuple), else the ``local_slurm`` fixture's default cluster."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for value in callspec.params.values():
            if (series := _series_in(value)) is not None:
                return series
    if "local_slurm" in getattr(item, "fixturenames", ()):
        return DEFAULT_CLUSTER
    return None


def group_by_cluster(items: list[pytest.Item]) -> None:
    """Mark each cluster's tests as one xdist group, and put grouped tests first so that the
    scheduler hands each cluster to a worker of its own before anything else."""
    grouped = []
    for item in items:
        series = cluster_of(item)
        if series is not None:
            item.add_marker(pytest.mark.xdist_group(f"slurm-{series}"))
            grouped.append(item)
    first = {id(item) for item in grouped}
    items[:] = grouped + [item for item in items if id(item) not in first]

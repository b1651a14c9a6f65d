"""How the suite shares the machine when pytest-xdist runs it on several workers (scripts/test).

- Every test of one local cluster runs on one worker, one at a time: ``ClusterScheduling``
  hands a cluster's tests to a worker as one unit of work, found by the ``slurm-SERIES`` in the
  test's id, which every cluster test carries (``check_cluster_ids`` refuses one that does not).
  Such tests are collected first, so that each cluster gets a worker of its own before anything
  else is scheduled. A test may then stop its cluster's controller, or count the jobs of its
  node, without disturbing another test, and the three clusters still run side by side.
- Machine-wide identities a test checks for leftovers are the worker's own: the ordinary
  account a job runs as (``ordinary_uid``) and the name of the survivor processes
  (``survivors.NAME``), so one worker's running job is never another worker's leftover.
"""

from __future__ import annotations

import os
import re

import pytest

from clusters import CLUSTERS

DEFAULT_CLUSTER = "22.05"
"""The cluster of the ``local_slurm`` fixture outside the integration suite (tests/conftest.py)."""

_SERIES_IN_ID = re.compile(
    r"\[(?:[^\]]*-)?slurm-(" + "|".join(map(re.escape, CLUSTERS)) + r")(?:-[^\]]*)?\]$"
)


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


def cluster_in_id(nodeid: str) -> str | None:
    """The series a test id names as ``slurm-SERIES`` among its parameters, or None."""
    match = _SERIES_IN_ID.search(nodeid)
    return match[1] if match else None


def check_cluster_ids(items: list[pytest.Item]) -> None:
    """Refuse a test of a cluster whose id does not name it: it would escape that cluster's
    worker and run beside tests that stop its controller."""
    for item in items:
        series = cluster_of(item) if item.get_closest_marker("slurm") else None
        if series is not None and cluster_in_id(item.nodeid) != series:
            raise pytest.UsageError(
                f"{item.nodeid} runs on the Slurm {series} cluster: its id must name "
                f"slurm-{series} (a parameter id), so that it runs on that cluster's worker"
            )


def clusters_first(items: list[pytest.Item]) -> None:
    """Put the tests of clusters first, in their order, then the others."""
    ours = [item for item in items if cluster_in_id(item.nodeid) is not None]
    first = {id(item) for item in ours}
    items[:] = ours + [item for item in items if id(item) not in first]


def make_scheduler(config: pytest.Config, log: object) -> object | None:
    """xdist's load scheduling, but with each cluster's tests as one unit (plain ``-n N``)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ClusterScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            series = cluster_in_id(nodeid)
            return nodeid if series is None else f"slurm-{series}"

    return ClusterScheduling(config, log)

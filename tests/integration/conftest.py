"""The integration suite runs against every local cluster (docs/local-slurm.md).

``local_slurm`` here is parametrized over Slurm 22.05, 24.11 and 26.05 (tests/clusters.py).
Integration tests import their other helpers (fault_proxy) from this directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clusters import CLUSTERS, Cluster, cluster


@pytest.fixture(scope="session", params=CLUSTERS, ids=[f"slurm-{s}" for s in CLUSTERS])
def local_slurm(request: pytest.FixtureRequest) -> Cluster:
    """Every integration test that uses the cluster runs once per cluster."""
    return cluster(str(request.param))

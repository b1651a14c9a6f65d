"""Profile values that sbatch and slurmrestd must read alike (docs/cli.md, "The profile")."""

from __future__ import annotations

from typing import Any

import pytest

from slurm_image.domain.errors import DomainError
from slurm_image.domain.profile import select_cluster


def profile(**build: Any):  # type: ignore[no-untyped-def]
    document = {
        "workspace_root": "/srv/ws",
        "image_build": {
            "partition": "cpu",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "1:00:00",
            **build,
        },
    }
    return select_cluster(document, explicit=None, hostnames=["h"], catalog_sha256="0" * 64)[0]


@pytest.mark.parametrize("memory", ["1500K", "1K", "1025K", "1536K"])
def test_memory_that_is_not_whole_mib_is_refused(memory: str) -> None:
    with pytest.raises(DomainError) as refused:
        profile(memory=memory)
    assert refused.value.field.endswith("memory")
    assert "whole number of MiB" in refused.value.rule


@pytest.mark.parametrize(("memory", "mib"), [("1024K", 1), ("2048K", 2), ("3M", 3), ("2G", 2048)])
def test_memory_in_whole_mib_means_the_same_to_sbatch_and_rest(memory: str, mib: int) -> None:
    build = profile(memory=memory).image_build
    assert build.memory == memory  # what sbatch gets, --mem=<memory>
    from slurm_image.domain.job import JobSpec

    spec = JobSpec(
        name="n",
        partition="cpu",
        account=None,
        qos=None,
        cpus_per_task=1,
        memory=memory,
        time_limit="1:00:00",
        working_directory="/srv/ws/j",
        standard_output="/srv/ws/j/o",
        standard_error="/srv/ws/j/e",
        comment="slurm-image:x",
    )
    assert spec.memory_mib == mib  # what slurmrestd gets, memory_per_node


@pytest.mark.parametrize("limit", ["8760:00:01", "8761:00:00", "99999999999:00:00"])
def test_a_time_limit_beyond_one_year_is_refused(limit: str) -> None:
    with pytest.raises(DomainError) as refused:
        profile(time_limit=limit)
    assert "at most 8760:00:00" in refused.value.rule


def test_a_time_limit_of_one_year_is_accepted() -> None:
    assert profile(time_limit="8760:00:00").image_build.time_limit == "8760:00:00"

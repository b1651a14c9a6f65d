"""Partition limits as each client reports them, and whether a job's request fits them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_image.adapters.slurm_partition import duration_minutes, limits_from_scontrol
from slurm_image.adapters.slurmrest.submitter import _names_no_partition
from slurm_image.adapters.slurmrest.versions import SUPPORTED
from slurm_image.domain.job import JobSpec
from slurm_image.domain.partition import PartitionLimits, fit_problems

# Measured on the local 22.05 cluster, with limits set as a site would (scontrol -o, one line).
SCONTROL = (
    "PartitionName=gpu AllowGroups=ALL Default=NO DefaultTime=NONE MaxNodes=UNLIMITED "
    "MaxTime=1-12:00:00 MinNodes=0 MaxCPUsPerNode=16 Nodes=n[1-2] State=UP TotalCPUs=64 "
    "TotalNodes=2 DefMemPerNode=UNLIMITED MaxMemPerNode=65536"
)
SINFO = "32|128000\n24|96000\n"


def spec(**changes: object) -> JobSpec:
    values: dict[str, object] = {
        "name": "slurm-image-doctor",
        "partition": "gpu",
        "cpus_per_task": 4,
        "memory": "16G",
        "time_limit": "1:00:00",
        "working_directory": "/ws",
        "standard_output": "/ws/o",
        "standard_error": "/ws/e",
        "comment": "slurm-image:doctor-1",
    }
    values.update(changes)
    return JobSpec.model_validate(values)


def test_scontrol_and_sinfo_give_the_limits_and_the_largest_node() -> None:
    limits = limits_from_scontrol(SCONTROL, SINFO)
    assert limits == PartitionLimits(
        name="gpu",
        state="UP",
        max_time_minutes=36 * 60,
        max_cpus_per_node=16,
        max_memory_per_node_mib=65536,
        max_memory_per_cpu_mib=None,
        node_cpus=32,
        node_memory_mib=128000,
    )


def test_unlimited_values_read_as_no_limit() -> None:
    line = "PartitionName=cpu MaxTime=UNLIMITED MaxCPUsPerNode=UNLIMITED MaxMemPerNode=UNLIMITED"
    limits = limits_from_scontrol(line + " State=DOWN", "")
    assert (limits.max_time_minutes, limits.max_cpus_per_node, limits.node_cpus) == (
        None,
        None,
        None,
    )
    assert fit_problems(spec(), limits) == ["the partition is DOWN, not UP"]


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("UNLIMITED", None),
        ("INFINITE", None),
        ("30", 30),
        ("05:30", 6),
        ("02:00:00", 120),
        ("1-00:00:00", 1440),
        ("2-01", 2 * 1440 + 60),
        ("nonsense", None),
    ],
)
def test_slurm_durations_in_whole_minutes(text: str, minutes: int | None) -> None:
    assert duration_minutes(text) == minutes


@given(st.integers(0, 400), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_a_duration_is_never_rounded_down(
    days: int, hours: int, minutes: int, seconds: int
) -> None:
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    parsed = duration_minutes(f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}")
    assert parsed is not None
    assert parsed * 60 >= total > (parsed - 1) * 60 or total == parsed == 0


def test_every_limit_the_request_breaks_is_named() -> None:
    limits = limits_from_scontrol(SCONTROL, SINFO)
    problems = fit_problems(spec(cpus_per_task=40, memory="200G", time_limit="40:00:00"), limits)
    assert problems == [
        "cpus_per_task 40 exceeds the MaxCPUsPerNode limit of 16",
        "cpus_per_task 40 exceeds the node limit of 32",
        "memory 200G (204800 MiB) exceeds the MaxMemPerNode limit of 65536 MiB",
        "memory 200G (204800 MiB) exceeds the node limit of 128000 MiB",
        "time_limit 40:00:00 exceeds MaxTime 36:00:00",
    ]
    assert fit_problems(spec(cpus_per_task=16, memory="64G", time_limit="36:00:00"), limits) == []


def test_memory_per_cpu_limits_the_memory_of_the_whole_request() -> None:
    limits = PartitionLimits(name="p", state="UP", max_memory_per_cpu_mib=2048)
    assert fit_problems(spec(cpus_per_task=4, memory="8G"), limits) == []
    assert fit_problems(spec(cpus_per_task=4, memory="9G"), limits) == [
        "memory 9G exceeds MaxMemPerCPU 2048 MiB times 4 CPUs"
    ]


NODES = {
    "nodes": [
        {"name": "n1", "cpus": 32, "real_memory": 128000, "partitions": ["gpu"]},
        {"name": "n2", "cpus": 64, "real_memory": 512000, "partitions": ["big"]},
    ]
}


def test_rest_v0_0_38_partition_reads_minus_one_as_unlimited() -> None:
    body = {
        "partitions": [
            {
                "name": "gpu",
                "state": "UP",
                "max_time_limit": 2160,
                "maximum_cpus_per_node": -1,
                "maximum_memory_per_node": None,
                "maximum_memory_per_cpu": None,
            }
        ]
    }
    limits = SUPPORTED["v0.0.38"].partition_limits(body, NODES, "gpu")
    assert limits == PartitionLimits(
        name="gpu", state="UP", max_time_minutes=2160, node_cpus=32, node_memory_mib=128000
    )
    assert SUPPORTED["v0.0.38"].partition_limits(body, NODES, "other") is None


@pytest.mark.parametrize(
    "version", ["v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]
)
def test_rest_data_parser_partition_reads_no_val_numbers(version: str) -> None:
    # The shape of the published v0.0.44 example answer (partition_info).
    body = {
        "partitions": [
            {
                "name": "gpu",
                "partition": {"state": ["UP"]},
                "maximums": {
                    "cpus_per_node": {"set": True, "infinite": False, "number": 16},
                    "partition_memory_per_node": {"set": False, "infinite": False, "number": 0},
                    "partition_memory_per_cpu": {"set": True, "infinite": True, "number": 0},
                    "time": {"set": True, "infinite": False, "number": 2160},
                    "memory_per_cpu": 0,
                },
            }
        ]
    }
    limits = SUPPORTED[version].partition_limits(body, NODES, "gpu")
    assert limits == PartitionLimits(
        name="gpu",
        state="UP",
        max_time_minutes=2160,
        max_cpus_per_node=16,
        node_cpus=32,
        node_memory_mib=128000,
    )


@pytest.mark.parametrize(
    "version", ["v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]
)
def test_rest_data_parser_partition_reads_zero_memory_as_unlimited(version: str) -> None:
    # The maximums slurmrestd 24.11.5 answered live for a partition without memory limits
    # (26.05.5 answers the same on v0.0.42 to v0.0.45).
    body = {
        "partitions": [
            {
                "name": "build",
                "partition": {"state": ["UP"]},
                "maximums": {
                    "cpus_per_node": {"set": False, "infinite": True, "number": 0},
                    "memory_per_cpu": 0,
                    "partition_memory_per_cpu": {"set": False, "infinite": False, "number": 0},
                    "partition_memory_per_node": {"set": True, "infinite": False, "number": 0},
                    "time": {"set": False, "infinite": True, "number": 0},
                },
            }
        ]
    }
    limits = SUPPORTED[version].partition_limits(body, NODES, "build")
    assert limits is not None
    assert (limits.max_memory_per_node_mib, limits.max_memory_per_cpu_mib) == (None, None)
    assert fit_problems(spec(cpus_per_task=2, memory="200M", time_limit="0:10:00"), limits) == []


@pytest.mark.parametrize(
    ("entry", "up"),
    [
        ({"hostname": "c1", "ping": "UP", "status": 0, "mode": "primary"}, True),
        ({"hostname": "c1", "ping": "DOWN", "status": -1, "mode": "primary"}, False),
        ({"hostname": "c1", "pinged": "UP", "latency": 5, "mode": "primary"}, True),
        ({"hostname": "c1", "responding": True, "primary": True, "pinged": "UP"}, True),
        ({"hostname": "c1", "responding": False, "primary": True, "pinged": "DOWN"}, False),
    ],
)
def test_rest_ping_answers_in_every_shape(entry: dict[str, object], up: bool) -> None:
    for mapping in SUPPORTED.values():
        ((text, responding),) = mapping.controllers({"pings": [entry]})
        assert responding is up
        assert "c1" in text


@pytest.mark.parametrize(
    "errors",
    [
        [{"error": "Invalid partition name specified", "errno": 2000}],  # 22.05, HTTP 500
        [  # 24.11.5, HTTP 422, every data_parser version (measured live)
            {
                "description": "Unable to find partition nosuchpart",
                "error_number": 9000,
                "error": "Query empty or not RFC7320 compliant",
                "source": "op_handler_partition",
            }
        ],
    ],
)
def test_rest_answers_naming_no_such_partition(errors: list[dict[str, object]]) -> None:
    assert _names_no_partition({"errors": errors})
    other = [{"description": "Unable to query nodes", "error_number": 9000}]
    assert not _names_no_partition({"errors": other})

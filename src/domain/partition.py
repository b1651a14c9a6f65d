"""A Slurm partition's limits, and whether a job's request fits them."""

from __future__ import annotations

from pydantic import BaseModel

from slurm_image.domain.job import JobSpec
from slurm_image.domain.model_config import FROZEN


class PartitionLimits(BaseModel):
    """What the scheduler says about one partition. ``None``: unlimited, or not reported."""

    model_config = FROZEN

    name: str
    state: str
    """``UP``, ``DOWN``, ``DRAIN`` or ``INACTIVE``: only ``UP`` starts jobs."""
    max_time_minutes: int | None = None
    max_cpus_per_node: int | None = None
    max_memory_per_node_mib: int | None = None
    max_memory_per_cpu_mib: int | None = None
    node_cpus: int | None = None
    """The CPUs of the partition's largest node (a job of one node cannot have more)."""
    node_memory_mib: int | None = None
    """The memory of the partition's largest node."""


def _minutes(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    return f"{hours}:{rest:02d}:00"


def fit_problems(spec: JobSpec, limits: PartitionLimits) -> list[str]:
    """Why ``spec`` (one node, one task) cannot run in the partition; empty when it fits."""
    problems = []
    if limits.state.upper() != "UP":
        problems.append(f"the partition is {limits.state}, not UP")
    cpus, memory = spec.cpus_per_task, spec.memory_mib
    for limit, what in ((limits.max_cpus_per_node, "MaxCPUsPerNode"), (limits.node_cpus, "node")):
        if limit is not None and cpus > limit:
            problems.append(f"cpus_per_task {cpus} exceeds the {what} limit of {limit}")
    for limit, what in (
        (limits.max_memory_per_node_mib, "MaxMemPerNode"),
        (limits.node_memory_mib, "node"),
    ):
        if limit is not None and memory > limit:
            problems.append(
                f"memory {spec.memory} ({memory} MiB) exceeds the {what} limit of {limit} MiB"
            )
    per_cpu = limits.max_memory_per_cpu_mib
    if per_cpu is not None and memory > per_cpu * cpus:
        problems.append(
            f"memory {spec.memory} exceeds MaxMemPerCPU {per_cpu} MiB times {cpus} CPUs"
        )
    if limits.max_time_minutes is not None and spec.time_limit_minutes > limits.max_time_minutes:
        problems.append(
            f"time_limit {spec.time_limit} exceeds MaxTime {_minutes(limits.max_time_minutes)}"
        )
    return problems

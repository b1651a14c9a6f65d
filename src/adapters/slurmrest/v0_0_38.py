"""slurmrestd ``openapi/v0.0.38`` (Slurm 22.05, Debian 12): plain numbers, environment as an object.

Tested live against the local cluster (scripts/local-slurm). Measured: slurmrestd ignores the
script's ``#SBATCH`` lines, ``environment`` must be an object, ``memory_per_node`` is MB and
``time_limit`` minutes, ``exit_code`` is a raw wait status, ``start_time`` and ``end_time`` are
seconds since the epoch (0 when unset), and ``"requeue": false`` is sent
but ignored (the job is always requeueable; the script guards against reruns).
"""

from __future__ import annotations

from collections.abc import Mapping

from slurm_image.adapters.slurm_fields import (
    UnreadableExitCode,
    exit_code_from_wait_status,
    parse_job_id,
    parse_state,
    reason_with_unreadable_exit,
    time_from_epoch,
)
from slurm_image.adapters.slurmrest.mapping import (
    JobRecord,
    Json,
    RestError,
    VersionedPaths,
    common_errors,
    controller_entries,
    largest_node_in,
)
from slurm_image.domain.job import JobSpec, JobStatus, observed_times
from slurm_image.domain.partition import PartitionLimits


def _limit(value: object) -> int | None:
    """v0.0.38 writes an unlimited value as -1 (or null)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


class V0038(VersionedPaths):
    cancel_names_unknown_jobs = True  # 500, error 2017 (measured on 22.05)
    version = "v0.0.38"

    def submit_body(self, script: str, spec: JobSpec, environment: Mapping[str, str]) -> Json:
        job: Json = {
            "name": spec.name,
            "partition": spec.partition,
            "nodes": [spec.nodes, spec.nodes],  # [minimum, maximum]; no maximum_nodes key
            "tasks": spec.ntasks,
            "cpus_per_task": spec.cpus_per_task,
            "memory_per_node": spec.memory_mib,
            "time_limit": spec.time_limit_minutes,
            "current_working_directory": spec.working_directory,
            "standard_output": spec.standard_output,
            "standard_error": spec.standard_error,
            "comment": spec.comment,
            "requeue": spec.requeue,
            "environment": dict(environment),
        }
        if spec.account is not None:
            job["account"] = spec.account
        if spec.qos is not None:
            job["qos"] = spec.qos
        return {"script": script, "job": job}

    def submitted_job_id(self, body: Json) -> str:
        return parse_job_id(str(body.get("job_id", "")))

    def job_records(self, body: Json) -> list[JobRecord]:
        records = []
        for job in body.get("jobs") or []:
            job_id = str(job.get("job_id", ""))
            state = parse_state(str(job.get("job_state", "")))
            raw_exit = job.get("exit_code")
            exit_code = (
                exit_code_from_wait_status(raw_exit)
                if state.is_terminal and isinstance(raw_exit, int)
                else None
            )
            reason = job.get("state_reason")
            said = None if reason in (None, "", "None") else str(reason)
            if state.is_terminal and exit_code is None:
                said = reason_with_unreadable_exit(said, UnreadableExitCode(repr(raw_exit)))
            started, ended = observed_times(
                state, time_from_epoch(job.get("start_time")), time_from_epoch(job.get("end_time"))
            )
            records.append(
                JobRecord(
                    JobStatus(
                        job_id=job_id,
                        state=state,
                        reason=said,
                        exit_code=exit_code,
                        started_at=started,
                        ended_at=ended,
                    ),
                    str(job.get("comment") or ""),
                )
            )
        return records

    def errors(self, body: Json) -> list[RestError]:
        return common_errors(body)

    def controllers(self, body: Json) -> list[tuple[str, bool]]:
        return controller_entries(body)

    def partition_limits(self, body: Json, nodes: Json, name: str) -> PartitionLimits | None:
        for entry in body.get("partitions") or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                node_cpus, node_memory = largest_node_in(nodes, name)
                return PartitionLimits(
                    name=name,
                    state=str(entry.get("state") or "UNKNOWN"),
                    max_time_minutes=_limit(entry.get("max_time_limit")),
                    max_cpus_per_node=_limit(entry.get("maximum_cpus_per_node")),
                    max_memory_per_node_mib=_limit(entry.get("maximum_memory_per_node")),
                    max_memory_per_cpu_mib=_limit(entry.get("maximum_memory_per_cpu")),
                    node_cpus=node_cpus,
                    node_memory_mib=node_memory,
                )
        return None


MAPPING = V0038()

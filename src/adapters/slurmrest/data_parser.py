"""The shapes shared by slurmrestd API versions v0.0.40 to v0.0.45 (Slurm's data_parser plugins).

From the published OpenAPI specifications (fixtures under tests/fixtures/slurmrest/): numbers
that may be unset are ``{"set": bool, "infinite": bool, "number": N}`` objects
(``memory_per_node`` uint64, ``time_limit`` uint32), ``environment`` is a list of ``K=V``
strings, the script goes in ``job.script``, ``job_state`` is a list (a base state plus flags) and
``exit_code`` is ``{"status": [...], "return_code": {...}, "signal": {"id": {...}, "name": ..}}``,
``start_time`` and ``end_time`` are uint64 no-val numbers of seconds since the epoch (real or
expected: ``domain.job.observed_times`` keeps the facts).

Measured on Slurm 24.11.5 (fixtures local-slurmrestd-24.11.5__*): a cancel answers 200 even for
an unknown job; v0.0.40 and v0.0.41 say nothing more, v0.0.42 names the outcome per job in
``status[].error`` (2017 unknown job, 2021 already finished).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from slurm_image.adapters.slurm_fields import (
    UnreadableExitCode,
    parse_job_id,
    parse_state,
    parse_state_list,
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
from slurm_image.domain.job import JobSpec, JobState, JobStatus, observed_times
from slurm_image.domain.partition import PartitionLimits


def no_val(number: int) -> Json:
    """A set, finite ``*_no_val_struct``."""
    return {"set": True, "infinite": False, "number": number}


def _no_val_number(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, dict) and value.get("set") and not value.get("infinite"):
        number = value.get("number")
        if isinstance(number, int) and not isinstance(number, bool):
            return number
    return None


def _memory_limit(value: Any) -> int | None:
    """A partition's memory maximum: 0 is Slurm's UNLIMITED (24.11 answers
    ``{"set": true, "infinite": false, "number": 0}`` for ``MaxMemPerNode=UNLIMITED``)."""
    number = _no_val_number(value)
    return number if number else None


def exit_code_of(value: Any) -> int | None:
    """A ``process_exit_code_verbose`` as one number: the return code, or 128 + signal."""
    if not isinstance(value, dict):
        return _no_val_number(value)
    signal = value.get("signal")
    if isinstance(signal, dict):
        number = _no_val_number(signal.get("id"))
        if number:
            return 128 + number
    return _no_val_number(value.get("return_code"))


ALREADY_FINISHED = 2021  # "Job/step already completing or completed": what a cancel wants


class DataParserMapping(VersionedPaths):
    def __init__(self, version: str, *, cancel_names_unknown_jobs: bool = True) -> None:
        self.version = version
        self.cancel_names_unknown_jobs = cancel_names_unknown_jobs

    def __repr__(self) -> str:
        return f"DataParserMapping({self.version!r})"

    def submit_body(self, script: str, spec: JobSpec, environment: Mapping[str, str]) -> Json:
        job: Json = {
            "script": script,
            "name": spec.name,
            "partition": spec.partition,
            "minimum_nodes": spec.nodes,
            "maximum_nodes": spec.nodes,
            "tasks": spec.ntasks,
            "cpus_per_task": spec.cpus_per_task,
            "memory_per_node": no_val(spec.memory_mib),
            "time_limit": no_val(spec.time_limit_minutes),
            "current_working_directory": spec.working_directory,
            "standard_output": spec.standard_output,
            "standard_error": spec.standard_error,
            "comment": spec.comment,
            "requeue": spec.requeue,
            "environment": [f"{key}={value}" for key, value in environment.items()],
        }
        if spec.account is not None:
            job["account"] = spec.account
        if spec.qos is not None:
            job["qos"] = spec.qos
        return {"job": job}

    def submitted_job_id(self, body: Json) -> str:
        job_id = body.get("job_id")
        if job_id is None and isinstance(body.get("result"), dict):
            job_id = body["result"].get("job_id")  # v0.0.40/41 also answer in "result"
        return parse_job_id(str(job_id if job_id is not None else ""))

    def job_records(self, body: Json) -> list[JobRecord]:
        records = []
        for job in body.get("jobs") or []:
            raw_state = job.get("job_state")
            state = (
                parse_state_list(raw_state)
                if isinstance(raw_state, list)
                else parse_state(str(raw_state or ""))
            )
            exit_code = exit_code_of(job.get("exit_code")) if state.is_terminal else None
            reason = job.get("state_reason")
            said = None if reason in (None, "", "None") else str(reason)
            if state.is_terminal and exit_code is None:
                unreadable = UnreadableExitCode(json.dumps(job.get("exit_code")))
                said = reason_with_unreadable_exit(said, unreadable)
            state = state if state is not JobState.LOST else JobState.UNKNOWN
            started, ended = observed_times(
                state,
                time_from_epoch(_no_val_number(job.get("start_time"))),
                time_from_epoch(_no_val_number(job.get("end_time"))),
            )
            records.append(
                JobRecord(
                    JobStatus(
                        job_id=str(_no_val_number(job.get("job_id")) or ""),
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
        found = common_errors(body)
        for entry in body.get("status") or []:  # v0.0.42+ cancel: one outcome per job
            error = entry.get("error") if isinstance(entry, dict) else None
            if not isinstance(error, dict):
                continue
            code = error.get("code")
            if isinstance(code, int) and code not in (0, ALREADY_FINISHED):
                found.append(RestError(code, str(error.get("message") or error.get("string"))))
        return found

    def controllers(self, body: Json) -> list[tuple[str, bool]]:
        return controller_entries(body)

    def partition_limits(self, body: Json, nodes: Json, name: str) -> PartitionLimits | None:
        """``partition_info``: ``maximums.{time,cpus_per_node,partition_memory_per_node,
        partition_memory_per_cpu}`` are no-val numbers (unset or infinite: no limit),
        ``partition.state`` a list."""
        for entry in body.get("partitions") or []:
            if not isinstance(entry, dict) or entry.get("name") != name:
                continue
            maximums: Json = entry["maximums"] if isinstance(entry.get("maximums"), dict) else {}
            state = (entry.get("partition") or {}).get("state")
            if isinstance(state, list):
                state = state[0] if state else None
            node_cpus, node_memory = largest_node_in(nodes, name)
            return PartitionLimits(
                name=name,
                state=str(state or "UNKNOWN"),
                max_time_minutes=_no_val_number(maximums.get("time")),
                max_cpus_per_node=_no_val_number(maximums.get("cpus_per_node")),
                max_memory_per_node_mib=_memory_limit(maximums.get("partition_memory_per_node")),
                max_memory_per_cpu_mib=_memory_limit(maximums.get("partition_memory_per_cpu")),
                node_cpus=node_cpus,
                node_memory_mib=node_memory,
            )
        return None

"""What one slurmrestd API version looks like: paths, the submit body, and the answers.

Each supported version has its own small module (``v0_0_38`` ... ``v0_0_45``) exposing a
``MAPPING`` that satisfies ``ApiMapping``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from slurm_image.domain.job import JobSpec, JobStatus
from slurm_image.domain.partition import PartitionLimits

Json = dict[str, Any]


@dataclass(frozen=True)
class RestError:
    """One entry of a response's ``errors`` list."""

    code: int | None
    text: str


@dataclass(frozen=True)
class JobRecord:
    """The parts of one job description the submitter uses."""

    status: JobStatus
    comment: str


class ApiMapping(Protocol):
    version: str
    cancel_names_unknown_jobs: bool
    """Whether a cancel of an unknown job answers with an error (else a look-up must tell)."""

    def submit_path(self) -> str: ...

    def jobs_path(self) -> str: ...

    def job_path(self, job_id: str) -> str: ...

    def submit_body(self, script: str, spec: JobSpec, environment: Mapping[str, str]) -> Json:
        """The JSON body carrying the script and EVERY ``JobSpec`` value."""
        ...

    def submitted_job_id(self, body: Json) -> str:
        """The new job's id from a successful submit answer (raises ``SchedulerRejected``)."""
        ...

    def job_records(self, body: Json) -> list[JobRecord]: ...

    def errors(self, body: Json) -> list[RestError]: ...

    def ping_path(self) -> str: ...

    def partition_path(self, name: str) -> str: ...

    def nodes_path(self) -> str: ...

    def controllers(self, body: Json) -> list[tuple[str, bool]]:
        """``(description, up)`` for each controller in a ping answer."""
        ...

    def partition_limits(self, body: Json, nodes: Json, name: str) -> PartitionLimits | None:
        """Partition ``name`` from a partition answer, sized by the nodes answer; None if absent."""
        ...


class VersionedPaths:
    """The endpoint paths, the same shape in every supported version."""

    version: str

    def submit_path(self) -> str:
        return f"/slurm/{self.version}/job/submit"

    def jobs_path(self) -> str:
        return f"/slurm/{self.version}/jobs"

    def job_path(self, job_id: str) -> str:
        return f"/slurm/{self.version}/job/{job_id}"

    def ping_path(self) -> str:
        return f"/slurm/{self.version}/ping"

    def partition_path(self, name: str) -> str:
        return f"/slurm/{self.version}/partition/{name}"

    def nodes_path(self) -> str:
        return f"/slurm/{self.version}/nodes"


def largest_node_in(nodes: Json, partition: str) -> tuple[int | None, int | None]:
    """The most CPUs and memory (MiB) of the nodes answer's nodes that belong to ``partition``
    (``cpus``, ``real_memory`` and ``partitions`` read the same in every version)."""
    cpus: list[int] = []
    memory: list[int] = []
    for node in nodes.get("nodes") or []:
        if not isinstance(node, dict) or partition not in (node.get("partitions") or []):
            continue
        if isinstance(node.get("cpus"), int):
            cpus.append(node["cpus"])
        if isinstance(node.get("real_memory"), int):
            memory.append(node["real_memory"])
    return (max(cpus) if cpus else None, max(memory) if memory else None)


def controller_entries(body: Json) -> list[tuple[str, bool]]:
    """Ping entries: ``ping``/``pinged`` "UP" (v0.0.38/40) or ``responding`` (v0.0.41+); from
    v0.0.45 no ``pinged`` or ``mode``, but a ``status`` text saying why a controller is down."""
    found = []
    for entry in body.get("pings") or []:
        if not isinstance(entry, dict):
            continue
        said = str(entry.get("pinged", entry.get("ping", ""))).upper()
        up = entry.get("responding") is True or said == "UP"
        mode = entry.get("mode") or ("primary" if entry.get("primary") else "backup")
        text = f"slurmctld {entry.get('hostname', '?')} ({mode}) {said or ('UP' if up else 'DOWN')}"
        status = entry.get("status")
        if not up and status and str(status) != "No error":
            text += f" ({status})"
        found.append((text, up))
    return found


def common_errors(body: Json) -> list[RestError]:
    """``errors`` entries: ``error_code`` (submit) or ``error_number`` (everything else)."""
    found = []
    for entry in body.get("errors") or []:
        if not isinstance(entry, dict):
            continue
        code = entry.get("error_code", entry.get("error_number"))
        text = " - ".join(str(entry[key]) for key in ("error", "description") if entry.get(key))
        found.append(RestError(code if isinstance(code, int) else None, text))
    return found

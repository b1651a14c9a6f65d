"""A site submitter: the batch queue is a spool directory served by the site's queue daemon."""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slurm_image.domain.errors import InvalidProfile
from slurm_image.domain.job import JobSpec, JobState, JobStatus
from slurm_image.domain.partition import PartitionLimits
from slurm_image.ports.submitter import SchedulerRejected, UnknownJob
from slurm_image.submitters import Submitter, TransientFailure


class SpoolSubmitter(Submitter):
    name = "spool"

    def __init__(self, spool: str) -> None:
        self.spool = Path(spool)

    def check(self) -> None:
        if not (self.spool / "jobs").is_dir():
            raise SchedulerRejected(field="spool", rule=f"{self.spool} is no spool directory")

    def _jobs(self) -> Path:
        if not (self.spool / "up").exists():
            raise TransientFailure(f"no daemon at {self.spool}", "controller", ambiguous=False)
        return self.spool / "jobs"

    def _cpus(self, partition: str) -> int | None:
        return json.loads((self._jobs().parent / "partitions.json").read_text()).get(partition)

    def _all(self) -> dict[str, dict[str, Any]]:
        return {path.stem: json.loads(path.read_text()) for path in self._jobs().glob("*.json")}

    def submit_once(self, script: bytes, spec: JobSpec) -> str:
        jobs, cpus = self._jobs(), self._cpus(spec.partition)
        if cpus is None or spec.cpus_per_task > cpus:
            raise SchedulerRejected(field="cpus_per_task" if cpus else "partition", rule="denied")
        job = {"spec": spec.model_dump(), "script": script.decode(), "state": "PENDING"}
        (draft := jobs / f".{spec.comment}.draft").write_text(json.dumps(job))
        job_id = str(len(list(jobs.glob("*.json"))) + 1)
        try:  # a link never replaces: an id taken meanwhile fails this attempt, and it is retried
            (jobs / f"{job_id}.json").hardlink_to(draft)
        except FileExistsError:
            raise TransientFailure(f"job id {job_id} was taken", ambiguous=False) from None
        finally:
            draft.unlink()
        return job_id

    def states_once(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        found = [(i, job) for i, job in self._all().items() if i in job_ids]
        return {
            i: JobStatus(job_id=i, state=JobState(job["state"]), exit_code=job.get("exit"))
            for i, job in found
        }

    def cancel_once(self, job_id: str) -> None:
        path = self._jobs() / f"{job_id}.json"
        if not path.exists():
            raise UnknownJob(field="job_id", rule=f"invalid job id specified: {job_id}")
        if not JobState((job := json.loads(path.read_text()))["state"]).is_terminal:
            path.write_text(json.dumps(job | {"state": "CANCELLED"}))

    def find_once(self, marker: str) -> str | None:
        return next((i for i, job in self._all().items() if job["spec"]["comment"] == marker), None)

    def ping_once(self) -> str:
        return f"queue daemon at {self._jobs().parent} UP"

    def partition_once(self, name: str) -> PartitionLimits | None:
        cpus = self._cpus(name)
        return None if cpus is None else PartitionLimits(name=name, state="UP", node_cpus=cpus)


def make_submitter(settings: Mapping[str, Any]) -> SpoolSubmitter:
    if not isinstance(settings.get("spool"), str):  # the profile's [submitter.spool] table
        raise InvalidProfile(field="submitter.spool.spool", rule="must name the spool directory")
    return SpoolSubmitter(settings["spool"])

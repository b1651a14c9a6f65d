"""The shipped submitter contract, run against the spool submitter as slurm-image finds it:
through the entry point it registers under ``slurm_image.submitters``. The test plays the
site's queue daemon."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from slurm_image.ports.submitter import BatchSubmitter
from slurm_image.submitters import RetryPolicy, Submitter
from slurm_image.testing.submitter_contract import Landed, Scheduler, SubmitterContract


def build(spool: Path, retry_policy: RetryPolicy) -> BatchSubmitter:
    (make,) = (
        entry for entry in entry_points(group="slurm_image.submitters") if entry.name == "spool"
    )
    submitter = make.load()({"spool": str(spool)})
    assert isinstance(submitter, Submitter)
    submitter.retry_policy = retry_policy
    return submitter


class QueueDaemon(Scheduler):
    """The site's queue daemon, played by the test: it holds ``build`` (2 CPUs a node)."""

    def __init__(self, root: Path) -> None:
        self.spool = root / "spool"
        (self.spool / "jobs").mkdir(parents=True)
        (self.spool / "partitions.json").write_text(json.dumps({"cpu": 2, "build": 2}))
        (self.spool / "up").touch()

    def _job(self, job_id: str) -> dict:
        return json.loads((self.spool / "jobs" / f"{job_id}.json").read_text())

    def make_submitter(self, *, retry_policy: RetryPolicy) -> BatchSubmitter:
        return build(self.spool, retry_policy)

    def unreachable_submitter(self, *, retry_policy: RetryPolicy) -> BatchSubmitter:
        return build(self.spool.parent / "elsewhere", retry_policy)

    @contextmanager
    def controller_down(self) -> Iterator[None]:
        (self.spool / "up").unlink()
        try:
            yield
        finally:
            (self.spool / "up").touch()

    def landed(self, job_id: str) -> Landed:
        job = self._job(job_id)
        values = {key: job["spec"][key] for key in Landed.__dataclass_fields__ if key != "script"}
        for key in ("standard_output", "standard_error"):
            values[key] = values[key].replace("%j", job_id)
        return Landed(**values, script=job["script"].encode())

    def jobs_with_marker(self, marker: str) -> list[str]:
        paths = (self.spool / "jobs").glob("*.json")
        return [p.stem for p in paths if json.loads(p.read_text())["spec"]["comment"] == marker]

    def finish(self, job_id: str, exit_code: int) -> None:
        state = "COMPLETED" if exit_code == 0 else "FAILED"
        job = self._job(job_id) | {"state": state, "exit": exit_code}
        (self.spool / "jobs" / f"{job_id}.json").write_text(json.dumps(job))


class TestSpoolSubmitter(SubmitterContract):
    @pytest.fixture
    def scheduler(self, tmp_path: Path) -> QueueDaemon:
        return QueueDaemon(tmp_path)

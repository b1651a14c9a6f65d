"""A job behaves the same whichever submitter sent it (docs/design.md, "The batch job";
docs/slurm.md), on every local cluster (Slurm 22.05, 24.11 and 26.05: ``local_slurm`` is
parametrized in conftest.py).

The script cleans its environment the way the rendered script does (``bash -p``, then
``env -i`` keeping only ``SLURM_*`` with a fixed ``PATH``) and records what it sees.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from slurm_image.adapters.sbatch import SbatchSubmitter
from slurm_image.adapters.slurmrest import RestSubmitter
from slurm_image.domain.job import JobSpec
from slurm_image.ports.submitter import BatchSubmitter
from slurm_image.submitters import RetryPolicy

pytestmark = pytest.mark.slurm

CANARY = "SLURM_IMAGE_TEST_CANARY"
SCRIPT = b"""#!/bin/bash -p
if [ -z "${SLURM_IMAGE_CLEAN:-}" ]; then
    keep=()
    while IFS= read -r name; do
        case $name in SLURM_*) keep+=("$name=${!name}") ;; esac
    done < <(compgen -e)
    exec env -i PATH=/usr/bin:/bin LC_ALL=C SLURM_IMAGE_CLEAN=1 "${keep[@]}" /bin/bash -p "$0"
fi
env | LC_ALL=C sort > "$SLURM_SUBMIT_OUT/env-$SLURM_JOB_ID"
"""
# Variables only sbatch gives a job (measured on 22.05; docs/slurm.md): the script never relies on
# them.
SBATCH_ONLY = {
    "SLURM_CPUS_PER_TASK",
    "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST",
    "SLURM_EXPORT_ENV",
    "SLURM_GET_USER_ENV",
    "SLURM_PRIO_PROCESS",
    "SLURM_TRES_PER_TASK",  # 24.11: "cpu=2", the request, like SLURM_CPUS_PER_TASK
}
# Values that differ from one job to the next (the times: 24.11; the job's SLUID: 26.05).
PER_JOB = {
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_TASK_PID",
    "SLURM_JOB_START_TIME",
    "SLURM_JOB_END_TIME",
    "SLURM_JOB_SLUID",
}


def _submitters(local_slurm) -> dict[str, BatchSubmitter]:  # type: ignore[no-untyped-def]
    fast = RetryPolicy.immediate(2)
    return {
        "sbatch": SbatchSubmitter(sbatch=local_slurm.sbatch, retry_policy=fast),
        "rest-tcp": RestSubmitter(
            url=local_slurm.rest_url,
            user=local_slurm.rest_user,
            token_file=local_slurm.token_file,
            retry_policy=fast,
        ),
        "rest-unix": RestSubmitter(url=f"unix://{local_slurm.rest_socket}", retry_policy=fast),
    }


def _wait_for(path: Path, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists() or not path.read_text().endswith("\n"):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.3)
    return path.read_text()


def test_the_job_sees_the_same_environment_and_resources_from_every_submitter(
    local_slurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path.chmod(0o755)
    monkeypatch.setenv(CANARY, "leaked")
    monkeypatch.setenv("SLURM_CONF", local_slurm.slurm_conf)
    environments: dict[str, dict[str, str]] = {}
    resources: dict[str, dict[str, str]] = {}
    for kind, submitter in _submitters(local_slurm).items():
        spec = JobSpec(
            name="slurm-image-client",
            partition="build",
            cpus_per_task=2,
            memory="300M",
            time_limit="0:04:00",
            working_directory=str(tmp_path),
            standard_output=str(tmp_path / f"{kind}-%j.out"),
            standard_error=str(tmp_path / f"{kind}-%j.err"),
            comment=f"slurm-image:img-{uuid.uuid4().hex}",
        )
        body = SCRIPT.replace(b"$SLURM_SUBMIT_OUT", str(tmp_path).encode())
        job_id = submitter.submit(body, spec)
        lines = _wait_for(tmp_path / f"env-{job_id}").splitlines()
        seen = dict(line.split("=", 1) for line in lines if "=" in line)
        assert CANARY not in seen, f"{kind}: the caller's environment reached the job"
        environments[kind] = {
            k: v for k, v in seen.items() if k not in SBATCH_ONLY and k not in PER_JOB
        }
        job = local_slurm.show_job(job_id)
        resources[kind] = {
            key: job[key]
            for key in ("Partition", "NumCPUs", "MinMemoryNode", "TimeLimit", "JobName", "WorkDir")
        }
    assert environments["rest-tcp"] == environments["sbatch"]
    assert environments["rest-unix"] == environments["sbatch"]
    assert resources["rest-tcp"] == resources["sbatch"] == resources["rest-unix"]
    non_slurm = {k for k in environments["sbatch"] if not k.startswith("SLURM")}
    assert non_slurm <= {"PATH", "LC_ALL", "SLURM_IMAGE_CLEAN", "PWD", "SHLVL", "_"}
    assert os.environ[CANARY] == "leaked"

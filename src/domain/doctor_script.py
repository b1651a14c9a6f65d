"""The doctor's tiny batch job: the real jobs' isolation, then a report of the node's tools.

The job runs through the same clean-environment re-exec, fixed ``job_path``, private scratch,
``HOME`` and ``ENROOT_*`` paths as a lifecycle's job: those are the lifecycle job's own steps
(``domain/job_steps/``), picked by name, never copied, so the doctor tests what real jobs meet.
It then prints one ``slurm-image-doctor: KEY=VALUE`` line per fact on stdout.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel

from slurm_image.domain import job_steps, paths
from slurm_image.domain.architecture import ARCHITECTURES
from slurm_image.domain.job import JobSpec, submission_marker
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.profile import SiteProfile
from slurm_image.domain.script import (
    MIN_ENROOT,
    SANDBOX_ID,
    architecture_assignments,
    directives,
    enroot_directory,
    reexec_step,
)
from slurm_image.domain.shell import quote

DOCTOR_ID_PREFIX = "doctor-"
REPORT_PREFIX = "slurm-image-doctor: "
REPORT_KEYS = (
    "node",
    "job_path",
    "enroot_version",
    "enroot",
    "mksquashfs",
    "unsquashfs",
    "tar2sqfs",
    "python3",
    "scratch",
    "scratch_free_bytes",
    "scratch_filesystem",
    "scratch_removed",
    "job_uid",
    "sandbox_uid",
    "sandbox",
    "inspection_path",
    "architecture",
)
# One line for each architecture other than the node's: ``ok``, or what keeps the node from
# running its executables (the job's own rule, step ``architecture-rules``).
RUNS_PREFIX = "runs_"
# Enroot needs mknod and trusted xattrs in its scratch (script.py, step 4): not a network one.
NETWORK_FILESYSTEMS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "cifs", "smb2", "beegfs"})
TINY_CPUS = 1
TINY_MEMORY = "256M"
TINY_TIME = "0:05:00"

# The lifecycle job's steps the doctor runs, then its own: the workspace root's chain and its
# own directory (instead of the attempt's), and the report.
DOCTOR_STEPS = (
    "helpers",
    "progress",
    "01-job-id",
    "01b-directory-rules",
    "doctor-directories",
    "image-output",
    "04-scratch",
    "05b-sandbox",
    "inspection-path",
    "architecture-rules",
    "doctor-report",
)


class DoctorJob(BaseModel):
    """Where the doctor's job lives in the workspace, and what it asks of the scheduler."""

    model_config = FROZEN

    doctor_id: str
    workspace_root: str
    job_dir: str
    home: str
    enroot_config: str
    spec: JobSpec

    def stdout(self, job_id: str) -> str:
        return self.spec.standard_output.replace("%j", job_id)

    def stderr(self, job_id: str) -> str:
        return self.spec.standard_error.replace("%j", job_id)


def doctor_job(profile: SiteProfile, doctor_id: str) -> DoctorJob:
    """``<workspace>/images/.tmp/doctor/<id>/``, and a one-CPU job in the profile's partition,
    account and QOS."""
    paths.name(doctor_id, "doctor_id")
    layout = paths.AttemptLayout(profile.workspace_root, doctor_id)
    job_dir = f"{layout.tmp}/doctor/{doctor_id}"
    build = profile.image_build
    spec = JobSpec(
        name="slurm-image-doctor",
        partition=build.partition,
        account=build.account,
        qos=build.qos,
        cpus_per_task=TINY_CPUS,
        memory=TINY_MEMORY,
        time_limit=TINY_TIME,
        working_directory=job_dir,
        standard_output=f"{job_dir}/slurm-%j.out",
        standard_error=f"{job_dir}/slurm-%j.err",
        comment=submission_marker(doctor_id),
    )
    return DoctorJob(
        doctor_id=doctor_id,
        workspace_root=layout.root,
        job_dir=job_dir,
        home=f"{job_dir}/home",
        enroot_config=f"{job_dir}/enroot/config",
        spec=spec,
    )


def render_doctor_script(job: DoctorJob, profile: SiteProfile) -> str:
    """The doctor's batch script. The same job and profile always give the same bytes."""
    build = profile.image_build
    values = [
        ("WORKSPACE_ROOT", job.workspace_root),
        ("JOB_DIR", job.job_dir),
        ("JOB_PATH", build.job_path),
        ("LOCAL_SCRATCH", build.local_scratch or ""),
        ("JOB_HOME", job.home),
        ("JOB_ENROOT", enroot_directory(job.enroot_config)),
        ("JOB_ENROOT_CONFIG", job.enroot_config),
        ("PARTIAL", ""),
        ("RESULT", ""),
        ("SANDBOX_ID", str(SANDBOX_ID)),
    ]
    header = [
        "#!/bin/bash -p",
        *directives(job.spec),
        f"# slurm-image-lifecycle: doctor {job.doctor_id}",
        "",
        reexec_step(build.job_path),
        "set -Eeuo pipefail",
        "umask 077",
        *(f"readonly {key}={quote(value, key)}" for key, value in values),
        *architecture_assignments(),
        *(
            f"export {key}={quote(value, key)}"
            for key, value in sorted(profile.enroot.environment.items())
        ),
    ]
    return "\n".join(header) + "\n" + job_steps.steps(*DOCTOR_STEPS)


class NodeReport(BaseModel):
    """What the doctor's job found on the compute node (untrusted text, checked here)."""

    model_config = FROZEN

    node: str = ""
    job_path: str = ""
    enroot_version: str = ""
    enroot: str = ""
    mksquashfs: str = ""
    unsquashfs: str = ""
    tar2sqfs: str = ""
    python3: str = ""
    """Where the stream importer's programs are on ``job_path`` (empty: not found)."""
    scratch: str = ""
    scratch_free_bytes: int | None = None
    scratch_filesystem: str = ""
    scratch_removed: str = ""
    """``ok`` when the job's EXIT trap removed its scratch (mode-0 directories and all), else
    what was left."""
    job_uid: str = ""
    sandbox_uid: str = ""
    sandbox: str = ""
    inspection_path: str = ""
    """``overlay: KIND`` or ``unpacked: REASON`` (the job's rule, step ``inspection-path``)."""
    architecture: str = ""
    """``uname -m`` of the node."""
    foreign: dict[str, str] = {}
    """By architecture other than the node's: ``ok``, or why the node cannot run it."""

    @property
    def runs_architectures(self) -> tuple[str, ...]:
        """The architectures other than its own whose executables the node runs, sorted."""
        return tuple(sorted(name for name, verdict in self.foreign.items() if verdict == "ok"))


def parse_report(stdout: str) -> NodeReport:
    """The ``slurm-image-doctor: KEY=VALUE`` lines of the job's stdout; other lines are ignored,
    and so are unknown keys."""
    found: dict[str, str] = {}
    foreign: dict[str, str] = {}
    runs = {f"{RUNS_PREFIX}{name}": name for name in ARCHITECTURES}
    for line in stdout.splitlines():
        if not line.startswith(REPORT_PREFIX):
            continue
        key, sep, value = line[len(REPORT_PREFIX) :].partition("=")
        if sep and key in REPORT_KEYS:
            found[key] = value.strip()[:4096]
        elif sep and key in runs:
            foreign[runs[key]] = value.strip()[:4096]
    free = found.pop("scratch_free_bytes", "")
    foreign.pop(found.get("architecture", ""), None)
    values: Mapping[str, object] = {
        **found,
        "scratch_free_bytes": int(free) if free.isdigit() else None,
        "foreign": foreign,
    }
    return NodeReport.model_validate(values)


_VERSION = re.compile(r"([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})([-+][0-9A-Za-z.+-]*)?")


def enroot_version_tuple(text: str) -> tuple[int, int, int] | None:
    """``X.Y.Z[-suffix]`` as the job's version gate reads it; None when it does not parse."""
    match = _VERSION.fullmatch(text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def minimum_enroot(operation: str) -> tuple[int, int, int]:
    major, minor, patch = (int(part) for part in MIN_ENROOT[operation].split("."))
    return major, minor, patch

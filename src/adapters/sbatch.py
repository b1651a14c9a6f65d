"""``BatchSubmitter`` through Slurm's command-line clients: sbatch, squeue, scancel.

Every command runs from an argument vector (no shell) with a minimal environment: a fixed
``PATH``, ``LC_ALL=C``, ``TZ=UTC0`` (squeue's times are then UTC) and ``SLURM_CONF`` when the
caller has one, never anything else of the caller's (``SLURM_JWT`` in particular would make
sbatch authenticate with a token). The script
travels on stdin, so the bytes that were verified are the bytes Slurm stores. Every ``JobSpec``
value is also passed as an option, so the job matches the spec even if the script's own
``#SBATCH`` lines were to disagree.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurm_image.adapters.sbatch_errors import classify
from slurm_image.adapters.slurm_fields import (
    CLIENT_TIME_ZONE,
    UnreadableExitCode,
    bounded,
    exit_code_from_squeue,
    is_job_id,
    parse_state,
    reason_with_unreadable_exit,
    submitted_job_id,
    time_from_client,
)
from slurm_image.adapters.slurm_partition import limits_from_scontrol
from slurm_image.domain.job import JobSpec, JobStatus, observed_times
from slurm_image.domain.partition import PartitionLimits
from slurm_image.ports.submitter import SchedulerRejected, SchedulerUnavailable, UnknownJob
from slurm_image.submitters import RetryPolicy, Submitter, TransientFailure

_log = logging.getLogger(__name__)

CHILD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_STATES_FORMAT = "JobID:|,State:|,StartTime:|,EndTime:|,Reason:|,exit_code:|"
_NOT_STARTED = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOEXEC, errno.ENOTDIR})
_REFUSED_ID = re.compile(r"Invalid job id: ([0-9]+)")


@dataclass(frozen=True)
class _Completed:
    returncode: int
    stdout: str
    stderr: str


def parse_squeue_states(output: str, wanted: Sequence[str]) -> dict[str, JobStatus]:
    """Parse ``squeue -h -O JobID:|,State:|,StartTime:|,EndTime:|,Reason:|,exit_code:|`` output
    (times in UTC: ``CLIENT_TIME_ZONE``) for ``wanted`` ids.

    A finished job's exit code that cannot be read is named in its ``reason``, never dropped.
    The reason comes last but one: it is the one field that may hold a ``|``.
    """
    requested = set(wanted)
    found: dict[str, JobStatus] = {}
    for line in output.splitlines():
        parts = line.rstrip("\n").split("|")
        if len(parts) < 7:
            continue
        job_id, state, raw_exit = parts[0].strip(), parts[1].strip(), parts[-2].strip()
        reason = "|".join(parts[4:-2]).strip()
        if job_id not in requested:
            continue  # array tasks ("12_3"), het components ("12+0"), other jobs
        parsed = parse_state(state)
        exit_code = None
        said = None if reason in ("", "None", "(null)") else reason
        if parsed.is_terminal:
            try:
                exit_code = exit_code_from_squeue(raw_exit)
            except UnreadableExitCode as unreadable:
                _log.warning("squeue: job %s: %s", job_id, unreadable)
                said = reason_with_unreadable_exit(said, unreadable)
        started, ended = observed_times(
            parsed, time_from_client(parts[2]), time_from_client(parts[3])
        )
        found[job_id] = JobStatus(
            job_id=job_id,
            state=parsed,
            reason=said,
            exit_code=exit_code,
            started_at=started,
            ended_at=ended,
        )
    return found


def parse_squeue_marker(output: str, marker: str) -> str | None:
    """The first job id in ``squeue -h -o %i|%k`` output whose comment equals ``marker``."""
    for line in output.splitlines():
        job_id, _, comment = line.partition("|")
        if comment == marker and is_job_id(job_id.strip()):
            return job_id.strip()
    return None


class SbatchSubmitter(Submitter):
    """Submit with ``sbatch --parsable --export=NIL``; observe with squeue, cancel with scancel.

    ``sbatch`` is the sbatch executable (a name looked up on the caller's ``PATH``, or a path);
    squeue and scancel are taken from the same directory. ``timeout_s`` bounds every command.
    """

    name = "sbatch"
    is_job_id = staticmethod(is_job_id)

    def __init__(
        self,
        *,
        sbatch: str = "sbatch",
        timeout_s: float = 30.0,
        retry_policy: RetryPolicy | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(retry_policy=retry_policy)
        self._sbatch = sbatch
        self._timeout_s = timeout_s
        source = os.environ if environ is None else environ
        self._env = {"PATH": CHILD_PATH, "LC_ALL": "C", "TZ": CLIENT_TIME_ZONE}
        if source.get("SLURM_CONF"):
            self._env["SLURM_CONF"] = source["SLURM_CONF"]
        self._lookup_path = source.get("PATH", CHILD_PATH)

    def __repr__(self) -> str:
        return f"SbatchSubmitter(sbatch={self._sbatch!r}, timeout_s={self._timeout_s})"

    def check(self) -> None:
        self.executable()

    # -- one command each ----------------------------------------------------------------

    def submit_once(self, script: bytes, spec: JobSpec) -> str:
        argv = ["--parsable", "--export=NIL", *spec.sbatch_options()]
        done = self._run("sbatch", argv, stdin=script, ambiguous=True)
        if done.returncode != 0:
            raise classify("sbatch", done.stderr, done.returncode)
        answer = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        return submitted_job_id(answer, spec.comment)

    def states_once(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        remaining = list(job_ids)
        while remaining:
            argv = ["-h", "-t", "all", "-j", ",".join(remaining), "-O", _STATES_FORMAT]
            done = self._run("squeue", argv)
            if done.returncode == 0:
                return parse_squeue_states(done.stdout, remaining)
            if "invalid job id specified" in done.stderr.lower():
                return {}  # a single unknown id: squeue fails instead of printing nothing
            refused = _REFUSED_ID.search(done.stderr)
            if refused is None or refused.group(1) not in remaining:
                raise classify("squeue", done.stderr, done.returncode)
            # squeue 22.05 refuses ids above 2^31-1 outright: report them absent, ask again.
            remaining.remove(refused.group(1))
        return {}

    def cancel_once(self, job_id: str) -> None:
        # -v: without it scancel 22.05 hides "Invalid job id specified" and exits 0.
        done = self._run("scancel", ["-v", job_id], ambiguous=True)
        errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        text = "\n".join(errors)
        if not errors and done.returncode == 0:
            return
        lowered = text.lower()
        if "already completing or completed" in lowered:
            return
        if "invalid job id specified" in lowered:
            raise UnknownJob(field="job_id", rule=bounded(text))
        raise classify("scancel", text or done.stderr, done.returncode)

    def find_once(self, marker: str) -> str | None:
        done = self._run("squeue", ["-h", "-t", "all", "--me", "-o", "%i|%k"])
        if done.returncode != 0:
            raise classify("squeue", done.stderr, done.returncode)
        return parse_squeue_marker(done.stdout, marker)

    def ping_once(self) -> str:
        done = self._run("scontrol", ["ping"])
        answers = [line.strip() for line in done.stdout.splitlines() if " is " in line]
        up = [line for line in answers if line.endswith(" is UP")]
        if up:
            return "; ".join(up)
        if answers:  # "Slurmctld(primary) at HOST is DOWN": the controller is not answering
            raise TransientFailure(bounded("; ".join(answers)), "controller", ambiguous=False)
        raise classify("scontrol ping", done.stderr, done.returncode)

    def partition_once(self, name: str) -> PartitionLimits | None:
        done = self._run("scontrol", ["show", "partition", "-o", "--", name])
        if done.returncode != 0:
            if "not found" in (done.stdout + done.stderr).lower():
                return None  # 22.05 prints "Partition NAME not found" on stdout, exit 1
            raise classify("scontrol show partition", done.stderr, done.returncode)
        lines = [line for line in done.stdout.splitlines() if line.startswith("PartitionName=")]
        if not lines:
            return None
        nodes = self._run("sinfo", ["-h", "-N", "-p", name, "-o", "%c|%m"])
        if nodes.returncode != 0:
            raise classify("sinfo", nodes.stderr, nodes.returncode)
        return limits_from_scontrol(lines[0], nodes.stdout)

    # -- running a command ---------------------------------------------------------------

    def executable(self) -> str:
        """The sbatch client this adapter runs; ``SchedulerRejected`` when there is none."""
        return self._executable("sbatch")

    def _executable(self, command: str) -> str:
        if "/" in self._sbatch:
            candidate = str(Path(self._sbatch).parent / command)
            found = candidate if command != "sbatch" else self._sbatch
            if os.access(found, os.X_OK):
                return found
        else:
            located = shutil.which(
                command if command != "sbatch" else self._sbatch, path=self._lookup_path
            )
            if located:
                return located
        # Nothing was sent: a permanent, certain non-submission (the claim is released).
        raise SchedulerRejected(
            field="sbatch",
            rule=f"{command} not found or not executable (sbatch = {self._sbatch!r})",
        )

    def _run(
        self, command: str, args: Sequence[str], *, stdin: bytes = b"", ambiguous: bool = False
    ) -> _Completed:
        argv = [self._executable(command), *args]
        try:
            done = subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                env=self._env,
                cwd="/",
                timeout=self._timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise TransientFailure(
                f"{command} did not answer within {self._timeout_s:g}s",
                "controller",
                ambiguous=ambiguous,
            ) from exc
        except OSError as exc:
            if exc.errno in _NOT_STARTED:  # exec failed: the command never ran, nothing was sent
                raise SchedulerRejected(
                    field="sbatch", rule=f"{command} could not be run: {exc.strerror}"
                ) from exc
            raise SchedulerUnavailable(
                field="sbatch", rule=f"{command} could not be run: {exc}"
            ) from exc
        stdout = done.stdout.decode("utf-8", "replace")
        stderr = done.stderr.decode("utf-8", "replace")
        if done.returncode != 0:
            _log.debug("%s exited %d: %s", command, done.returncode, bounded(stderr))
        return _Completed(done.returncode, stdout, stderr)

"""The product's batch job, staged by the product and run as slurmd runs it, with the Enroot
stand-in: what ``bench/run.py`` times. It needs the repository's stand-in
(tests/fixtures/enroot/enroot, an executable file) but nothing of the test harness, so that the
bench runs from an install without the test extra.

- ``install_standin``: the stand-in and its stock configuration in a directory of its own, as
  Enroot is installed (readable by everyone: a root job runs the image's side as an
  unprivileged id, README, Threat model);
- ``JobSite``: a workspace and a profile whose ``job_path`` finds that stand-in first, a
  node-local scratch, and the Enroot settings given; ``stage`` stages an attempt through the
  Python API exactly as ``import --no-submit`` does, ``run`` executes a spool copy of its script
  (its ``#!/bin/bash -p`` honoured, from the attempt directory, stdin /dev/null) with the
  ``SLURM_*`` variables a batch step has, and reports its peak memory and when the job's
  progress record first named each phase. With ``user``, the bench (as root) runs the job and
  the bare imports as that uid on a node whose /dev/fuse users may open
  (tests/fixtures/run-as-fuse-user): an ordinary user's job, which inspects through the
  overlay where the node allows it; root's job always unpacks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from slurm_image import Lifecycles
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.request import make_request

REPOSITORY = Path(__file__).resolve().parent.parent
STANDIN = REPOSITORY / "tests" / "fixtures" / "enroot" / "enroot"
RUN_AS_FUSE_USER = REPOSITORY / "tests" / "fixtures" / "run-as-fuse-user"
ORDINARY_UID = 4343  # not the execution tests' 4242: they wait for that uid's processes to end
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def install_standin(directory: Path, config: dict[str, Any] | None = None) -> Path:
    """A copy of the stand-in, its ``sysconf/`` and its configuration file in ``directory``."""
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    shutil.copy2(STANDIN, directory / "enroot")
    (directory / "enroot").chmod(0o755)
    shutil.copytree(STANDIN.parent / "sysconf", directory / "sysconf")
    (directory / "enroot-standin.json").write_text(json.dumps(config or {}))
    return directory


@dataclass(frozen=True)
class Ran:
    """One process run to its end: its wall time, its peak RSS (the largest of it and of
    every descendant it waited for, as ``getrusage`` reports it) and its output."""

    seconds: float
    peak_rss_kib: int
    returncode: int
    stdout: str
    stderr: str
    phases: dict[str, float]
    """Seconds from the start to when the job's progress record first named each phase."""


@contextmanager
def watch_phases(
    records: Callable[[], Iterable[Path]], clock: Callable[[], float]
) -> Iterator[dict[str, float]]:
    """While the body runs, read every progress record ``records()`` names every 0.1 s and note
    the ``clock()`` at which each phase first appears."""
    seen: dict[str, float] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.1):
            for record in records():
                try:
                    phase = json.loads(record.read_bytes()).get("phase")
                except (OSError, ValueError):
                    continue
                if isinstance(phase, str) and phase not in seen:
                    seen[phase] = clock()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join()


def phase_clock(progress: Path | None, start: float) -> AbstractContextManager[dict[str, float]]:
    """While the body runs, read ``progress`` (a job's progress record) every 0.1 s and note
    when each phase first appears, in seconds from ``start``."""
    return watch_phases(
        lambda: [] if progress is None else [progress], lambda: time.perf_counter() - start
    )


ENROOT_IMPORT_MARKERS = {
    "Extracting image layers...": "extract",
    "Creating squashfs filesystem...": "squash",
}
"""The lines of ``enroot import``'s output that begin a phase, as the job's progress reads them
(its step progress_enroot), for a bare import's phases."""


def stderr_phases(
    stream: IO[bytes],
    sink: IO[bytes],
    markers: dict[str, str],
    start: float,
    seen: dict[str, float],
) -> None:
    """Copy ``stream`` to ``sink`` line by line, noting when a line first holds each marker
    (seconds from ``start``) as the phase it names."""
    for line in iter(stream.readline, b""):
        sink.write(line)
        text = line.decode(errors="replace")
        for marker, phase in markers.items():
            if marker in text and phase not in seen:
                seen[phase] = time.perf_counter() - start


def run_measured(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path | None = None,
    progress: Path | None = None,
    markers: dict[str, str] | None = None,
    first_phase: str = "",
) -> Ran:
    """``argv`` to its end, timed; its peak memory from ``wait4`` (of it and its descendants);
    with ``progress``, when the job's progress record named each phase; with ``markers``, when
    its error output first printed each (``first_phase`` from the start)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        with phase_clock(progress, start) as phases:
            if first_phase:
                phases[first_phase] = 0.0
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.PIPE if markers else err,
            )
            reader = None
            if markers:
                assert process.stderr is not None
                reader = threading.Thread(
                    target=stderr_phases, args=(process.stderr, err, markers, start, phases)
                )
                reader.start()
            _, status, usage = os.wait4(process.pid, 0)
            seconds = time.perf_counter() - start
            if reader is not None:
                reader.join()
                assert process.stderr is not None
                process.stderr.close()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    return Ran(seconds, int(usage.ru_maxrss), process.returncode, stdout, stderr, dict(phases))


@dataclass(frozen=True)
class Staged:
    """A staged attempt: its directory, its script and where its job writes the inspection."""

    job_dir: Path
    script: Path
    result: Path
    progress: Path
    inspection_path: Path


JOB_PROFILE = """workspace_root = "{root}"

[image_build]
partition = "build"
cpus_per_task = 2
memory = "4G"
time_limit = "1:00:00"
local_scratch = "{scratch}"
job_path = "{job_path}"

[submitter]
kind = "fake"
"""


class JobSite:
    """A workspace, a node-local scratch and a stand-in under ``base`` (walkable by everyone),
    and the in-memory scheduler's profile that points the job at them."""

    def __init__(
        self,
        base: Path,
        *,
        standin_config: dict[str, Any] | None = None,
        enroot: dict[str, Any] | None = None,
        user: int | None = None,
    ) -> None:
        self.base = base
        self.user = user
        base.mkdir(mode=0o755, exist_ok=True)
        self.root = base / "ws"
        self.root.mkdir(mode=0o700)
        self.scratch = base / "scratch"
        self.scratch.mkdir(mode=0o711)  # as /tmp: walkable by the sandbox
        self.bin = install_standin(base / "standin", standin_config)
        self.profile = base / "profile.toml"
        text = JOB_PROFILE.format(
            root=self.root, scratch=self.scratch, job_path=f"{self.bin}:{NODE_PATH}"
        )
        if enroot:
            text += "\n[enroot]\n" + "".join(
                f"{key} = {json.dumps(value)}\n"
                for key, value in enroot.items()
                if not isinstance(value, dict)
            )
            for key, value in enroot.items():
                if isinstance(value, dict):
                    text += f"\n[enroot.{key}]\n"
                    text += "".join(f"{k} = {json.dumps(v)}\n" for k, v in value.items())
        self.profile.write_text(text)
        self.api = Lifecycles.from_profile(str(self.profile), environ={})
        self.jobs = 0

    def stage(self, operation: str, source: str, *, role: str = "client") -> Staged:
        """An attempt staged as ``import``/``inspect --no-submit`` stages it."""
        self.jobs += 1
        request = make_request(
            operation,  # type: ignore[arg-type]
            name=f"bench{self.jobs}",
            role=role,
            source=source,
        )
        self._own(0)
        plan = self.api.stage(request).plan
        self._own(self.user)
        layout = AttemptLayout(plan.profile.workspace_root, plan.lifecycle_id)
        return Staged(
            Path(plan.paths.job_dir),
            Path(plan.paths.script),
            Path(plan.paths.result),
            Path(layout.progress_record),
            Path(layout.inspection_path_record),
        )

    def _own(self, uid: int | None) -> None:
        """The workspace and the scratch made ``uid``'s (root stages, the user's job runs)."""
        if self.user is not None and uid is not None:
            for path in (self.root, self.scratch):
                subprocess.run(["chown", "-R", f"{uid}:{uid}", str(path)], check=True)

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` as this site's user runs it (as the bench's own user without one)."""
        if self.user is None:
            return argv
        node = self.base / "fuse-node"
        node.mkdir(exist_ok=True)
        return [str(RUN_AS_FUSE_USER), str(node), str(self.user), *argv]

    def environment(self, job_id: str) -> dict[str, str]:
        """What slurmd gives a batch step (the script re-executes itself under ``env -i``)."""
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.base),
            "USER": "root",
            "LANG": "C.UTF-8",
            "SLURM_JOB_ID": job_id,
            "SLURM_JOBID": job_id,
            "SLURM_CPUS_ON_NODE": "2",
            "SLURM_JOB_CPUS_PER_NODE": "2",
            "SLURM_RESTART_COUNT": "0",
            "SLURMD_NODENAME": "node1",
            "SLURM_SUBMIT_DIR": str(self.base),
        }

    def spool(self, staged: Staged) -> tuple[Path, str]:
        """A spool copy of the attempt's script, as slurmd keeps it; and the job's id."""
        job_id = str(100 + self.jobs)
        spool = self.base / "spool" / f"job{job_id}" / "slurm_script"
        spool.parent.mkdir(parents=True, mode=0o700 if self.user is None else 0o755)
        shutil.copyfile(staged.script, spool)
        spool.chmod(0o500 if self.user is None else 0o555)
        return spool, job_id

    def run(self, staged: Staged) -> Ran:
        spool, job_id = self.spool(staged)
        return run_measured(
            self.command([str(spool)]),
            env=self.environment(job_id),
            cwd=staged.job_dir,
            progress=staged.progress,
        )

    def enroot_environment(self, scratch: Path, **extra: str) -> dict[str, str]:
        """The stand-in's environment for a bare Enroot command on this node's scratch."""
        return {
            "PATH": f"{self.bin}:{NODE_PATH}",
            "HOME": str(self.base),
            "ENROOT_TEMP_PATH": str(scratch / "temp"),
            "ENROOT_DATA_PATH": str(scratch / "data"),
            "ENROOT_CACHE_PATH": str(scratch / "cache"),
            "ENROOT_RUNTIME_PATH": str(scratch / "run"),
            **extra,
        }


def bare_scratch(site: JobSite, name: str) -> Path:
    """A fresh directory on the node's scratch for a bare Enroot command, with its temp dir."""
    directory = site.scratch / name
    directory.mkdir(mode=0o700)
    (directory / "temp").mkdir(mode=0o700)
    if site.user is not None:
        subprocess.run(["chown", "-R", f"{site.user}:{site.user}", str(directory)], check=True)
    return directory


def remove(path: Path) -> None:
    """Everything under ``path``, also what an image made read-only."""
    if not path.exists():
        return
    subprocess.run(["chmod", "-R", "u+rwX", str(path)], check=False, capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def free_disk_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize

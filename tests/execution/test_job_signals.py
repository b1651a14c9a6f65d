"""scancel mid-job: Slurm sends TERM to every process of the batch step. The EXIT trap must still
remove the partial import, the container and the node-local scratch (docs/design.md, "The batch
job", steps 6 and 8)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from harness import STANDIN, Job, JobFactory, Standin

UNREACHABLE = "127.0.0.1:9/slurm-image-test/none:1@sha256:" + "a" * 64


def run_and_cancel(job: Job, ready: Path) -> int:
    """Run the job in its own process group, and TERM the whole group once ``ready`` exists."""
    spool = job.tmp / "spool" / f"job{job.job_id}" / "slurm_script"
    spool.parent.mkdir(parents=True, mode=0o700)
    spool.write_text(job.script)
    spool.chmod(0o500)
    process = subprocess.Popen(
        [str(spool)],
        cwd=job.job_dir,
        env=job.environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert process.poll() is None, "the job ended before it could be cancelled"
            assert time.monotonic() < deadline, "the job never got to the cancellation point"
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGTERM)
        return process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_cancel_during_import_removes_the_partial_file_and_the_scratch(
    make_job: JobFactory, standin: Standin, tmp_path: Path
) -> None:
    # An import that has written part of its output and is still running: the stand-in's own
    # import needs a registry, so `enroot import` is replaced here; every other command is the
    # stand-in's (a link next to its configuration).
    ready = tmp_path / "importing"
    (standin.bin / "enroot-standin").symlink_to(STANDIN)
    (standin.bin / "enroot").unlink()
    wrapper = standin.bin / "enroot"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2 $4" = "import -a -o" ]; then\n'
        '    printf partial >"$5"\n'
        f"    : >{shlex.quote(str(ready))}\n"
        "    exec sleep 60\n"
        "fi\n"
        f'exec {shlex.quote(str(standin.bin / "enroot-standin"))} "$@"\n'
    )
    wrapper.chmod(0o755)
    job = make_job(operation="import_oci", role="client", source=UNREACHABLE)

    status = run_and_cancel(job, ready)

    assert status == 143
    assert not Path(job.paths.partial).exists()
    assert not Path(job.paths.candidate).exists()
    assert standin.commands() == ["version"]  # no create, so nothing to remove
    assert job.leftover_scratch() == []


def test_cancel_during_create_removes_the_container_and_the_scratch(
    make_job: JobFactory, image, standin: Standin, tmp_path: Path
) -> None:
    ready = tmp_path / "creating"
    standin.configure(hooks={"create": f": >{shlex.quote(str(ready))}; exec sleep 60"})
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    status = run_and_cancel(job, ready)

    assert status == 143
    assert standin.commands() == ["version", "create", "remove"]
    assert standin.calls()[-1]["argv"] == ["remove", "-f", f"slurm-image-{job.job_id}"]
    assert not Path(job.paths.result).exists()
    assert job.leftover_scratch() == []

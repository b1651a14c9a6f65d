"""The rendered inspect job with the Enroot stand-in: ``job_vs_bare_enroot`` (against a bare
``enroot create``, ``start`` and ``remove`` of the same image) and ``sqsh_reads_in_job`` (the
bytes it reads from the image, traced, over the image's size)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from batch import JobSite, Staged, bare_scratch, remove
from timing import rounds, run_checked
from workloads import bench_image


def job_figures(base: Path, repetitions: int) -> dict[str, float]:
    image = bench_image(base)
    size = image.stat().st_size
    site = JobSite(base / "site")

    def run_job() -> None:
        ran = site.run(site.stage("inspect_sqsh", str(image)))
        if ran.returncode != 0:
            raise SystemExit(f"the job failed ({ran.returncode}): {ran.stderr}")

    def bare() -> None:
        scratch = bare_scratch(site, f"bare{site.jobs}")
        site.jobs += 1
        env = site.enroot_environment(scratch)
        enroot = str(site.bin / "enroot")
        run_checked([enroot, "create", "--name", "bare", str(image)], env=env)
        run_checked([enroot, "start", "--root", "bare", "python3", "-c", "pass"], env=env)
        run_checked([enroot, "remove", "-f", "bare"], env=env)
        remove(scratch)

    run_job()
    bare()
    times = rounds({"job": run_job, "bare": bare}, repetitions)
    return {
        "job_vs_bare_enroot": times["job"] / times["bare"],
        "sqsh_reads_in_job": sqsh_reads(site, site.stage("inspect_sqsh", str(image)), image, size),
    }


READ = re.compile(r"^\d+\s+(?:read|pread64|readv|preadv|preadv2)\((\d+)<([^>]*)>.*\)\s+=\s+(\d+)$")


def sqsh_reads(site: JobSite, staged: Staged, image: Path, size: int) -> float:
    """Bytes read from the image or any ``.sqsh`` the job made of it, per image size (strace:
    every process and thread of the job, Enroot's included)."""
    trace = site.base / f"strace-{site.jobs}.log"
    spool, job_id = site.spool(staged)
    done = subprocess.run(
        [
            *("strace", "-f", "-qq", "-y", "-s", "0"),
            *("-e", "trace=read,pread64,readv,preadv,preadv2", "-e", "signal=none"),
            *("-o", str(trace), str(spool)),
        ],
        cwd=staged.job_dir,
        env=site.environment(job_id),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the traced job failed ({done.returncode}): {done.stderr}")
    total = 0
    for line in trace.read_text().splitlines():
        match = READ.match(line)
        if match and (match.group(2) == str(image) or match.group(2).endswith(".sqsh")):
            total += int(match.group(3))
    return total / size

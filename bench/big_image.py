"""The big-image workload (``--big``): the product's import job of a multi-GB image against a
bare ``enroot import`` of it, and the job of a second image sharing all but its top layer,
each job run as slurmd runs it, phase by phase (bench/on_slurm.py submits them to a cluster
instead)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path

from batch import (
    ENROOT_IMPORT_MARKERS,
    ORDINARY_UID,
    JobSite,
    Ran,
    bare_scratch,
    remove,
    run_measured,
)
from workloads import BigImageSpec, big_images

from slurm_image.domain.reference import parse_reference


def layer_cache_offered() -> bool:
    """Whether this build's profile knows ``[enroot] layer_cache`` (a private Enroot cache that
    persists between the jobs of one workspace, on by default where it exists)."""
    from slurm_image.domain.errors import InvalidProfile
    from slurm_image.domain.profile import parse_profile

    build = {"partition": "p", "cpus_per_task": 1, "memory": "1G", "time_limit": "1:00:00"}
    document = {"workspace_root": "/srv/ws", "image_build": build, "enroot": {"layer_cache": False}}
    try:
        parse_profile(document)
    except InvalidProfile:
        return False
    return True


def fuse_user() -> int | None:
    """The uid the big jobs run as: an ordinary user's, on a node whose /dev/fuse users may
    open (the overlay path), when the bench runs as root on a machine with the FUSE tools;
    else None (the bench's own user: root's job unpacks)."""
    tools = ("squashfuse", "fuse-overlayfs", "fusermount3", "setpriv", "unshare")
    if os.geteuid() != 0 or not Path("/dev/fuse").exists():
        return None
    return ORDINARY_UID if all(shutil.which(tool) for tool in tools) else None


def phase_seconds(ran: Ran) -> dict[str, float]:
    """How long the job spent in each phase of its progress record (first seen to the next)."""
    ordered = sorted(ran.phases.items(), key=lambda item: item[1])
    ends = [start for _, start in ordered[1:]] + [ran.seconds] * bool(ordered)
    return {phase: end - start for (phase, start), end in zip(ordered, ends, strict=True)}


def big_figures(
    base: Path, count: int, log: Callable[[str], None], *, as_root: bool = False
) -> dict[str, float]:
    """The product's import job of a big image against a bare ``enroot import`` of it, and the
    job of a second image sharing its bottom layer against the first's; every round in a fresh
    workspace (so a layer cache, where the build has one, starts empty), the order of the job
    and the bare import alternating (ABAB), the second import right after the first. The jobs
    and bare imports run as an ordinary user where the node allows (``fuse_user``), or as root
    with ``as_root``."""
    spec = BigImageSpec()
    images = big_images(spec, log)
    cache = layer_cache_offered()
    user = None if as_root else fuse_user()
    samples: dict[str, list[float]] = {"bare": [], "first": [], "second": []}
    rss: dict[str, list[int]] = {name: [] for name in samples}
    phases: dict[str, dict[str, list[float]]] = {"bare": {}, "first": {}, "second": {}}
    paths: set[str] = set()

    def job(site: JobSite, name: str, reference: str) -> None:
        staged = site.stage("import_oci", reference)
        ran = site.run(staged)
        if ran.returncode != 0 or not staged.result.is_file():
            raise SystemExit(
                f"the import job of {reference} failed ({ran.returncode}): {ran.stderr}"
            )
        path = json.loads(staged.inspection_path.read_text())["path"]
        paths.add(path)
        spent = phase_seconds(ran)
        log(
            f"{name}: {ran.seconds:.1f} s, peak RSS {ran.peak_rss_kib // 1024} MiB, {path} path; "
            + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in spent.items())
        )
        samples[name].append(ran.seconds)
        rss[name].append(ran.peak_rss_kib)
        for phase, seconds in spent.items():
            phases[name].setdefault(phase, []).append(seconds)
        remove(staged.job_dir)

    def bare(site: JobSite) -> None:
        scratch = bare_scratch(site, "bare")
        env = site.enroot_environment(scratch, ENROOT_ALLOW_HTTP="yes", ENROOT_MAX_PROCESSORS="2")
        output = scratch / "bare.sqsh"
        argv = [str(site.bin / "enroot"), "import", "-a", platform.machine(), "-o", str(output)]
        ran = run_measured(
            site.command([*argv, parse_reference(images.first).enroot_uri]),
            env=env,
            cwd=scratch,
            markers=ENROOT_IMPORT_MARKERS,
            first_phase="download",
        )
        if ran.returncode != 0 or not output.is_file():
            raise SystemExit(f"the bare import failed ({ran.returncode}): {ran.stderr}")
        spent = phase_seconds(ran)
        log(
            f"bare: {ran.seconds:.1f} s, peak RSS {ran.peak_rss_kib // 1024} MiB; "
            + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in spent.items())
        )
        for phase, seconds in spent.items():
            phases["bare"].setdefault(phase, []).append(seconds)
        samples["bare"].append(ran.seconds)
        rss["bare"].append(ran.peak_rss_kib)
        remove(scratch)

    for number in range(count):
        site = JobSite(
            base / f"round{number}",
            enroot={"environment": {"ENROOT_ALLOW_HTTP": "yes"}},
            user=user,
        )
        log(f"round {number + 1} of {count} in {site.base}, as uid {user or 0}")
        if number % 2 == 0:
            bare(site)
        job(site, "first", images.first)
        job(site, "second", images.second)
        if number % 2 == 1:
            bare(site)
        remove(site.base)
    median = {name: statistics.median(values) for name, values in samples.items()}
    peak = {name: statistics.median(values) / 1024 for name, values in rss.items()}
    figures = {
        "big_image_gb": images.tar_bytes / 1e9,
        "big_image_entries": images.entries,
        "big_image_compressed_gb": images.compressed_bytes / 1e9,
        "big_rounds": count,
        "big_layer_cache": int(cache),
        "big_overlay_path": int(paths == {"overlay"}),
        "big_bare_import_s": median["bare"],
        "big_job_s": median["first"],
        "big_second_job_s": median["second"],
        "big_job_vs_bare_import": median["first"] / median["bare"],
        "big_second_vs_first_job": median["second"] / median["first"],
        "big_bare_peak_rss_mib": peak["bare"],
        "big_job_peak_rss_mib": peak["first"],
        "big_second_peak_rss_mib": peak["second"],
    }
    for name, spent in phases.items():
        for phase, values in spent.items():
            figures[f"big_{name}_{phase.replace('-', '_')}_s"] = statistics.median(values)
    return figures

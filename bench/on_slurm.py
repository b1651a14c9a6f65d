"""The big image's importers side by side through a Slurm cluster, by Slurm's own run times.

Usage (as root, the local cluster and registry up, ``eval "$(scripts/local-slurm env)"``):
  .venv/bin/python bench/on_slurm.py --user NAME [--rounds N] [--partition P] [--json] [--smoke]

Where ``bench/run.py --big`` runs the job script as slurmd would, this submits it. Every round,
in fresh workspaces and caches of its own, three pairs of batch jobs of the same size, each pair
a cold import of image 1 and, right after it, a warm re-import of image 2 (they share all but a
small top layer):

- ``bare``, ``bare_warm``: a bare ``enroot import`` of image 1 with an empty
  ``ENROOT_CACHE_PATH``, then of image 2 with image 1's layers in that cache; both with the
  squash options the product's job of the same size gives Enroot (``SQUASH_OPTIONS``);
- ``enroot``, ``enroot_warm``: ``slurm-image import REF --wait`` with the default importer
  (``enroot import``; the workspace's layer cache starts empty);
- ``stream``, ``stream_warm``: the same with ``[image_build] importer = "stream"``.

The pairs run in that order in even rounds and in the reverse order in odd ones. Everything
runs as the account NAME (``setpriv``): root's job always unpacks the image for its inspection,
an ordinary user's inspects through the overlay where the node lets it open /dev/fuse (each job
records which; ``slurm_overlay_path`` says whether all did). Enroot is this repository's
stand-in (tests/fixtures/enroot/enroot), installed per round as bench/batch.py installs it.
``PYTHONPATH``, when set, reaches the command line (a source tree's product instead of the
installed one); NAME must be able to run the interpreter. ``--smoke`` runs the same on an image
of a few hundred MB (``SMOKE``): a check that every contestant runs, not a measurement.

Figures: Slurm's run times (``scontrol show job``: EndTime - StartTime, whole seconds) as
medians and their ratios (``GOALS``); each contestant's phases (the product's jobs: the phases
of their progress record, sampled every 0.1 s; the bare imports: the lines Enroot prints, as
the job's progress reads them); how long after its job's end each ``import --wait`` published
(the alias's ``published_at`` - the job's EndTime); the machine's load average at the start and
the end, its processors, and the image's size and entries.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch import ENROOT_IMPORT_MARKERS, NODE_PATH, install_standin, remove, watch_phases
from timing import verdict
from workloads import BigImages, BigImageSpec, big_images

from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.reference import parse_reference

CLI = str(Path(sys.executable).parent / "slurm-image")
MEMORY = "4G"
SQUASH_OPTIONS = "-comp lzo -noD -exit-on-error -mem 2048M"
"""What the product's job of ``MEMORY`` exports for ``enroot import`` (05-enroot-version.sh:
Enroot's default, ``-exit-on-error`` from Enroot 4.1, ``-mem`` half the job's memory)."""
PROFILE = """workspace_root = "{root}"

[image_build]
partition = "{partition}"
cpus_per_task = 2
memory = "{memory}"
time_limit = "1:00:00"
local_scratch = "{scratch}"
job_path = "{job_path}"
{importer}
[enroot]
environment = {{ ENROOT_ALLOW_HTTP = "yes" }}

[submitter]
kind = "sbatch"
"""
BARE = """#!/bin/bash
set -euo pipefail
scratch={scratch}
mkdir -p "$scratch/temp" "$scratch/data" "$scratch/run" {cache}
export PATH={path} HOME={home} ENROOT_ALLOW_HTTP=yes ENROOT_MAX_PROCESSORS=2
export ENROOT_TEMP_PATH="$scratch/temp" ENROOT_DATA_PATH="$scratch/data"
export ENROOT_CACHE_PATH={cache} ENROOT_RUNTIME_PATH="$scratch/run"
export ENROOT_SQUASH_OPTIONS="{squash}"
stamped() {{
    local line
    while IFS= read -r line; do printf '%s %s\\n' "$EPOCHREALTIME" "$line"; done
}}
printf '%s %s\\n' "$EPOCHREALTIME" "{start}"
enroot import -a {arch} -o "$scratch/bare.sqsh" {uri} 2> >(stamped)
rm -rf "$scratch"
"""
BARE_START = "bench: bare import started"
CONTESTANTS = ("bare", "bare_warm", "enroot", "enroot_warm", "stream", "stream_warm")
PAIRS = (("bare", "bare_warm"), ("enroot", "enroot_warm"), ("stream", "stream_warm"))
SMOKE = BigImageSpec(random_mib=32, random_files=2, small_files=1000, small_bytes=2048)
"""The image of ``--smoke``: every contestant runs in seconds."""
GOALS: dict[str, tuple[str, float]] = {
    "stream_vs_bare_enroot": ("<=", 0.7),
    "stream_warm_vs_enroot_warm": ("<=", 0.5),
}


class Account:
    """The account every command of the run is made as."""

    def __init__(self, name: str) -> None:
        entry = pwd.getpwnam(name)
        self.name, self.uid, self.gid = name, entry.pw_uid, entry.pw_gid

    def run(self, argv: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": NODE_PATH,
            "HOME": str(home),
            "USER": self.name,
            "LANG": "C.UTF-8",
            "SLURM_CONF": os.environ["SLURM_CONF"],
        }
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        command = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups"]
        done = subprocess.run(
            [*command, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=7200
        )
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv[:3])}... failed ({done.returncode}): {done.stderr}")
        return done

    def own(self, *paths: Path) -> None:
        for path in paths:
            os.chown(path, self.uid, self.gid)


def slurm_times(job_id: str) -> tuple[datetime, datetime]:
    shown = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True
    ).stdout
    fields = dict(item.split("=", 1) for item in shown.split() if "=" in item)
    if fields.get("JobState") != "COMPLETED":
        raise SystemExit(f"job {job_id} is {fields.get('JobState')}: {shown}")
    return datetime.fromisoformat(fields["StartTime"]), datetime.fromisoformat(fields["EndTime"])


def spans(seen: dict[str, float], end: float) -> dict[str, float]:
    """Each phase's seconds, from when it was first seen (epoch seconds) to the next one's, the
    last to ``end``."""
    ordered = sorted(seen.items(), key=lambda item: item[1])
    ends = [at for _, at in ordered[1:]] + [end] * bool(ordered)
    return {phase: max(0.0, stop - at) for (phase, at), stop in zip(ordered, ends, strict=True)}


def progress_phases(workspace: Path) -> AbstractContextManager[dict[str, float]]:
    """While the body runs, when (epoch seconds) the progress record of an attempt it made in
    ``workspace`` first named each phase; one attempt at a time."""
    jobs = Path(AttemptLayout(str(workspace), "x").jobs)
    earlier = set(jobs.iterdir()) if jobs.is_dir() else set()

    def records() -> list[Path]:
        return [r for r in jobs.glob("*/progress.json") if r.parent not in earlier]

    return watch_phases(records, time.time)


def bare_phases(output: str) -> dict[str, float]:
    """When (epoch seconds) a bare import's stamped output began each phase: download at the
    start, then each line of Enroot's that the job's progress also reads."""
    seen: dict[str, float] = {}
    for line in output.splitlines():
        stamp, _, text = line.partition(" ")
        phase = "download" if text == BARE_START else None
        for marker, name in ENROOT_IMPORT_MARKERS.items():
            if marker in text:
                phase = name
        if phase is not None and phase not in seen:
            seen[phase] = float(stamp)
    return seen


class Round:
    """One round's workspaces (one per importer), scratch, stand-in and profiles, the
    account's own."""

    def __init__(self, base: Path, account: Account, partition: str) -> None:
        self.base, self.account, self.partition = base, account, partition
        base.mkdir(mode=0o755)
        base.chmod(0o755)
        self.scratch = base / "scratch"
        self.scratch.mkdir(mode=0o711)  # as /tmp: walkable by the job's sandbox
        self.scratch.chmod(0o711)
        account.own(self.scratch)
        self.bin = install_standin(base / "standin")
        self.roots: dict[str, Path] = {}
        self.profiles: dict[str, Path] = {}
        for importer in ("enroot", "stream"):
            root = base / f"ws-{importer}"
            root.mkdir(mode=0o700)
            account.own(root)
            self.roots[importer] = root
            self.profiles[importer] = base / f"{importer}.toml"
            self.profiles[importer].write_text(
                PROFILE.format(
                    root=root,
                    partition=partition,
                    memory=MEMORY,
                    scratch=self.scratch,
                    job_path=f"{self.bin}:{NODE_PATH}",
                    importer='importer = "stream"\n' if importer == "stream" else "",
                )
            )

    def cli(self, importer: str, *argv: str) -> dict[str, Any]:
        profile = str(self.profiles[importer])
        done = self.account.run([CLI, "--profile", profile, *argv], self.base, self.base)
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def import_image(self, importer: str, name: str, reference: str) -> dict[str, Any]:
        root = self.roots[importer]
        with progress_phases(root) as seen:
            published = self.cli(
                importer, "import", reference, "--name", name, "--role", "client", "--wait",
                "--timeout", "3600", "--json",
            )  # fmt: skip
        start, end = slurm_times(str(published["job_id"]))
        shown = self.cli(importer, "show", name, "--json")
        at = datetime.fromisoformat(shown["published_at"].replace("Z", "+00:00"))
        record = Path(AttemptLayout(str(root), published["lifecycle_id"]).inspection_path_record)
        path = json.loads(record.read_text())["path"] if record.is_file() else "unknown"
        phases = spans(seen, end.astimezone().timestamp())
        if importer == "stream" and "extract" in phases:
            raise SystemExit(f"the stream job of {reference} extracted: {phases}")
        return {
            "seconds": (end - start).total_seconds(),
            "published_after_s": (at - end.astimezone()).total_seconds(),
            "path": path,
            "phases": phases,
        }

    def bare(self, reference: str, cache: Path, name: str) -> dict[str, Any]:
        script = self.base / f"{name}.sh"
        script.write_text(
            BARE.format(
                scratch=self.scratch / name,
                cache=cache,
                path=f"{self.bin}:{NODE_PATH}",
                home=self.base,
                squash=SQUASH_OPTIONS,
                start=BARE_START,
                arch=platform.machine(),
                uri=parse_reference(reference).enroot_uri,
            )
        )
        script.chmod(0o755)
        output = self.scratch / f"{name}.out"
        done = self.account.run(
            [
                *("sbatch", "--wait", "--parsable", "-p", self.partition, "-c", "2"),
                *("--mem", MEMORY, "-t", "1:00:00", "-o", str(output)),
                str(script),
            ],
            self.scratch,
            self.base,
        )
        start, end = slurm_times(done.stdout.strip().split(";")[0])
        seen = bare_phases(output.read_text(errors="replace"))
        return {"seconds": (end - start).total_seconds(), "phases": spans(seen, end.timestamp())}

    def pair(self, first: str, images: BigImages) -> dict[str, dict[str, Any]]:
        """The cold import of image 1 by ``first``'s contestant, then the warm one of image 2."""
        if first == "bare":
            cache = self.scratch / "bare-cache"
            return {
                "bare": self.bare(images.first, cache, "bare"),
                "bare_warm": self.bare(images.second, cache, "bare_warm"),
            }
        return {
            first: self.import_image(first, "big-first", images.first),
            f"{first}_warm": self.import_image(first, "big-second", images.second),
        }


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in samples.items() if values}


def figures_of(
    images: BigImages, rounds: int, ran: list[dict[str, dict[str, Any]]]
) -> dict[str, Any]:
    """The medians of every contestant and of its phases, and the ratios against the goals."""
    median = medians({name: [one[name]["seconds"] for one in ran] for name in CONTESTANTS})
    figures: dict[str, Any] = {
        "slurm_rounds": rounds,
        "slurm_nproc": len(os.sched_getaffinity(0)),
        "slurm_image_gb": images.tar_bytes / 1e9,
        "slurm_image_entries": images.entries,
        "slurm_image_compressed_gb": images.compressed_bytes / 1e9,
        "slurm_overlay_path": int(
            {one[name]["path"] for one in ran for name in CONTESTANTS if "path" in one[name]}
            == {"overlay"}
        ),
        "slurm_published_after_job_end_max_s": max(
            one[name]["published_after_s"]
            for one in ran
            for name in CONTESTANTS
            if "published_after_s" in one[name]
        ),
        "stream_vs_bare_enroot": median["stream"] / median["bare"],
        "enroot_job_vs_bare_enroot": median["enroot"] / median["bare"],
        "stream_warm_vs_enroot_warm": median["stream_warm"] / median["bare_warm"],
        "enroot_warm_job_vs_bare_enroot_warm": median["enroot_warm"] / median["bare_warm"],
    }
    for name in CONTESTANTS:
        figures[f"slurm_{name}_s"] = median[name]
        phases: dict[str, list[float]] = {}
        for one in ran:
            for phase, seconds in one[name]["phases"].items():
                phases.setdefault(phase, []).append(seconds)
        for phase, seconds in medians(phases).items():
            figures[f"slurm_{name}_{phase.replace('-', '_')}_s"] = seconds
    return figures


def rounded(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [rounded(item) for item in value]
    return round(value, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", required=True, help="the account the jobs run as")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partition", default="build")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--smoke", action="store_true", help="a small image (SMOKE): that it runs, no figures"
    )
    args = parser.parse_args()
    if os.geteuid() != 0 or "SLURM_CONF" not in os.environ or not shutil.which("scontrol"):
        raise SystemExit("bench/on_slurm.py runs as root with a cluster's SLURM_CONF exported")
    account = Account(args.user)
    spec = SMOKE if args.smoke else BigImageSpec()
    images = big_images(spec, lambda line: print(f"bench: {line}", file=sys.stderr))
    started, load_start = time.perf_counter(), os.getloadavg()
    ran: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="slurm-image-bench-slurm-") as tmp:
        Path(tmp).chmod(0o755)
        for number in range(args.rounds):
            site = Round(Path(tmp) / f"round{number}", account, args.partition)
            order = PAIRS if number % 2 == 0 else PAIRS[::-1]
            one: dict[str, dict[str, Any]] = {}
            for first, _ in order:
                one |= site.pair(first, images)
            ran.append(one)
            seconds = {name: one[name]["seconds"] for name in CONTESTANTS}
            print(f"bench: round {number + 1}: {json.dumps(seconds)}", file=sys.stderr)
            for name in CONTESTANTS:
                spent = ", ".join(f"{k} {v:.1f}" for k, v in one[name]["phases"].items())
                print(f"bench:   {name}: {spent}", file=sys.stderr)
            remove(site.base)
    figures = figures_of(images, args.rounds, ran)
    figures["slurm_load_start"] = list(load_start)
    figures["slurm_load_end"] = list(os.getloadavg())
    figures["seconds"] = time.perf_counter() - started
    shown = {key: rounded(value) for key, value in figures.items()}
    if args.json:
        print(json.dumps(shown, sort_keys=True))
        return 0
    for key, value in shown.items():
        print(f"{key:44} {value}{verdict(GOALS.get(key), value)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The big-image workload through a Slurm cluster, by Slurm's own run times.

Usage (as root, the local cluster and registry up, ``eval "$(scripts/local-slurm env)"``):
  .venv/bin/python bench/on_slurm.py --user NAME [--rounds N] [--partition P] [--json]

Where ``bench/run.py --big`` runs the job script as slurmd would, this submits it: every round,
in a fresh workspace of its own, ``slurm-image import REF --wait`` of image 1 and then of
image 2 (they share all but a small top layer; the layer cache starts empty each round), and a
bare ``enroot import`` of image 1 in a batch job of the same size (before the imports in odd
rounds, after them in even ones). Everything runs as the account NAME (``setpriv``): root's job
always unpacks, an ordinary user's inspects through the overlay where the node lets it open
/dev/fuse (each job records which; the figures say which it took). Enroot is this repository's
stand-in (tests/fixtures/enroot/enroot), installed per round as bench/batch.py installs it.

Figures: Slurm's run times (``scontrol show job``: EndTime - StartTime, whole seconds) as
medians and their ratios, and how long after its job's end each ``import --wait`` published
(the alias's ``published_at`` - the job's EndTime).
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
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch import NODE_PATH, install_standin, remove
from workloads import BigImageSpec, big_images

from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.reference import parse_reference

CLI = str(Path(sys.executable).parent / "slurm-image")
PROFILE = """workspace_root = "{root}"

[image_build]
partition = "{partition}"
cpus_per_task = 2
memory = "4G"
time_limit = "1:00:00"
local_scratch = "{scratch}"
job_path = "{job_path}"

[enroot]
environment = {{ ENROOT_ALLOW_HTTP = "yes" }}

[submitter]
kind = "sbatch"
"""
BARE = """#!/bin/bash
set -euo pipefail
scratch={scratch}
mkdir -p "$scratch/temp" "$scratch/data" "$scratch/cache" "$scratch/run"
export PATH={path} HOME={home} ENROOT_ALLOW_HTTP=yes ENROOT_MAX_PROCESSORS=2
export ENROOT_TEMP_PATH="$scratch/temp" ENROOT_DATA_PATH="$scratch/data"
export ENROOT_CACHE_PATH="$scratch/cache" ENROOT_RUNTIME_PATH="$scratch/run"
enroot import -a {arch} -o "$scratch/bare.sqsh" {uri}
rm -rf "$scratch"
"""


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


class Round:
    """One round's workspace, scratch, stand-in and profile, the account's own."""

    def __init__(self, base: Path, account: Account, partition: str) -> None:
        self.base, self.account = base, account
        base.mkdir(mode=0o755)
        base.chmod(0o755)
        self.root = base / "ws"
        self.root.mkdir(mode=0o700)
        self.scratch = base / "scratch"
        self.scratch.mkdir(mode=0o700)
        account.own(self.root, self.scratch)
        self.bin = install_standin(base / "standin")
        self.profile = base / "profile.toml"
        self.profile.write_text(
            PROFILE.format(
                root=self.root,
                partition=partition,
                scratch=self.scratch,
                job_path=f"{self.bin}:{NODE_PATH}",
            )
        )
        self.partition = partition

    def cli(self, *argv: str) -> dict[str, Any]:
        done = self.account.run([CLI, "--profile", str(self.profile), *argv], self.base, self.base)
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def import_image(self, name: str, reference: str) -> dict[str, Any]:
        published = self.cli(
            "import", reference, "--name", name, "--role", "client", "--wait",
            "--timeout", "3600", "--json",
        )  # fmt: skip
        start, end = slurm_times(str(published["job_id"]))
        shown = self.cli("show", name, "--json")
        at = datetime.fromisoformat(shown["published_at"].replace("Z", "+00:00"))
        record = Path(
            AttemptLayout(str(self.root), published["lifecycle_id"]).inspection_path_record
        )
        path = json.loads(record.read_text())["path"] if record.is_file() else "unknown"
        return {
            "seconds": (end - start).total_seconds(),
            "published_after_s": (at - end.astimezone()).total_seconds(),
            "path": path,
        }

    def bare(self, reference: str) -> float:
        script = self.base / "bare.sh"
        script.write_text(
            BARE.format(
                scratch=self.scratch / "bare",
                path=f"{self.bin}:{NODE_PATH}",
                home=self.base,
                arch=platform.machine(),
                uri=parse_reference(reference).enroot_uri,
            )
        )
        script.chmod(0o755)
        done = self.account.run(
            [
                *("sbatch", "--wait", "--parsable", "-p", self.partition, "-c", "2"),
                *("--mem", "4G", "-t", "1:00:00", "-o", str(self.scratch / "bare-%j.out")),
                str(script),
            ],
            self.scratch,
            self.base,
        )
        start, end = slurm_times(done.stdout.strip().split(";")[0])
        return (end - start).total_seconds()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", required=True, help="the account the jobs run as")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partition", default="build")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    if os.geteuid() != 0 or "SLURM_CONF" not in os.environ or not shutil.which("scontrol"):
        raise SystemExit("bench/on_slurm.py runs as root with a cluster's SLURM_CONF exported")
    account = Account(args.user)
    images = big_images(BigImageSpec(), lambda line: print(f"bench: {line}", file=sys.stderr))
    samples: dict[str, list[float]] = {"bare": [], "first": [], "second": []}
    published_after: list[float] = []
    paths: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="slurm-image-bench-slurm-") as tmp:
        Path(tmp).chmod(0o755)
        for number in range(args.rounds):
            site = Round(Path(tmp) / f"round{number}", account, args.partition)
            if number % 2 == 0:
                samples["bare"].append(site.bare(images.first))
            for name, reference in (("first", images.first), ("second", images.second)):
                ran = site.import_image(f"big-{name}", reference)
                samples[name].append(ran["seconds"])
                published_after.append(ran["published_after_s"])
                paths.add(ran["path"])
            if number % 2 == 1:
                samples["bare"].append(site.bare(images.first))
            print(f"bench: round {number + 1}: {json.dumps(samples)}", file=sys.stderr)
            remove(site.base)
    median = {name: statistics.median(values) for name, values in samples.items()}
    figures = {
        "slurm_rounds": args.rounds,
        "slurm_overlay_path": int(paths == {"overlay"}),
        "slurm_bare_import_s": median["bare"],
        "slurm_job_s": median["first"],
        "slurm_second_job_s": median["second"],
        "slurm_job_vs_bare_import": median["first"] / median["bare"],
        "slurm_second_vs_first_job": median["second"] / median["first"],
        "slurm_published_after_job_end_max_s": max(published_after),
    }
    rounded = {key: round(value, 2) for key, value in figures.items()}
    if args.json:
        print(json.dumps(rounded, sort_keys=True))
    else:
        for key, value in rounded.items():
            print(f"{key:40} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

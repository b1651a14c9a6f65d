"""On the local Slurm 22.05 cluster, run by name (docs/cli.md, ``path``): a job that runs
``$(slurm-image path a)`` as Pyxis would (``enroot create`` of the path, which resolves it with
``readlink -f``, then ``enroot start``) runs the image published as ``a``; after ``import
--replace a`` the same job runs the new image, the old artifact is kept for the jobs that
started with it, and a reader looping on the path during the replace never fails to open it.

One cluster only: the link is the store's, swapped the same whichever scheduler ran the job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

from harness import registry_images  # noqa: F401  (the fixture, registered by import)

from clusters import Cluster, cluster, enroot_table
from support import PACKAGE_DIR, install_enroot_standin, run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

JOB_PATH = "/usr/local/bin:/usr/bin:/bin"
SQUASHFS_MAGIC = b"hsqs"
# What the test job runs in the image: whether the image holds the `vllm` distribution (the
# `serving` test image does, `client` does not).
PROBE = "import importlib.util as u; print('vllm' if u.find_spec('vllm') else 'no-vllm')"


@pytest.fixture(scope="module", params=["22.05"], ids=["slurm-22.05"])
def local_slurm(request: pytest.FixtureRequest) -> Cluster:
    """Slurm 22.05 alone (see the module docstring)."""
    return cluster(str(request.param))


class Site:
    def __init__(self, base: Path, local: Cluster) -> None:
        self.base = base
        self.local = local
        self.workspace = base / "ws"
        self.workspace.mkdir()
        self.bin = base / "bin"
        job_path = JOB_PATH
        if not shutil.which("enroot"):
            install_enroot_standin(self.bin)
            job_path = f"{self.bin}:{JOB_PATH}"
        else:
            self.bin.mkdir(mode=0o755)
        self.profile = base / "slurm-image.toml"
        self.profile.write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:15:00"\n'
            f'job_path = "{job_path}"\n' + enroot_table() + local.submitter_table()
        )
        # the command line as a job finds it on the node (this host, on Slurm 22.05)
        command = self.bin / "slurm-image"
        command.write_text(
            "#!/bin/sh\n"
            f"PYTHONPATH={PACKAGE_DIR} exec {sys.executable} -m slurm_image.composition"
            f' --profile {self.profile} "$@"\n'
        )
        command.chmod(0o755)
        self.env = {"SLURM_CONF": local.slurm_conf, "HOME": str(base)}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(
            "--profile", str(self.profile), *args, cwd=self.base, env=self.env, inherit=False,
            timeout=900,
        )  # fmt: skip

    def import_(self, source: str, *more: str) -> dict[str, Any]:
        done = self.run(
            "--json", "import", source, "--name", "a", "--role", "client", "--wait",
            "--timeout", "800", *more,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        assert result["state"] == "PUBLISHED", result
        return result

    def run_by_name(self, number: int) -> tuple[str, str]:
        """A job that does what Pyxis does with ``--container-image=$(slurm-image path a)``:
        the image Enroot resolved, and what the probe printed inside it."""
        work = self.base / f"run-{number}"
        work.mkdir(mode=0o755)
        (work / "rc").write_text('exec "$@"\n')
        (work / "sysconf").mkdir()  # no hooks: the stock ones copy the host's files in
        script = work / "job.sh"
        script.write_text(
            "#!/bin/bash\n"
            "set -euo pipefail\n"
            f"export PATH={self.bin}:{JOB_PATH}\n"
            f"export ENROOT_DATA_PATH={work}/data ENROOT_CACHE_PATH={work}/cache"
            f" ENROOT_RUNTIME_PATH={work}/runtime ENROOT_TEMP_PATH={work}"
            f" ENROOT_SYSCONF_PATH={work}/sysconf\n"
            "image=$(slurm-image path a)\n"
            'echo "resolved=$(readlink -f "$image")"\n'
            'enroot create -n by-name "$image" >&2\n'
            f'SHELL=/bin/sh enroot start --root --rc {work}/rc by-name python3 -c "{PROBE}"\n'
        )
        script.chmod(0o755)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF": self.local.slurm_conf}
        done = subprocess.run(
            [
                self.local.sbatch, "--wait", "--parsable", "--partition", "build",
                "--output", f"{work}/out", "--error", f"{work}/err", f"--chdir={work}",
                str(script),
            ],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        errors = (work / "err").read_text() if (work / "err").exists() else ""
        assert done.returncode == 0, done.stderr + errors
        lines = (work / "out").read_text().splitlines()
        resolved = next(line.removeprefix("resolved=") for line in lines if "resolved=" in line)
        return resolved, lines[-1]


class Reader:
    """A loop opening the stable path, as a job starting at any moment would, until stopped:
    every artifact it found, and every time it failed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seen: list[str] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while True:
            stopping = self._stop.is_set()
            try:
                with open(self.path, "rb") as image:
                    if image.read(4) != SQUASHFS_MAGIC:
                        self.failures.append("not a squashfs image")
                    self.seen.append(os.readlink(f"/proc/self/fd/{image.fileno()}"))
            except OSError as error:
                self.failures.append(f"{type(error).__name__}: {error}")
            if stopping:
                return  # one read after the stop: the state the replace left

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def test_a_job_runs_the_image_by_name_before_and_after_a_replace(
    world_readable_tmp: Path,
    local_slurm: Cluster,
    registry_images: dict[str, str],  # noqa: F811
) -> None:
    site = Site(world_readable_tmp, local_slurm)
    first = site.import_(registry_images["client"])
    path = site.run("path", "a")
    assert path.returncode == 0, path.stderr
    stable = path.stdout.strip()
    assert stable == f"{site.workspace}/images/by-name/{first['architecture']}/a.sqsh"

    assert site.run_by_name(1) == (first["path"], "no-vllm")

    with Reader(stable) as reader:
        second = site.import_(registry_images["serving"], "--replace")
    assert second["path"] != first["path"]
    assert reader.failures == []
    assert reader.seen[0] == first["path"] and reader.seen[-1] == second["path"]
    assert set(reader.seen) == {first["path"], second["path"]}

    assert site.run("path", "a").stdout.strip() == stable
    assert site.run("path", "a", "--pinned").stdout.strip() == second["path"]
    assert site.run_by_name(2) == (second["path"], "vllm")
    # kept for the jobs that started with it: gc leaves it within the grace
    gc = site.run("--json", "gc")
    assert gc.returncode == 0, gc.stderr
    assert first["path"] not in [item["path"] for item in json.loads(gc.stdout)["removed"]]
    assert Path(first["path"]).is_file()

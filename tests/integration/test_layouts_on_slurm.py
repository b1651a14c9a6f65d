"""Each image layout of scripts/layout-roots once through the real job on the local cluster:
`slurm-image inspect` of a squashfs image of the layout, submitted with sbatch, run by slurmd
with the Enroot stand-in on the job's PATH, and the record the job wrote validated on the host
against the image's digest, fact by fact.

The image is squashed from the cached root with the image's Env written to /etc/environment, as
`enroot import` writes it (the bind mount that puts it there lives in a private mount namespace,
so the cached root stays as built). Each image is squashed once per machine and version of its
root (SQUASHED, under a lock the clusters' workers share) and copied to each cluster's site.
All jobs are submitted at once and waited for together.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusters import TEST_SQUASH_OPTIONS
from slurm_image.domain.inspection import InspectionRecord, validate_inspection
from slurm_image.domain.job import JobState
from support import install_enroot_standin, run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.debian_roots, pytest.mark.full_only]

REPO = Path(__file__).resolve().parents[2]
ROOTS = Path(
    os.environ.get("SLURM_IMAGE_ROOTS_CACHE") or Path.home() / ".cache" / "slurm-image" / "roots"
)
LAYOUTS = ROOTS / "layouts"
SQUASHED = Path("/var/tmp/slurm-image-layout-images")
JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SQUASH_EXCLUDE = ["usr/share/doc", "usr/share/locale", "usr/share/man", "var/lib/apt/lists"]
APT_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
TERMINAL = {state.value for state in JobState if state.is_terminal}

# (layout, role, client_distributions): one job per layout, plus the required distribution
# that is missing, which the job must refuse.
JOBS = {
    "pip-upgraded": ("pip-upgraded", "client", []),
    "venv": ("venv", "serving", []),
    "uv-system": ("uv-system", "serving", []),
    "conda": ("conda", "client", []),
    "required": ("required", "client", ["six", "idna"]),
    "required-missing": ("required", "client", ["six", "numpy"]),
}


def _absent(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required when CI=true)")
    pytest.skip(reason)


@dataclass
class Finished:
    layout: str
    manifest: dict[str, Any]
    sqsh: Path
    status: dict[str, Any]
    result: Path
    log: str

    def record(self, role: str) -> InspectionRecord:
        digest = hashlib.sha256(self.sqsh.read_bytes()).hexdigest()
        return validate_inspection(self.result.read_bytes(), role=role, sqsh_sha256=digest)  # type: ignore[arg-type]


def _squash(layout: str, manifest: dict[str, Any], target: Path) -> Path:
    """The layout's image at ``target``: a copy of the one squashed from this version of its
    root (the manifest and the root's completion stamp), squashed first when there is none."""
    stamp = (LAYOUTS / layout / ".slurm-image-root-complete").stat().st_mtime_ns
    key = hashlib.sha256(
        json.dumps([manifest, stamp, TEST_SQUASH_OPTIONS], sort_keys=True).encode()
    ).hexdigest()
    SQUASHED.mkdir(mode=0o755, exist_ok=True)
    squashed = SQUASHED / f"{layout}-{key[:16]}.sqsh"
    with (SQUASHED / f"{layout}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not squashed.is_file():
            for stale in SQUASHED.glob(f"{layout}-*.sqsh"):
                stale.unlink()
            partial = squashed.with_suffix(".partial")
            _mksquashfs(layout, manifest, partial)
            partial.rename(squashed)
    shutil.copyfile(squashed, target)
    return target


def _mksquashfs(layout: str, manifest: dict[str, Any], target: Path) -> None:
    root = LAYOUTS / layout
    environment = target.with_suffix(".environment")
    environment.write_text("".join(f"{line}\n" for line in manifest["env"]))
    script = (
        'mount --bind "$1" "$2/etc/environment" && root=$2 image=$3 && shift 3 && '
        'exec mksquashfs "$root" "$image" "$@"'
    )
    options = ["-all-root", "-no-progress", "-quiet", "-noappend", *TEST_SQUASH_OPTIONS.split()]
    options += ["-wildcards", "-e", *SQUASH_EXCLUDE, ".slurm-image-root-complete"]
    command = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "squash"]
    try:
        subprocess.run(
            [*command, str(environment), str(root), str(target), *options],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=600,
        )
    finally:
        environment.unlink(missing_ok=True)


class Site:
    def __init__(self, base: Path, local: Any) -> None:
        self.base = base
        self.local = local
        self.workspace = base / "ws"
        self.workspace.mkdir()
        self.standin = install_enroot_standin(base / "standin", {})
        (base / "scratch").mkdir()

    def profile(self, name: str, required: list[str]) -> Path:
        path = self.base / f"{name}.toml"
        path.write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\n'
            f'time_limit = "0:10:00"\nlocal_scratch = "{self.base / "scratch"}"\n'
            f'job_path = "{self.standin}:{JOB_PATH}"\n'
            f"[inspection]\nclient_distributions = {json.dumps(required or ['pip'])}\n"
            + self.local.submitter_table()
        )
        return path

    def cli(self, profile: Path, *args: str) -> dict[str, Any]:
        env = {"SLURM_CONF": self.local.slurm_conf, "HOME": str(self.base)}
        done = run_cli(
            "--profile",
            str(profile),
            *args,
            "--json",
            cwd=self.base,
            env=env,
            inherit=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data


@pytest.fixture(scope="module")
def finished(
    local_slurm: Any,
) -> Iterator[dict[str, Finished]]:
    if shutil.which("mksquashfs") is None or shutil.which("unshare") is None:
        _absent("squashfs-tools and unshare are needed")
    manifests = {}
    for layout in sorted({spec[0] for spec in JOBS.values()}):
        manifest = LAYOUTS / f"{layout}.json"
        if (
            not (LAYOUTS / layout / ".slurm-image-root-complete").is_file()
            or not manifest.is_file()
        ):
            _absent(f"no {layout} layout under {LAYOUTS}: run scripts/layout-roots")
        manifests[layout] = json.loads(manifest.read_text())
    # where the sandbox's id can walk (pytest's own directories are 0700 for root): the
    # stand-in and the node-local scratch are here
    base = Path(tempfile.mkdtemp(prefix="slurm-image-layouts-"))
    base.chmod(0o755)
    site = Site(base, local_slurm)
    images = {
        layout: _squash(layout, manifest, base / f"{layout}.sqsh")
        for layout, manifest in manifests.items()
    }
    submitted = {}
    for job, (layout, role, required) in JOBS.items():
        profile = site.profile(job, required)
        answer = site.cli(profile, "inspect", str(images[layout]), "--name", job, "--role", role)
        submitted[job] = (profile, answer["lifecycle_id"])
    deadline = time.monotonic() + 900
    statuses: dict[str, dict[str, Any]] = {}
    while len(statuses) < len(submitted):
        assert time.monotonic() < deadline, f"jobs still running: {set(submitted) - set(statuses)}"
        for job, (profile, lifecycle_id) in submitted.items():
            if job in statuses:
                continue
            status = site.cli(profile, "status", lifecycle_id)["lifecycles"][0]
            if status["state"] in TERMINAL:
                statuses[job] = status
        time.sleep(1)
    results = {}
    for job, (_, lifecycle_id) in submitted.items():
        layout = JOBS[job][0]
        job_dir = site.workspace / "images" / ".tmp" / "jobs" / lifecycle_id
        logs = "".join(p.read_text() for p in sorted(job_dir.glob("slurm-*.err")))
        results[job] = Finished(
            layout,
            manifests[layout],
            images[layout],
            statuses[job],
            job_dir / "output" / "inspection.json",
            logs,
        )
    try:
        yield results
    finally:
        shutil.rmtree(base, ignore_errors=True)


def completed(finished: dict[str, Finished], job: str) -> Finished:
    done = finished[job]
    assert (done.status["state"], done.status["exit_code"]) == ("COMPLETED", 0), done.log
    return done


def test_apt_pip_upgraded_by_pip(finished: dict[str, Finished]) -> None:
    done = completed(finished, "pip-upgraded")
    facts = done.record("client").model_dump(mode="json")["facts"]
    pip = done.manifest["versions"]["pip"]
    assert facts["installer"] == {"name": "pip", "version": pip, "path": "/usr/local/bin/pip"}
    assert [(s["name"], s["location"]) for s in facts["shadowed"]] == [("pip", APT_DIST_PACKAGES)]
    assert facts["shadowed"][0]["version"] != pip
    assert facts["python"]["executable"] == "/usr/bin/python3.11"


def test_venv_first_on_the_image_path(finished: dict[str, Finished]) -> None:
    done = completed(finished, "venv")
    facts = done.record("serving").model_dump(mode="json")["facts"]
    vllm = done.manifest["versions"]["vllm"]
    assert facts == {
        "server": {"name": "vllm", "version": vllm, "path": "/opt/venv/bin/vllm"},
        "shadowed": [],
    }


def test_vllm_installed_by_uv(finished: dict[str, Finished]) -> None:
    done = completed(finished, "uv-system")
    facts = done.record("serving").model_dump(mode="json")["facts"]
    vllm = done.manifest["versions"]["vllm"]
    assert facts["server"] == {"name": "vllm", "version": vllm, "path": "/usr/local/bin/vllm"}


def test_conda_prefix_by_the_rc_fallback(finished: dict[str, Finished]) -> None:
    done = completed(finished, "conda")
    facts = done.record("client").model_dump(mode="json")["facts"]
    assert facts["python"]["executable"] == done.manifest["executable"]
    assert facts["python"]["version"] == done.manifest["versions"]["python"]
    assert facts["installer"] == {
        "name": "pip",
        "version": done.manifest["versions"]["pip"],
        "path": "/opt/conda/bin/pip",
    }


def test_required_distributions_present_and_shadowed(finished: dict[str, Finished]) -> None:
    done = completed(finished, "required")
    record = done.record("client")
    facts = record.model_dump(mode="json")["facts"]
    versions = done.manifest["versions"]
    assert {"name": "six", "version": versions["six"]} in facts["distributions"]
    assert {"name": "idna", "version": versions["idna"]} in facts["distributions"]
    assert [(s["name"], s["location"]) for s in facts["shadowed"]] == [("six", APT_DIST_PACKAGES)]


def test_required_distribution_missing_fails_the_job_naming_it(
    finished: dict[str, Finished],
) -> None:
    done = finished["required-missing"]
    assert (done.status["state"], done.status["exit_code"]) == ("FAILED", 76), done.log
    assert not done.result.exists()
    assert "numpy not installed for /usr/bin/python3" in done.log
    assert "[inspection] client_distributions" in done.log

"""On the local cluster, through the CLI: an import from the authenticated registry of
scripts/local-registry (htpasswd over TLS, HTTP/2) succeeds with the user's credentials and fails
cleanly without; afterwards the password is found nowhere but in the user's own file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

# the execution suite's fixtures of the registries, registered here by import
from harness import AuthRegistry, auth_registry, registry_images  # noqa: F401

from clusters import enroot_table
from support import install_enroot_standin, run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Site:
    def __init__(
        self, base: Path, walkable: Path, local: Any, registry: AuthRegistry, password: str | None
    ):
        self.base = base
        self.workspace = base / "ws"
        self.workspace.mkdir()
        self.local = local
        ca_file = base / "ca.crt"  # where every node sees it (24.11's node root binds /tmp)
        shutil.copy(registry.ca_file, ca_file)
        ca_file.chmod(0o644)
        # the stand-in where the sandbox's id can run it (and read the CA, and log)
        standin = install_enroot_standin(
            walkable / "standin",
            {"ca_file": str(ca_file), "log": str(walkable / "standin" / "enroot.jsonl")},
        )
        self.netrc = base / ".config" / "enroot" / ".credentials"
        self.netrc.parent.mkdir(parents=True)
        entry = f"machine {registry.host} login {registry.user} password {password}\n"
        self.netrc.write_text("machine nvcr.io login x password y\n" + (entry if password else ""))
        self.netrc.chmod(0o600)
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:10:00"\n'
            f'job_path = "{standin}:{JOB_PATH}"\n'
            + enroot_table('credentials_file = "~/.config/enroot/.credentials"', allow_http=False)
            + self.local.submitter_table()
        )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"SLURM_CONF": self.local.slurm_conf, "HOME": str(self.base)}
        return run_cli(*args, "--json", cwd=self.base, env=env, inherit=False, timeout=120)

    def finished(self, lifecycle_id: str, timeout_s: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            done = self.run("status", lifecycle_id)
            assert done.returncode == 0, done.stderr
            status: dict[str, Any] = json.loads(done.stdout)["lifecycles"][0]
            if status["state"] in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST"}:
                return status
            assert time.monotonic() < deadline, status
            time.sleep(1)


def holding(secret: bytes, root: Path) -> list[str]:
    found = [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and secret in path.read_bytes()
    ]
    listing = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, check=True)
    if secret in listing.stdout:
        found.append("the process list")
    for proc in Path("/proc").iterdir():
        for part in ("cmdline", "environ"):
            try:
                if proc.name.isdigit() and secret in (proc / part).read_bytes():
                    found.append(f"/proc/{proc.name}/{part}")
            except OSError:
                pass
    return sorted(found)


def import_(site: Site, source: str) -> tuple[dict[str, Any], Path]:
    done = site.run("import", source, "--name", "app", "--role", "client")
    assert done.returncode == 0, done.stderr
    lifecycle_id = json.loads(done.stdout)["lifecycle_id"]
    status = site.finished(lifecycle_id)
    job_dir = site.workspace / "images" / ".tmp" / "jobs" / lifecycle_id
    return status, job_dir


@pytest.mark.full_only
def test_import_with_credentials_on_the_cluster_succeeds_and_leaks_nothing(
    tmp_path: Path, world_readable_tmp: Path, local_slurm: Any, request: pytest.FixtureRequest
) -> None:
    registry: AuthRegistry = request.getfixturevalue("auth_registry")
    site = Site(tmp_path, world_readable_tmp, local_slurm, registry, registry.password)

    status, job_dir = import_(site, registry.images["client"])

    log = (job_dir / f"slurm-{status['job_id']}.err").read_text()
    assert (status["state"], status["exit_code"]) == ("COMPLETED", 0), log
    assert f"importing with the credentials staged for {registry.host}" in log
    assert (job_dir / "candidate.sqsh").is_file()
    assert not (job_dir / "enroot" / "config" / ".credentials").exists()
    plan = json.loads((job_dir / "plan.json").read_text())
    assert plan["credentials_host"] == registry.host
    assert holding(registry.password.encode(), tmp_path) == [".config/enroot/.credentials"]
    assert holding(registry.password.encode(), world_readable_tmp) == []


@pytest.mark.parametrize("password", [None, "wrong-canary-0c1d2e3f"])
def test_import_without_or_with_wrong_credentials_fails_cleanly(
    tmp_path: Path,
    world_readable_tmp: Path,
    local_slurm: Any,
    request: pytest.FixtureRequest,
    password: str | None,
) -> None:
    registry: AuthRegistry = request.getfixturevalue("auth_registry")
    site = Site(tmp_path, world_readable_tmp, local_slurm, registry, password)

    status, job_dir = import_(site, registry.images["nopython"])

    log = (job_dir / f"slurm-{status['job_id']}.err").read_text()
    assert (status["state"], status["exit_code"]) == ("FAILED", 1), log
    used = "with the credentials staged for" if password else "without credentials"
    assert f"enroot import from {registry.address} failed with status 1, {used}" in log
    assert not (job_dir / "candidate.sqsh").exists()
    assert not (job_dir / "candidate.sqsh.partial").exists()
    assert not list((site.workspace / "images").glob("*.sqsh"))  # nothing published
    if password:
        assert holding(password.encode(), tmp_path) == [".config/enroot/.credentials"]
        assert holding(password.encode(), world_readable_tmp) == []

"""On the local cluster, through the CLI: a registry that answers the pinned digest with another
image's manifest (tests/lying_registry.py) gets nothing imported: the job exits 79, nothing is
published and no source is recorded; the genuine image from the genuine registry then runs a
job of its own and is published, its source recorded with the chain the job verified, which
then answers the next import from the store."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters import enroot_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

# the execution suite's fixture of the local registry's test images, registered here by import
from harness import registry_images  # noqa: F401

from lying_registry import Answer, LyingRegistry, lying_registry
from support import install_enroot_standin, run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture
def images(request: pytest.FixtureRequest) -> dict[str, str]:
    found: dict[str, str] = request.getfixturevalue("registry_images")
    return found


@pytest.fixture
def registry(images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


class Site:
    def __init__(self, base: Path, local: Any) -> None:
        self.base = base
        self.workspace = base / "ws"
        self.workspace.mkdir()
        job_path = JOB_PATH
        if not shutil.which("enroot"):
            # where the image's unprivileged id (a root job's sandbox) can run it
            install_enroot_standin(base / "bin")
            job_path = f"{base}/bin:{JOB_PATH}"
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:15:00"\n'
            f'job_path = "{job_path}"\n' + enroot_table() + local.submitter_table()
        )
        self.env = {"SLURM_CONF": local.slurm_conf, "HOME": str(base)}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--json", cwd=self.base, env=self.env, inherit=False, timeout=900)

    def import_(self, source: str) -> subprocess.CompletedProcess[str]:
        return self.run(
            "import", source, "--name", "app", "--role", "client", "--wait", "--timeout", "800"
        )

    def store(self, name: str) -> list[str]:
        directory = self.workspace / "images" / name
        return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def test_a_lying_registry_gets_nothing_published_and_the_genuine_image_then_runs_a_job(
    world_readable_tmp: Path, local_slurm: Any, registry: LyingRegistry, images: dict[str, str]
) -> None:
    genuine = images["client"]
    pin = genuine.rsplit("@", 1)[1]
    nopython = images["nopython"].rsplit("@", 1)[1]
    other = registry.manifest("slurm-image-test/nopython", nopython)
    registry.answer(Answer(f"/v2/slurm-image-test/client/manifests/{pin}", other))
    site = Site(world_readable_tmp, local_slurm)

    lied = site.import_(f"{registry.address}/slurm-image-test/client:1@{pin}")

    assert lied.returncode == 4, lied.stdout + lied.stderr
    assert "FAILED exit 79" in lied.stderr
    assert "the registry's answer does not match the pinned digest" in lied.stderr
    assert site.store("aliases") == [] and site.store("artifacts") == []
    assert site.store("sources") == []
    jobs = list((site.workspace / "images" / ".tmp" / "jobs").iterdir())
    assert len(jobs) == 1
    assert not (jobs[0] / "candidate.sqsh").exists() and not (jobs[0] / "chain.json").exists()

    published = site.import_(genuine)

    assert published.returncode == 0, published.stderr
    result = json.loads(published.stdout)
    assert result["state"] == "PUBLISHED" and result["from_store"] is False  # a job ran
    # the job imported for the node's architecture and recorded it
    assert site.store("sources") == [f"{pin.split(':')[1]}.{platform.machine()}.json"]
    assert result["architecture"] == platform.machine()
    attempt = site.workspace / "images" / ".tmp" / "jobs" / result["lifecycle_id"]
    chain = json.loads((attempt / "chain.json").read_text())
    assert chain["pinned"] == chain["manifest"] == pin
    source = json.loads(
        (site.workspace / "images" / "sources" / site.store("sources")[0]).read_text()
    )
    assert source["chain"] == chain == result["chain"]  # the store records what the job verified

    again = site.run(
        "import", genuine, "--name", "again", "--role", "client", "--arch", platform.machine()
    )

    assert again.returncode == 0, again.stderr
    answered = json.loads(again.stdout)
    assert answered.get("from_store") is True and answered["chain"] == chain

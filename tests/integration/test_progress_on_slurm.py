"""The job's progress on the local cluster: ``status --json`` of a running import names its
phases as the job passes them, and ``import --wait`` publishes after the job's progress record
says it ended (docs/design.md, "Progress").

Needs the local cluster, the local registry with the test images (scripts/test-images) and
squashfs-tools; the jobs use the Enroot stand-in unless the node has Enroot. With the stand-in,
its hooks hold the import a moment at each of its stages so that a poll can meet each one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from slurm_image.domain.paths import AttemptLayout
from support import install_enroot_standin

pytestmark = [pytest.mark.slurm, pytest.mark.full_only]

ROOT = Path(__file__).resolve().parents[2]
TEST_IMAGES = Path(
    os.environ.get(
        "SLURM_IMAGE_TEST_IMAGES",
        Path.home() / ".cache" / "slurm-image" / "test-images" / "images.json",
    )
)
HOLD = "sleep 3"


def _need(condition: bool, reason: str) -> None:
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required when CI=true)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    _need(bool(shutil.which("mksquashfs")), "squashfs-tools missing")
    _need(TEST_IMAGES.is_file(), f"no test images at {TEST_IMAGES} (scripts/test-images)")
    try:
        with urllib.request.urlopen("http://127.0.0.1:5000/v2/", timeout=3):
            pass
    except OSError:
        _need(False, "no registry on 127.0.0.1:5000 (scripts/local-registry up)")
    found: dict[str, str] = json.loads(TEST_IMAGES.read_text())
    return found


class Site:
    def __init__(self, base: Path, local: Any) -> None:
        self.base = base
        self.workspace = base / "ws"
        self.workspace.mkdir()
        job_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        if not shutil.which("enroot"):
            hooks = {
                stage: HOLD
                for stage in ("import_downloaded", "import_extracted", "import", "create")
            }
            install_enroot_standin(base / "bin", {"hooks": hooks})
            job_path = f"{base}/bin:{job_path}"
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\n'
            f'time_limit = "0:15:00"\njob_path = "{job_path}"\n'
            '[enroot]\nenvironment = { ENROOT_ALLOW_HTTP = "yes" }\n'
            + local.submitter_table("sbatch")
        )
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(ROOT / ".pkg"),
            "SLURM_CONF": local.slurm_conf,
            "HOME": str(base),
        }

    def json(self, *args: str) -> dict[str, Any]:
        result = subprocess.run(
            [sys.executable, "-m", "slurm_image.composition", *args, "--json"],
            cwd=self.base,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert result.returncode == 0, result.stderr
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    def progress(self, lifecycle_id: str) -> dict[str, Any]:
        path = AttemptLayout(str(self.workspace), lifecycle_id).progress_record
        document: dict[str, Any] = json.loads(Path(path).read_text())
        return document


TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "LOST"}


def test_status_of_a_running_import_names_its_phases_as_the_job_passes_them(
    world_readable_tmp: Path, local_slurm: Any, images: dict[str, str]
) -> None:
    site = Site(world_readable_tmp, local_slurm)
    submitted = site.json("import", images["client"], "--name", "app", "--role", "client")
    lifecycle_id = submitted["lifecycle_id"]
    phases: list[str] = []
    for _ in range(2000):  # bounded: a job that never ends fails below, never hangs
        (status,) = site.json("status", lifecycle_id)["lifecycles"]
        if status["phase"] and (not phases or phases[-1] != status["phase"]):
            phases.append(status["phase"])
        if status["state"] in TERMINAL:
            break
    assert status["state"] == "COMPLETED", (status, phases)
    assert status["phase"] == "done" and status["progress"]["ended"] == "done"
    assert len(set(phases)) >= 3, phases
    order = ["checks", "enroot-version", "download", "extract", "squash", "hash", "inspect", "done"]
    assert phases == sorted(phases, key=order.index)  # seen in the order the job passes them


def test_import_wait_publishes_after_the_progress_record_says_the_job_ended(
    world_readable_tmp: Path, local_slurm: Any, images: dict[str, str]
) -> None:
    site = Site(world_readable_tmp, local_slurm)

    published = site.json(
        "import", images["client"], "--name", "app", "--role", "client", "--wait",
        "--timeout", "800",
    )  # fmt: skip

    assert published["state"] == "PUBLISHED"
    end = site.progress(published["lifecycle_id"])
    assert (end["phase"], end["ended"], end["exit_code"]) == ("done", "done", 0)
    shown = site.json("show", "app")
    published_at = datetime.fromisoformat(shown["published_at"].replace("Z", "+00:00"))
    # whole seconds in the record: the publication is in the second the job ended or later
    assert int(published_at.timestamp()) >= end["updated_at"]

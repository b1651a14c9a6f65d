"""The lifecycle's end on the local cluster: ``import --wait`` and ``inspect --wait`` through
sbatch and slurmrestd end in published aliases that ``show --verify`` resolves; four processes
inspecting the same .sqsh under one alias end with one consistent winner.

Needs the local cluster, the local registry with the test images (scripts/test-images) and
squashfs-tools; the jobs use the Enroot stand-in unless the node has Enroot.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from clusters import enroot_table

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / ".pkg")  # the one package, slurm_image
STANDIN = ROOT / "tests" / "fixtures" / "enroot" / "enroot"
TEST_IMAGES = Path(
    os.environ.get(
        "SLURM_IMAGE_TEST_IMAGES",
        Path.home() / ".cache" / "slurm-image" / "test-images" / "images.json",
    )
)


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
    def __init__(self, base: Path, kind: str, local: Any) -> None:
        self.base = base
        self.workspace = base / "ws"
        self.workspace.mkdir()
        job_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        if not shutil.which("enroot"):
            (base / "bin").mkdir()
            shutil.copy(STANDIN, base / "bin" / "enroot")
            job_path = f"{base}/bin:{job_path}"
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\n'
            f'time_limit = "0:15:00"\njob_path = "{job_path}"\n'
            + enroot_table()
            + local.submitter_table(kind)
        )
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": SRC,
            "SLURM_CONF": local.slurm_conf,
            "HOME": str(base),
        }

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "slurm_image.composition", *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            cwd=self.base,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    def json(self, *args: str) -> dict[str, Any]:
        result = self.run(*args, "--json")
        assert result.returncode == 0, result.stderr
        data: dict[str, Any] = json.loads(result.stdout)
        return data


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", ["sbatch", pytest.param("rest-tcp", marks=pytest.mark.full_only)])
def test_import_wait_publishes_and_show_resolves(
    world_readable_tmp: Path, kind: str, local_slurm: Any, images: dict[str, str]
) -> None:
    site = Site(world_readable_tmp, kind, local_slurm)
    published = site.json(
        "import",
        images["client"],
        "--name",
        "app",
        "--role",
        "client",
        "--wait",
        "--timeout",
        "800",
    )
    assert published["state"] == "PUBLISHED" and published["from_store"] is False
    shown = site.json("show", "app", "--verify")
    assert shown["path"] == published["path"]
    assert shown["path"].startswith(f"{site.workspace}/images/artifacts/")
    assert _digest(shown["path"]) == shown["sqsh_sha256"]
    assert shown["facts"]["installer"]["name"] == "pip"
    # the import above was for the node's architecture; one that names it is answered
    assert published["architecture"] == platform.machine()
    again = site.json(
        "import", images["client"], "--name", "same", "--role", "client",
        "--arch", platform.machine(),
    )  # fmt: skip
    assert again["from_store"] is True and again["path"] == shown["path"]

    copy = world_readable_tmp / "shared" / "copy.sqsh"
    copy.parent.mkdir()
    shutil.copy(shown["path"], copy)
    inspected = site.json(
        "inspect", str(copy), "--name", "copy", "--role", "client", "--wait", "--timeout", "800"
    )
    assert inspected["state"] == "PUBLISHED" and inspected["path"] == str(copy)
    copy_shown = site.json("show", "copy", "--verify")
    assert copy_shown["sqsh_sha256"] == shown["sqsh_sha256"] == _digest(str(copy))


@pytest.mark.full_only
def test_four_processes_inspecting_one_sqsh_under_one_alias(
    world_readable_tmp: Path, local_slurm: Any, images: dict[str, str]
) -> None:
    site = Site(world_readable_tmp, "sbatch", local_slurm)
    served = site.json(
        "import",
        images["serving"],
        "--name",
        "srv",
        "--role",
        "serving",
        "--wait",
        "--timeout",
        "800",
    )
    same = world_readable_tmp / "shared" / "SAME.sqsh"
    same.parent.mkdir()
    shutil.copy(served["path"], same)
    racers = [
        subprocess.Popen(
            site.command(
                "inspect",
                str(same),
                "--name",
                "race",
                "--role",
                "serving",
                "--wait",
                "--timeout",
                "800",
                "--json",
            ),
            cwd=site.base,
            env=site.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [(p.wait(900), *p.communicate()) for p in racers]
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 6, 6, 6], outcomes
    listed = site.json("list")["images"]
    assert [image["name"] for image in listed].count("race") == 1
    race = site.json("show", "race", "--verify")
    assert race["path"] == str(same) and _digest(str(same)) == race["sqsh_sha256"]
    images_dir = site.workspace / "images"
    leftovers = [
        str(p)
        for p in images_dir.rglob("*")
        if p.is_file() and p.name.endswith((".tmp", ".partial"))
    ]
    assert leftovers == []
    assert list((images_dir / ".tmp" / "markers").iterdir()) == []
    assert list((images_dir / ".tmp" / "publish").iterdir()) == []

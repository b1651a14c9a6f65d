"""The two ways a job inspects an image (docs/design.md, "The batch job"): through an overlay
above the image it hashed, mounted read-only inside the sandbox (an ordinary user's job on a
node with squashfuse, fuse-overlayfs and a /dev/fuse users may open), else an unpacked copy
(root's job; a node without them). Either reads the .sqsh in full once, says which it used, and
leaves nothing mounted, also when the job is killed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from harness import ORDINARY_UID, Job, JobFactory, Standin


@pytest.fixture
def shelf(world_readable_tmp: Path) -> Path:
    """Where an ordinary user's images lie: that user's directory, others may walk."""
    directory = world_readable_tmp / "images"
    directory.mkdir(mode=0o755)
    return directory


def own_image(shelf: Path, image: Path, name: str = "image.sqsh") -> Path:
    target = shelf / name
    shutil.copy2(image, target)
    subprocess.run(["chown", "-R", f"{ORDINARY_UID}:{ORDINARY_UID}", str(shelf)], check=True)
    return target


def inspect(make_job: JobFactory, source: Path) -> Job:
    return make_job(operation="inspect_sqsh", role="serving", source=str(source))


def test_an_ordinary_user_s_job_inspects_through_the_overlay(
    make_job: JobFactory, image, shelf: Path, standin: Standin
) -> None:
    job = inspect(make_job, own_image(shelf, image("report")))

    result = job.run(inspection_path="overlay")

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record() == {"path": "overlay", "reason": "fuse-overlayfs"}
    assert "through an overlay" in result.stderr
    assert "create" not in standin.commands()
    report = Path(job.paths.result).read_text()
    assert "arg=serving" in report

"""The job trusts no directory another user could change (docs/design.md, "Containing an untrusted
image"; exit 71).

Between staging and the job, anyone who may rename entries on the way to the attempt could swap
``images/`` for a tree of their own, or plant ``output`` or ``enroot`` as symlinks: the job
checks the chain itself, before its first Enroot call, and every directory it makes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import Job, JobFactory, Standin

FOREIGN_UID = 4242


def images_swapped_for_a_symlink(job: Job) -> None:
    images = job.workspace / "images"
    foreign = job.tmp / "foreign-tree"
    shutil.copytree(images, foreign, symlinks=True)
    shutil.rmtree(images)
    images.symlink_to(foreign)


def jobs_writable_by_others(job: Job) -> None:
    (job.workspace / "images" / ".tmp" / "jobs").chmod(0o777)


def root_writable_by_others(job: Job) -> None:
    job.workspace.chmod(0o777)


def root_parent_writable_by_others(job: Job) -> None:
    job.workspace.parent.chmod(0o777)


def attempt_owned_by_another_user(job: Job) -> None:
    os.chown(job.job_dir, FOREIGN_UID, FOREIGN_UID)


def output_replaced_by_a_symlink(job: Job) -> None:
    output = Path(job.paths.output_dir)
    outside = job.tmp / "outside"
    outside.mkdir()
    output.rmdir()
    output.symlink_to(outside)


def enroot_planted_as_a_symlink(job: Job) -> None:
    outside = job.tmp / "outside-enroot"
    (outside / "config" / "hooks.d").mkdir(parents=True)
    (job.job_dir / "enroot").symlink_to(outside)


def home_planted_as_a_symlink(job: Job) -> None:
    outside = job.tmp / "outside-home"
    outside.mkdir()
    Path(job.paths.home).symlink_to(outside)


def scratch_writable_by_others(job: Job) -> None:
    job.scratch.chmod(0o777)


CHANGES: dict[str, Callable[[Job], None]] = {
    "images/ swapped for a symlink": images_swapped_for_a_symlink,
    "jobs/ writable by others": jobs_writable_by_others,
    "workspace root writable by others": root_writable_by_others,
    "a parent of the root writable by others": root_parent_writable_by_others,
    "the attempt owned by another user": attempt_owned_by_another_user,
    "output/ replaced by a symlink": output_replaced_by_a_symlink,
    "enroot planted as a symlink": enroot_planted_as_a_symlink,
    "home planted as a symlink": home_planted_as_a_symlink,
    "local scratch writable by others": scratch_writable_by_others,
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_directory_another_user_could_change_stops_the_job_with_71(
    make_job: JobFactory, image, standin: Standin, change: str
) -> None:
    if change == "the attempt owned by another user" and os.geteuid() != 0:
        pytest.skip("needs root to give the attempt away")
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    CHANGES[change](job)

    result = job.run()

    assert result.returncode == 71, result.stderr
    assert "(exit 71)" in result.stderr
    assert "create" not in standin.commands()
    assert not Path(job.paths.result).exists()
    assert not list((job.tmp / "outside").glob("*")) if (job.tmp / "outside").exists() else True


@pytest.mark.parametrize("mode", [0o1777, 0o3770], ids=oct)
def test_a_sticky_shared_workspace_root_is_accepted(
    make_job: JobFactory, image, standin: Standin, mode: int
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    job.workspace.chmod(mode)

    result = job.run()

    assert result.returncode == 0, result.stderr


def test_a_workspace_root_reached_through_a_symlink_in_a_safe_directory_is_accepted(
    make_job: JobFactory, image, standin: Standin, tmp_path: Path
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    # the job reaches the attempt through a symlinked parent, as /lustre -> /mnt/lustre
    link = tmp_path / "link-to-ws"
    link.symlink_to(job.workspace)
    job.script = job.script.replace(str(job.workspace) + "/", str(link) + "/")

    result = job.run()

    assert result.returncode == 0, result.stderr

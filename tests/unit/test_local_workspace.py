"""LocalWorkspace behaviour that only a real filesystem shows: races with other processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_image.adapters.local_workspace import LocalWorkspace
from slurm_image.domain.paths import AttemptLayout
from slurm_image.ports.workspace import UnsafePath

FIRST = "img-00000000000000000000000000000003"
SECOND = "img-00000000000000000000000000000004"


@pytest.mark.parametrize("component", ["images", "tmp", "jobs"])
def test_a_layout_directory_made_by_a_concurrent_prepare_is_used_not_an_error(
    world_readable_tmp: Path, component: str
) -> None:
    root = str(world_readable_tmp)
    workspace = LocalWorkspace(root)
    racing = getattr(AttemptLayout(root, FIRST), component)
    original = workspace._mkdir

    def lose_the_race(parent: int, name: str, field: str, mode: int) -> None:
        if field == racing:
            os.mkdir(name, 0o700, dir_fd=parent)  # another prepare got there first
        original(parent, name, field, mode)

    workspace._mkdir = lose_the_race  # type: ignore[method-assign]
    layout = AttemptLayout(root, SECOND)
    identity = workspace.create_directory(layout.job_dir, parents=True)
    assert workspace.directory_identity(layout.job_dir) == identity
    for path in (layout.images, layout.tmp, layout.jobs, layout.job_dir):
        assert Path(path).is_dir() and not Path(path).is_symlink()


def test_a_symlink_planted_in_that_race_is_still_refused(world_readable_tmp: Path) -> None:
    root = str(world_readable_tmp)
    decoy = world_readable_tmp / "decoy"
    decoy.mkdir()
    workspace = LocalWorkspace(root)
    original = workspace._mkdir

    def plant(parent: int, name: str, field: str, mode: int) -> None:
        if name == "images":
            os.symlink(str(decoy), name, dir_fd=parent)
        original(parent, name, field, mode)

    workspace._mkdir = plant  # type: ignore[method-assign]
    with pytest.raises(UnsafePath, match="symlink"):
        workspace.create_directory(AttemptLayout(root, SECOND).job_dir, parents=True)
    assert list(decoy.iterdir()) == []

"""Every Workspace adapter holds the chain to an attempt to one rule (issue #14): the root and
the directories on the way to it may be changed by nobody but the user and root (sticky when
shared), and directories below it are the user's own (domain/paths.py)."""

from __future__ import annotations

import pytest

from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.paths import AttemptLayout
from slurm_image.ports.workspace import UnsafePath, Workspace

LIFECYCLE = "img-" + "c" * 32


@pytest.fixture
def layout(workspace_harness) -> AttemptLayout:
    return AttemptLayout(workspace_harness.root, LIFECYCLE)


@pytest.fixture
def ws(workspace_harness) -> Workspace:
    return workspace_harness.workspace


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o2770], ids=oct)
def test_a_root_others_may_write_without_sticky_bit_is_a_profile_error(
    workspace_harness, ws, layout, mode: int
) -> None:
    workspace_harness.chmod(workspace_harness.root, mode)
    before = workspace_harness.listing()
    with pytest.raises(InvalidPath, match="sticky") as refused:
        ws.create_directory(layout.job_dir, parents=True)
    assert refused.value.field == "workspace_root"
    assert workspace_harness.listing() == before


@pytest.mark.parametrize("mode", [0o1777, 0o3770], ids=oct)
def test_a_sticky_shared_root_is_used(workspace_harness, ws, layout, mode: int) -> None:
    workspace_harness.chmod(workspace_harness.root, mode)
    ws.create_directory(layout.job_dir, parents=True)
    assert workspace_harness.kind_of(layout.job_dir) == "directory"


@pytest.mark.parametrize("component", ["images", "tmp", "jobs"])
def test_a_layout_directory_others_may_write_is_refused(
    workspace_harness, ws, layout, component: str
) -> None:
    workspace_harness.makedirs(layout.jobs)
    workspace_harness.chmod(getattr(layout, component), 0o770)
    before = workspace_harness.listing()
    with pytest.raises(UnsafePath, match="writable by group or others"):
        ws.create_directory(layout.job_dir, parents=True)
    assert workspace_harness.listing() == before

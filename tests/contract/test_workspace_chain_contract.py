"""Every Workspace adapter holds the chain to an attempt to one rule (docs/design.md, "Containing
an untrusted image"): the root and the directories on the way to it may be changed by nobody but
the user and root (sticky when shared), and directories below it are the user's own
(domain/paths.py)."""

from __future__ import annotations

import pytest

from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.paths import AttemptLayout
from slurm_image.ports.workspace import UnsafePath, Workspace

LIFECYCLE = "img-" + "c" * 32
OTHER_UID = 4242


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


@pytest.mark.parametrize("mode", [0o1777, 0o3770, 0o1775], ids=oct)
def test_a_sticky_shared_root_is_a_profile_error_with_the_way_out(
    workspace_harness, ws, layout, mode: int
) -> None:
    """Whoever may add entries to the root could create its images/ first: refused, even
    sticky, before anything is created, with the way out (a directory of your own in it)."""
    workspace_harness.chmod(workspace_harness.root, mode)
    before = workspace_harness.listing()
    with pytest.raises(InvalidPath, match="writable by group or others") as refused:
        ws.create_directory(layout.job_dir, parents=True)
    assert refused.value.field == "workspace_root"
    assert workspace_harness.root in refused.value.rule
    assert "mkdir -m 0755" in refused.value.rule
    assert workspace_harness.listing() == before


@pytest.mark.parametrize("mode", [0o1777, 0o3770], ids=oct)
def test_a_root_of_your_own_inside_a_sticky_shared_directory_is_used(
    workspace_harness, layout, mode: int
) -> None:
    parent = workspace_harness.root.rsplit("/", 1)[0]
    workspace_harness.chmod(parent, mode)
    try:
        workspace_harness.workspace.create_directory(layout.job_dir, parents=True)
        assert workspace_harness.kind_of(layout.job_dir) == "directory"
    finally:
        workspace_harness.chmod(parent, 0o755)


@pytest.mark.parametrize("squat", ["another user's", "a symlink", "a regular file"])
def test_an_images_directory_that_is_not_yours_is_a_profile_error_naming_it(
    workspace_harness, ws, layout, squat: str
) -> None:
    images = f"{workspace_harness.root}/images"
    if squat == "another user's":
        workspace_harness.mkdir(images, 0o755)
        workspace_harness.chown(images, OTHER_UID)
    elif squat == "a symlink":
        workspace_harness.symlink(workspace_harness.root, images)
    else:
        workspace_harness.write(images, b"")
    before = workspace_harness.listing()
    with pytest.raises(InvalidPath) as refused:
        ws.create_directory(layout.job_dir, parents=True)
    assert refused.value.field == "workspace_root"
    assert refused.value.rule.startswith(f"{images} ")
    assert "remove it, or set workspace_root to a directory of your own" in refused.value.rule
    assert workspace_harness.listing() == before


@pytest.mark.parametrize("component", ["tmp", "jobs"])
def test_a_layout_directory_others_may_write_is_refused(
    workspace_harness, ws, layout, component: str
) -> None:
    workspace_harness.makedirs(layout.jobs)
    workspace_harness.chmod(getattr(layout, component), 0o770)
    before = workspace_harness.listing()
    with pytest.raises(UnsafePath, match="writable by group or others"):
        ws.create_directory(layout.job_dir, parents=True)
    assert workspace_harness.listing() == before


def test_an_images_directory_others_may_write_is_a_profile_error(
    workspace_harness, ws, layout
) -> None:
    workspace_harness.makedirs(layout.jobs)
    workspace_harness.chmod(layout.images, 0o770)
    with pytest.raises(InvalidPath, match="writable by group or others") as refused:
        ws.create_directory(layout.job_dir, parents=True)
    assert refused.value.field == "workspace_root"

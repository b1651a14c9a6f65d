"""Every Workspace adapter answers one question the same way: could someone other than the
user and root change the bytes of this file (an inspected ``.sqsh``, a published path)? The
file must be a regular file of the user's or root's that group and others cannot write, and
every directory on its way must be changeable by nobody else (domain/paths.py)."""

from __future__ import annotations

import pytest

from support import require_root_for

OTHER_UID = 4242


@pytest.fixture
def shared(workspace_harness) -> str:
    """A directory beside the workspace root, as a site's image directory."""
    base = workspace_harness.root.rsplit("/", 1)[0] + "/shared"
    workspace_harness.mkdir(base, 0o755)
    return base


def test_a_file_of_your_own_in_directories_of_your_own_has_no_problem(
    workspace_harness, shared: str
) -> None:
    workspace_harness.write(f"{shared}/x.sqsh", b"hsqs")
    workspace_harness.chmod(f"{shared}/x.sqsh", 0o644)

    assert workspace_harness.workspace.image_problem(f"{shared}/x.sqsh") is None


def test_a_root_owned_file_is_not_another_users(workspace_harness, shared: str) -> None:
    require_root_for(workspace_harness)
    path = f"{shared}/x.sqsh"
    workspace_harness.write(path, b"hsqs")
    workspace_harness.chmod(path, 0o444)
    workspace_harness.chown(path, 0)
    workspace_harness.chown(shared, 0)

    assert workspace_harness.with_uid(OTHER_UID + 1).image_problem(path) is None


def test_a_file_owned_by_another_user_is_named(workspace_harness, shared: str) -> None:
    require_root_for(workspace_harness)
    path = f"{shared}/x.sqsh"
    workspace_harness.write(path, b"hsqs")
    workspace_harness.chmod(path, 0o644)
    workspace_harness.chown(path, OTHER_UID)

    problem = workspace_harness.workspace.image_problem(path)

    assert problem is not None
    assert problem.startswith(f"{path} is owned by uid {OTHER_UID}")


def test_a_file_group_or_others_may_write_is_named(workspace_harness, shared: str) -> None:
    path = f"{shared}/x.sqsh"
    workspace_harness.write(path, b"hsqs")
    workspace_harness.chmod(path, 0o664)

    assert workspace_harness.workspace.image_problem(path) == (
        f"{path} is writable by group or others"
    )


def test_a_directory_on_the_way_owned_by_another_user_is_named(
    workspace_harness, shared: str
) -> None:
    require_root_for(workspace_harness)
    inner = f"{shared}/theirs"
    workspace_harness.mkdir(inner, 0o755)
    workspace_harness.write(f"{inner}/x.sqsh", b"hsqs")
    workspace_harness.chown(inner, OTHER_UID)

    problem = workspace_harness.workspace.image_problem(f"{inner}/x.sqsh")

    assert problem is not None
    assert problem.startswith(f"{inner} is owned by uid {OTHER_UID}")


@pytest.mark.parametrize(("mode", "safe"), [(0o777, False), (0o775, False), (0o1777, True)])
def test_a_directory_on_the_way_others_may_write_needs_the_sticky_bit(
    workspace_harness, shared: str, mode: int, safe: bool
) -> None:
    path = f"{shared}/x.sqsh"
    workspace_harness.write(path, b"hsqs")
    workspace_harness.chmod(shared, mode)

    problem = workspace_harness.workspace.image_problem(path)

    if safe:
        assert problem is None
    else:
        assert problem == f"{shared} is writable by group or others without the sticky bit"


def test_a_symlink_is_not_vouched_for(workspace_harness, shared: str) -> None:
    workspace_harness.write(f"{shared}/real.sqsh", b"hsqs")
    workspace_harness.symlink(f"{shared}/real.sqsh", f"{shared}/x.sqsh")

    problem = workspace_harness.workspace.image_problem(f"{shared}/x.sqsh")

    assert problem == f"{shared}/x.sqsh is a symlink, not a regular file"


def test_a_missing_file_is_a_problem(workspace_harness, shared: str) -> None:
    assert workspace_harness.workspace.image_problem(f"{shared}/none.sqsh") == (
        f"{shared}/none.sqsh does not exist"
    )

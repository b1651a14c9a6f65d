"""Who may change a directory on the way to an attempt (domain/paths.py)."""

from __future__ import annotations

import stat

import pytest

from slurm_image.domain.paths import (
    ancestors,
    output_directory_problem,
    own_directory_problem,
    own_file_problem,
    shared_directory_problem,
)

USER, OTHER = 1000, 1001
DIRECTORY = stat.S_IFDIR


@pytest.mark.parametrize(
    ("mode", "owner", "refused"),
    [
        (0o755, 0, False),
        (0o700, USER, False),
        (0o1777, 0, False),
        (0o3770, 0, False),
        (0o777, 0, True),
        (0o775, USER, True),
        (0o2770, 0, True),
        (0o755, OTHER, True),
        (0o1777, OTHER, True),
    ],
    ids=str,
)
def test_shared_directories_are_changed_by_nobody_but_the_user_and_root(
    mode: int, owner: int, refused: bool
) -> None:
    assert (shared_directory_problem(DIRECTORY | mode, owner, USER) is not None) is refused


@pytest.mark.parametrize(
    ("mode", "owner", "refused"),
    [
        (0o700, USER, False),
        (0o1770, USER, False),
        (0o700, 0, True),
        (0o770, USER, True),
        (0o702, USER, True),
    ],
    ids=str,
)
def test_own_directories_are_the_users_alone(mode: int, owner: int, refused: bool) -> None:
    assert (own_directory_problem(DIRECTORY | mode, owner, USER) is not None) is refused


@pytest.mark.parametrize(
    ("mode", "owner", "problem"),
    [
        (stat.S_IFREG | 0o644, USER, None),
        (stat.S_IFREG | 0o600, USER, None),
        (stat.S_IFREG | 0o644, 0, "is owned by uid 0, not 1000"),
        (stat.S_IFREG | 0o664, USER, "is writable by group or others"),
        (stat.S_IFREG | 0o646, USER, "is writable by group or others"),
        (DIRECTORY | 0o755, USER, "is not a regular file"),
    ],
    ids=str,
)
def test_a_file_the_user_appends_to_is_the_users_alone(
    mode: int, owner: int, problem: str | None
) -> None:
    assert own_file_problem(mode, owner, USER) == problem


@pytest.mark.parametrize(
    ("mode", "owner", "refused"),
    [
        (0o755, USER, False),
        (0o700, USER, False),
        (0o755, 0, False),
        (0o1777, 0, True),
        (0o1770, USER, True),
        (0o775, USER, True),
        (0o757, USER, True),
        (0o755, OTHER, True),
    ],
    ids=str,
)
def test_an_output_directory_is_closed_to_group_and_others_even_when_sticky(
    mode: int, owner: int, refused: bool
) -> None:
    assert (output_directory_problem(DIRECTORY | mode, owner, USER) is not None) is refused


def test_ancestors_run_from_the_filesystem_root_to_the_path() -> None:
    assert ancestors("/lustre/site/ws") == ["/", "/lustre", "/lustre/site", "/lustre/site/ws"]
    assert ancestors("/") == ["/"]

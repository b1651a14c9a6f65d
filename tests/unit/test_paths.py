"""Workspace roots, .sqsh paths, the job PATH, names and Slurm directive values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidIdentifier, InvalidPath

# (value, words the rule must contain)
BAD_WORKSPACES = [
    ("/lustre/site images", "whitespace"),
    ("/lustre/site\timages", "control"),
    ("/lustre/site\nimages", "control"),
    ("/lustre/a:b", "':'"),
    ("/lustre/a,b", "','"),
    ("/lustre/a\\b", "'\\'"),
    ("/lustre/a\u00a0b", "whitespace"),
    ("/lustre/a\x85b", "control"),
    ("lustre/images", "absolute"),
    ("./images", "absolute"),
    ("~/images", "absolute"),
    ("", "empty"),
    ("/lustre/../etc", ".."),
    ("/..", ".."),
    ("//lustre", "normalized"),
    ("/lustre//images", "normalized"),
    ("/lustre/", "normalized"),
    ("/lustre/./images", "normalized"),
    ("/lustre/.", "normalized"),
    ("/", "root"),
    ("/lustre/#images", "#"),
    ("/lustre/o'brien", "quotes"),
    ('/lustre/"x"', "quotes"),
    ("/lustre/100%/images", "%"),
    ("/" + "a" * 1024, "1024"),
]


@pytest.mark.parametrize(
    ("value", "word"), BAD_WORKSPACES, ids=[repr(v) for v, _ in BAD_WORKSPACES]
)
def test_workspace_root_refuses_unsafe_paths(value: str, word: str) -> None:
    with pytest.raises(InvalidPath) as caught:
        paths.workspace_root(value)
    assert caught.value.field == "workspace_root"
    assert word in caught.value.rule


@pytest.mark.parametrize(
    "value",
    ["/lustre/site/images", "/srv/slurm-image", "/a", "/gpfs/proj_1/x.y-z", "/data/bilder-ü"],
)
def test_workspace_root_accepts_absolute_mountable_paths(value: str) -> None:
    assert paths.workspace_root(value) == value


@given(st.text(alphabet="/abc. :,\\\t\n#'%", min_size=1, max_size=20))
def test_workspace_root_accepted_values_are_mountable_and_normalized(value: str) -> None:
    try:
        paths.workspace_root(value)
    except InvalidPath:
        return
    assert value.startswith("/") and value != "/"
    assert not set(value) & set(" :,\\\t\n#'%")
    assert "//" not in value and not value.endswith("/")
    assert "." not in value.split("/") and ".." not in value.split("/")


@pytest.mark.parametrize(
    ("value", "word"),
    [
        ("relative/x.sqsh", "absolute"),
        ("/images/x.squashfs", ".sqsh"),
        ("/images/.sqsh", ".sqsh"),
        ("/images/x.sqsh/", "normalized"),
        ("/images/../x.sqsh", ".."),
        ("/images//x.sqsh", "normalized"),
        ("/images/x\n.sqsh", "control"),
        ("", "empty"),
    ],
)
def test_sqsh_path_refuses_bad_paths(value: str, word: str) -> None:
    with pytest.raises(InvalidPath) as caught:
        paths.sqsh_path(value)
    assert caught.value.field == "source"
    assert word in caught.value.rule


@pytest.mark.parametrize("value", ["/lustre/images/torch.sqsh", "/a b/x.sqsh", "/x/.hidden.sqsh"])
def test_sqsh_path_accepts_absolute_normalized_sqsh(value: str) -> None:
    assert paths.sqsh_path(value) == value


@pytest.mark.parametrize(
    ("value", "word"),
    [
        ("", "empty"),
        ("/usr/bin:", "empty"),
        (":/usr/bin", "empty"),
        ("/usr/bin::/bin", "empty"),
        ("bin:/usr/bin", "absolute"),
        ("/usr/bin:./x", "absolute"),
        ("/usr/bin/../sbin", ".."),
        ("/usr/bin/", "normalized"),
        ("/opt/my bin:/bin", "whitespace"),
        ("/opt/x\n:/bin", "control"),
    ],
)
def test_job_path_refuses_empty_relative_or_odd_entries(value: str, word: str) -> None:
    with pytest.raises(InvalidPath) as caught:
        paths.job_path(value)
    assert caught.value.field == "image_build.job_path"
    assert word in caught.value.rule


@pytest.mark.parametrize("value", [paths.DEFAULT_JOB_PATH, "/opt/enroot/bin", "/a:/b:/c"])
def test_job_path_accepts_absolute_directories(value: str) -> None:
    assert paths.job_path(value) == value


@pytest.mark.parametrize("value", ["torch", "a", "A.b_c-d", "9", "x" * 128, "img-" + "0" * 32])
def test_name_accepts_the_identifier_rule(value: str) -> None:
    assert paths.name(value) == value


@pytest.mark.parametrize(
    "value", ["", "-x", ".x", "_x", "x" * 129, "a b", "a/b", "a:b", "é", "a\n", "a;b", "a$b"]
)
def test_name_refuses_values_outside_the_identifier_rule(value: str) -> None:
    with pytest.raises(InvalidIdentifier) as caught:
        paths.name(value, "name")
    assert caught.value.field == "name"


@pytest.mark.parametrize("value", ["cpu", "gpu_a100", "debug+", "p.1-2", "_x", "A" * 64])
def test_slurm_name_accepts_bare_directive_values(value: str) -> None:
    assert paths.slurm_name(value, "image_build.partition") == value


@pytest.mark.parametrize(
    "value", ["", "A" * 65, "-x", "cpu,gpu", "a b", "a#b", "a'b", 'a"b', "a\nb", "a=b", "a:b"]
)
def test_slurm_name_refuses_values_that_cannot_stand_bare_in_sbatch(value: str) -> None:
    with pytest.raises(InvalidIdentifier) as caught:
        paths.slurm_name(value, "image_build.partition")
    assert caught.value.field == "image_build.partition"


def test_attempt_layout_derives_the_job_directory_from_root_and_id() -> None:
    layout = paths.AttemptLayout("/ws", "img-1")
    assert layout.job_dir == "/ws/images/.tmp/jobs/img-1"
    assert layout.in_job("plan.json") == "/ws/images/.tmp/jobs/img-1/plan.json"


@pytest.mark.parametrize("lifecycle_id", ["../x", "a/b", "", ".."])
def test_attempt_layout_refuses_ids_that_escape_the_jobs_directory(lifecycle_id: str) -> None:
    with pytest.raises(InvalidIdentifier):
        paths.AttemptLayout("/ws", lifecycle_id)

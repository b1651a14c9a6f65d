"""Attempts other users cannot touch (docs/design.md, "Containing an untrusted image"), as a user
meets it on the command line.

Another user who can rename or replace entries on the way to an attempt could swap ``images/``
under a pending job, or plant a ``slurm-<id>.err`` symlink that Slurm writes through: the
workspace root and its parents must be changeable by nobody but the user and root (parents may
carry the sticky bit instead; the shared root: test_store_ownership_cli.py), and ``submit``
refuses an attempt holding anything it did not stage.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from slurm_image.domain.paths import AttemptLayout
from support import run_cli

SOURCE = "registry.example.org/team/app:1.0@sha256:" + "b" * 64
PROFILE = (
    'workspace_root = "{root}"\n'
    "[image_build]\n"
    'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
    '[submitter]\nkind = "fake"\n'
)


def stage(site: Path, root: Path) -> subprocess.CompletedProcess[str]:
    (site / "slurm-image.toml").write_text(PROFILE.format(root=root))
    return run_cli("import", SOURCE, "--name", "app", "--role", "client", "--no-submit", cwd=site)


def refused_with_2(done: subprocess.CompletedProcess[str], root: Path) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurm-image: error: workspace_root:"), lines
    assert not (root / "images").exists() if root.is_dir() else True
    return lines[0]


def test_a_workspace_root_that_is_a_regular_file_exits_2(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.write_text("not a directory\n")

    line = refused_with_2(stage(tmp_path, root), root)

    assert "must be a directory" in line


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o2775], ids=oct)
def test_a_workspace_root_others_may_write_without_the_sticky_bit_exits_2(
    tmp_path: Path, mode: int
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    root.chmod(mode)

    line = refused_with_2(stage(tmp_path, root), root)

    assert "without the sticky bit" in line
    assert "mkdir -m 0755" in line  # says how to set it up
    assert list(root.iterdir()) == []


def test_a_parent_of_the_workspace_root_others_may_write_exits_2(tmp_path: Path) -> None:
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(0o777)
    root = parent / "ws"
    root.mkdir()

    line = refused_with_2(stage(tmp_path, root), root)

    assert str(parent) in line


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the root away")
def test_a_workspace_root_owned_by_another_user_exits_2(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir(mode=0o755)
    os.chown(root, 4242, 4242)

    line = refused_with_2(stage(tmp_path, root), root)

    assert "uid 4242" in line


@pytest.mark.parametrize("mode", [0o755, 0o700], ids=oct)
def test_a_private_workspace_root_is_used(tmp_path: Path, mode: int) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    root.chmod(mode)

    done = stage(tmp_path, root)

    assert done.returncode == 0, done.stderr
    assert (root / "images" / ".tmp" / "jobs").is_dir()


def _layout(site: Path, done: subprocess.CompletedProcess[str]) -> tuple[str, AttemptLayout]:
    assert done.returncode == 0, done.stderr
    lifecycle_id = done.stdout.split()[1]
    return lifecycle_id, AttemptLayout(str(site / "ws"), lifecycle_id)


def _plant_err_symlink(layout: AttemptLayout, outside: Path) -> None:
    os.symlink(outside, layout.in_job("slurm-4711.err"))


def _plant_enroot_config(layout: AttemptLayout, outside: Path) -> None:
    os.symlink(outside, layout.in_job("enroot"))


def _plant_home(layout: AttemptLayout, outside: Path) -> None:
    os.mkdir(layout.in_job("home"))


def _output_replaced_by_symlink(layout: AttemptLayout, outside: Path) -> None:
    os.rmdir(layout.in_job("output"))
    os.symlink(outside, layout.in_job("output"))


def _file_in_output(layout: AttemptLayout, outside: Path) -> None:
    os.symlink("/etc/shadow", layout.in_job("output/inspection.json"))


PLANTS: dict[str, Callable[[AttemptLayout, Path], None]] = {
    "slurm-<id>.err symlink": _plant_err_symlink,
    "enroot symlink": _plant_enroot_config,
    "home directory": _plant_home,
    "output replaced by a symlink": _output_replaced_by_symlink,
    "a symlink in output": _file_in_output,
}


@pytest.mark.parametrize("plant", list(PLANTS), ids=list(PLANTS))
def test_submit_refuses_an_attempt_holding_anything_it_did_not_stage(
    tmp_path: Path, plant: str
) -> None:
    root = tmp_path / "ws"
    root.mkdir(mode=0o700)
    lifecycle_id, layout = _layout(tmp_path, stage(tmp_path, root))
    outside = tmp_path / "outside"
    outside.mkdir()
    PLANTS[plant](layout, outside)

    done = run_cli("submit", lifecycle_id, cwd=tmp_path)

    assert done.returncode == 5, done.stderr
    assert not os.path.lexists(layout.submission_claim)
    assert not os.path.lexists(layout.submission_record)

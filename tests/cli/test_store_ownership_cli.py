"""The store as another user meets it on the command line (README, Threat model):

- a workspace root others may add entries to (``chmod 1777``, ``3770``) is refused by every
  command, exit 2, with the way out (a directory of your own in it), before anything exists;
- an ``images/`` that is not yours (squatted, a symlink) is named with the way out, exit 2;
- inspecting a ``.sqsh`` another user could change exits 2 and stages nothing;
- a published ``.sqsh`` that another user can change now is never resolved by ``show`` (exit 5)
  and left out of ``list``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli_site import CliSite, fake_scheduler
from publish_support import SQSH_BYTES, inspection
from slurm_image.domain.paths import AttemptLayout
from support import require_root_for, run_cli

SOURCE = "registry.example.org/team/app:1.0@sha256:" + "b" * 64
LIFECYCLE = "img-" + "0" * 32
OTHER_UID = 4242
PROFILE = (
    'workspace_root = "{root}"\n'
    "[image_build]\n"
    'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
    '[submitter]\nkind = "fake"\n'
)
COMMANDS = [
    ("import", SOURCE, "--name", "app", "--role", "client", "--no-submit"),
    ("status", LIFECYCLE),
    ("wait", LIFECYCLE, "--timeout", "1"),
    ("publish", LIFECYCLE),
    ("cleanup", LIFECYCLE),
    ("show", "app"),
    ("show", "app", "--verify"),
    ("list",),
    ("gc",),
    ("unregister", "app"),
]


def _site(tmp_path: Path, root: Path) -> None:
    (tmp_path / "slurm-image.toml").write_text(PROFILE.format(root=root))


def _one_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurm-image: error: "), lines
    return lines[0]


@pytest.mark.parametrize("mode", [0o1777, 0o3770], ids=oct)
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_a_root_others_may_add_entries_to_is_refused_by_every_command(
    tmp_path: Path, mode: int, command: tuple[str, ...]
) -> None:
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(mode)
    _site(tmp_path, root)

    line = _one_error(run_cli(*command, cwd=tmp_path), 2)

    assert line.startswith(f"slurm-image: error: workspace_root: {root} is writable by group")
    assert "who could create its images/ before you" in line
    assert "mkdir -m 0755" in line and "set workspace_root" in line  # the way out
    assert list(root.iterdir()) == []


def test_the_way_out_a_root_of_your_own_inside_the_shared_one_works(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    root = shared / "alice"
    root.mkdir(mode=0o755)
    _site(tmp_path, root)

    done = run_cli(*COMMANDS[0], cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert (root / "images" / ".tmp" / "jobs").is_dir()


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_a_squatted_images_directory_is_named_with_the_way_out(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    require_root_for(None)
    root = tmp_path / "ws"
    root.mkdir(mode=0o755)
    images = root / "images"
    images.mkdir(mode=0o755)
    os.chown(images, OTHER_UID, OTHER_UID)  # made while the root was still shared
    _site(tmp_path, root)

    line = _one_error(run_cli(*command, cwd=tmp_path), 2)

    assert line.startswith(
        f"slurm-image: error: workspace_root: {images} is owned by uid {OTHER_UID}"
    )
    assert "have its owner (or an administrator) remove it" in line
    assert "attempt" not in line and LIFECYCLE not in line
    assert list(images.iterdir()) == []


@pytest.mark.parametrize("what", ["file", "directory"])
def test_inspecting_a_sqsh_another_user_can_change_exits_2_and_stages_nothing(
    tmp_path: Path, what: str
) -> None:
    require_root_for(None)
    root = tmp_path / "ws"
    root.mkdir(mode=0o755)
    library = tmp_path / "library"
    library.mkdir(mode=0o755)
    image = library / "x.sqsh"
    image.write_bytes(SQSH_BYTES)
    image.chmod(0o644)  # world-readable, as the attack needs
    at_fault = image if what == "file" else library
    os.chown(at_fault, OTHER_UID, OTHER_UID)
    _site(tmp_path, root)

    done = run_cli("inspect", str(image), "--name", "x", "--role", "client", cwd=tmp_path)

    line = _one_error(done, 2)
    assert line.startswith(f"slurm-image: error: source: {at_fault} is owned by uid {OTHER_UID}")
    assert "copy it into a directory of your own" in line
    assert list(root.iterdir()) == []


def test_a_root_owned_image_library_can_be_inspected(tmp_path: Path) -> None:
    """Root's files are nobody else's: a site's read-only library owned by root is fine."""
    root = tmp_path / "ws"
    root.mkdir(mode=0o755)
    image = tmp_path / "x.sqsh"
    image.write_bytes(SQSH_BYTES)
    image.chmod(0o444)
    if os.geteuid() == 0:
        os.chown(image, 0, 0)
    _site(tmp_path, root)

    done = run_cli(
        "inspect", str(image), "--name", "x", "--role", "client", "--no-submit", cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr


# -- a .sqsh published in place, then given away and rewritten --------------------------------


@pytest.fixture
def site(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> CliSite:
    root = tmp_path / "ws"
    root.mkdir()
    _site(tmp_path, root)
    return CliSite(root, capsys, fake_scheduler(tmp_path, monkeypatch))


def test_a_published_sqsh_its_new_owner_rewrote_is_not_resolved(
    site: CliSite, tmp_path: Path
) -> None:
    require_root_for(None)
    image = tmp_path / "images" / "x.sqsh"
    image.parent.mkdir(mode=0o755)
    image.write_bytes(SQSH_BYTES)
    image.chmod(0o644)
    submitted = site.json("inspect", str(image), "--name", "x", "--role", "client")
    attempt = AttemptLayout(str(site.root), submitted["lifecycle_id"])
    Path(attempt.in_job("output/inspection.json")).write_bytes(inspection("client", SQSH_BYTES))
    site.scheduler.finish(submitted["job_id"])
    assert site.json("publish", submitted["lifecycle_id"])["path"] == str(image)
    assert site.json("show", "x")["path"] == str(image)
    # published in place earlier, then the file is another user's, who rewrites it
    os.chown(image, OTHER_UID, OTHER_UID)
    with image.open("r+b") as handle:
        handle.write(b"hsqs evil")

    for command in (("show", "x"), ("show", "x", "--verify"), ("--quiet", "show", "x")):
        code, out, err = site.run(*command)
        assert (code, out) == (5, ""), command
        assert err.startswith(f"slurm-image: error: {image}: {image} is owned by uid {OTHER_UID}")
        assert "not vouched for" in err and len(err.splitlines()) == 1
    assert site.json("list") == {"images": []}


@pytest.mark.parametrize("set_up", ["shared root", "squatted images"])
def test_doctor_fails_the_workspace_check_naming_the_directory(tmp_path: Path, set_up: str) -> None:
    root = tmp_path / "ws"
    root.mkdir(mode=0o755)
    at_fault = root
    if set_up == "shared root":
        root.chmod(0o1777)
    else:
        require_root_for(None)
        at_fault = root / "images"
        at_fault.mkdir(mode=0o755)
        os.chown(at_fault, OTHER_UID, OTHER_UID)
    _site(tmp_path, root)

    done = run_cli("doctor", "--timeout", "5", cwd=tmp_path)

    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = [
        line for line in done.stdout.splitlines() if line.split()[:2] == ["FAIL", "workspace"]
    ]
    assert f": {at_fault} is " in line
    assert "internal error" not in done.stderr
    assert sorted(p.name for p in root.rglob("*")) == ([] if at_fault == root else ["images"])

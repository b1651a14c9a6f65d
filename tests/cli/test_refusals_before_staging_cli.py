"""Refusals before anything is created (docs/cli.md, "The profile"), as a user meets them.

- a ``.sqsh`` path that is not UTF-8: exit 2 (invalid input);
- an sbatch client that cannot be found: exit 3 (the scheduler cannot be reached from here),
  before the attempt is staged;
- a REST ``token_file`` that is missing, or not a private regular file of the user's own
  (the credentials-file rule): exit 2 (invalid profile), before the attempt is staged.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from slurm_image.adapters.slurmrest.client import TokenSource
from slurm_image.composition.container import build_container, require_submitter
from slurm_image.domain.profile import select_cluster
from slurm_image.ports.submitter import SchedulerAuthError
from support import run_cli

SOURCE = "registry.example.org/team/app:1.0@sha256:" + "b" * 64
BUILD = (
    '[image_build]\npartition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
)


def site(tmp_path: Path, submitter: str) -> Path:
    root = tmp_path / "ws"
    root.mkdir(mode=0o700)
    (tmp_path / "slurm-image.toml").write_text(f'workspace_root = "{root}"\n{BUILD}{submitter}')
    return root


def refused(done: subprocess.CompletedProcess[str], code: int, field: str) -> None:
    assert done.returncode == code, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurm-image: error: "), lines
    assert field in lines[0], lines[0]
    assert "Traceback" not in done.stderr


def test_a_sqsh_path_that_is_not_utf8_exits_2_and_creates_nothing(tmp_path: Path) -> None:
    root = site(tmp_path, '[submitter]\nkind = "fake"\n')
    path = os.fsencode(str(tmp_path)) + b"/\xff\xfe.sqsh"
    Path(os.fsdecode(path)).write_bytes(b"hsqs")

    done = run_cli("inspect", path, "--name", "x", "--role", "client", cwd=tmp_path)

    refused(done, 2, "source")
    assert "UTF-8" in done.stderr
    assert list(root.iterdir()) == []


def test_a_missing_sbatch_client_exits_3_before_the_attempt_is_staged(tmp_path: Path) -> None:
    root = site(
        tmp_path,
        f'[submitter]\nkind = "sbatch"\n[submitter.sbatch]\nsbatch = "{tmp_path}/no/sbatch"\n',
    )

    done = run_cli("import", SOURCE, "--name", "x", "--role", "client", cwd=tmp_path)

    refused(done, 3, "sbatch")
    assert list(root.iterdir()) == []


REST = (
    '[submitter]\nkind = "rest"\n[submitter.rest]\nurl = "http://127.0.0.1:9"\n'
    'user = "alice"\ntoken_file = "{token}"\n'
)


@pytest.mark.parametrize("state", ["missing", "readable by others", "a directory"])
def test_an_unusable_token_file_exits_2_before_the_attempt_is_staged(
    tmp_path: Path, state: str
) -> None:
    token = tmp_path / "jwt"
    if state == "readable by others":
        token.write_text("eyJ.token.x\n")
        token.chmod(0o644)
    elif state == "a directory":
        token.mkdir()
    root = site(tmp_path, REST.format(token=token))

    done = run_cli("import", SOURCE, "--name", "x", "--role", "client", cwd=tmp_path)

    refused(done, 2, "submitter.rest.token_file")
    assert list(root.iterdir()) == []


def _rest_profile(token: Path):  # type: ignore[no-untyped-def]
    document = {
        "workspace_root": "/srv/ws",
        "image_build": {
            "partition": "cpu",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "1:00:00",
        },
        "submitter": {
            "kind": "rest",
            "rest": {"url": "http://127.0.0.1:9", "user": "alice", "token_file": str(token)},
        },
    }
    profile, _ = select_cluster(document, explicit=None, hostnames=["h"], catalog_sha256="0" * 64)
    return profile


def test_a_private_token_file_is_accepted(tmp_path: Path) -> None:
    token = tmp_path / "jwt"
    token.write_text("eyJ.token.x\n")
    token.chmod(0o600)
    profile = _rest_profile(token)

    require_submitter(build_container(profile), profile)

    assert TokenSource(token_file=str(token)).read() == "eyJ.token.x"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620], ids=oct)
def test_the_rest_adapter_reads_no_token_file_others_can_reach(tmp_path: Path, mode: int) -> None:
    token = tmp_path / "jwt"
    token.write_text("eyJ.token.x\n")
    token.chmod(mode)

    with pytest.raises(SchedulerAuthError, match="group or others"):
        TokenSource(token_file=str(token)).read()

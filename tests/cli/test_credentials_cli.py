"""``[enroot] credentials_file`` through the real command line: the secret reaches neither the
output (human, --json, --dry-run) nor any staged file but the one netrc entry; a file that is
not the user's own private file exits 2 with nothing created."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import run_cli

SECRET = "canary-cli-5f0e1d2c3b4a"
SOURCE = "127.0.0.1:5443/team/app:1@sha256:" + "c" * 64
NETRC = (
    "machine nvcr.io login other password nope\n"
    f"machine 127.0.0.1 login builder password {SECRET}\n"
)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "site.toml").write_text(
        f'workspace_root = "{tmp_path / "ws"}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:10:00"\n'
        '[enroot]\ncredentials_file = "~/.config/enroot/.credentials"\n'
        '[submitter]\nkind = "fake"\n'
    )
    (tmp_path / "ws").mkdir(mode=0o700)
    netrc = tmp_path / ".config" / "enroot" / ".credentials"
    netrc.parent.mkdir(parents=True)
    netrc.write_text(NETRC)
    netrc.chmod(0o600)
    return tmp_path


def run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("--profile", "site.toml", *args, cwd=site, env={"HOME": str(site)})


def files_holding(root: Path, secret: str) -> list[str]:
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and secret.encode() in path.read_bytes()
    )


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_dry_run_names_the_host_and_never_the_secret(site: Path, json_flag: list[str]) -> None:
    done = run(site, "import", SOURCE, "--name", "app", "--role", "client", "--dry-run", *json_flag)

    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "builder" not in done.stdout  # not even the login
    if json_flag:
        assert json.loads(done.stdout)["plan"]["credentials_host"] == "127.0.0.1"
    else:
        assert '"credentials_host": "127.0.0.1"' in done.stdout
    assert list((site / "ws").iterdir()) == []
    assert files_holding(site, SECRET) == [".config/enroot/.credentials"]


def test_staging_writes_the_secret_only_into_the_attempts_enroot_config(site: Path) -> None:
    done = run(site, "import", SOURCE, "--name", "app", "--role", "client", "--no-submit", "--json")

    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    job_dir = Path(json.loads(done.stdout)["job_directory"])
    staged = job_dir / "enroot" / "config" / ".credentials"
    assert staged.read_text() == f"machine 127.0.0.1 login builder password {SECRET}\n"
    assert staged.stat().st_mode & 0o777 == 0o600
    assert files_holding(site, SECRET) == sorted(
        [".config/enroot/.credentials", str(staged.relative_to(site))]
    )
    submitted = run(site, "submit", json.loads(done.stdout)["lifecycle_id"], "--json")
    assert submitted.returncode == 0, submitted.stderr
    assert SECRET not in submitted.stdout + submitted.stderr


@pytest.mark.parametrize("mode", [0o640, 0o604])
def test_a_credentials_file_open_to_others_exits_2_and_creates_nothing(
    site: Path, mode: int
) -> None:
    (site / ".config" / "enroot" / ".credentials").chmod(mode)

    done = run(site, "import", SOURCE, "--name", "app", "--role", "client")

    assert done.returncode == 2
    assert done.stderr.startswith("slurm-image: error: enroot.credentials_file:")
    assert "chmod 600" in done.stderr
    assert SECRET not in done.stderr
    assert list((site / "ws").iterdir()) == []


def test_an_inspect_ignores_the_credentials_file(site: Path) -> None:
    (site / ".config" / "enroot" / ".credentials").chmod(0o644)  # not even read
    done = run(site, "inspect", "/data/app.sqsh", "--name", "app", "--role", "client", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout

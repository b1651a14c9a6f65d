"""Shared fixtures: the local Slurm cluster started by ``scripts/local-slurm up``.

Tests that need it use the ``local_slurm`` fixture (and the ``slurm`` marker). Without a running
cluster they SKIP locally, and FAIL when ``CI=true``: CI must never silently skip them.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCAL_SLURM = ROOT / "scripts" / "local-slurm"


@dataclass(frozen=True)
class LocalSlurm:
    """What clients need to reach the local cluster (from ``scripts/local-slurm env``)."""

    slurm_conf: str
    rest_url: str
    rest_socket: str
    token_file: str
    rest_user: str
    state_dir: str

    def run(self, *args: str, timeout: float = 60) -> None:
        """Run ``scripts/local-slurm ARGS`` (e.g. ``controller stop``)."""
        subprocess.run([str(LOCAL_SLURM), *args], check=True, timeout=timeout)

    def command(self, *argv: str) -> str:
        """Run a Slurm client command against the cluster and return its stdout."""
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "LC_ALL": "C",
            "SLURM_CONF": self.slurm_conf,
        }
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"{argv} failed: {done.stderr}")
        return done.stdout

    def show_job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job -o`` as a dict of its KEY=VALUE words."""
        words = self.command("scontrol", "show", "job", "-o", job_id).split()
        return dict(word.split("=", 1) for word in words if "=" in word)

    def jobs_with_comment(self, marker: str) -> list[str]:
        out = self.command("squeue", "-h", "-t", "all", "-o", "%i|%k")
        return [
            line.split("|", 1)[0] for line in out.splitlines() if line.split("|", 1)[1:] == [marker]
        ]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the local Slurm cluster is required in CI: {reason}")
    pytest.skip(f"no local Slurm cluster ({reason}); run scripts/local-slurm up")


@pytest.fixture(scope="session")
def local_slurm() -> LocalSlurm:
    if not LOCAL_SLURM.exists():
        _unavailable("scripts/local-slurm missing")
    status = subprocess.run([str(LOCAL_SLURM), "status"], capture_output=True, text=True)
    if status.returncode != 0:
        _unavailable("scripts/local-slurm status: " + " ".join(status.stdout.split()))
    env_out = subprocess.run(
        [str(LOCAL_SLURM), "env"], capture_output=True, text=True, check=True
    ).stdout
    values = {}
    for line in env_out.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, value = words[1].split("=", 1)
            values[key] = value
    return LocalSlurm(
        slurm_conf=values["SLURM_CONF"],
        rest_url=values["SLURM_IMAGE_TEST_REST_URL"],
        rest_socket=values["SLURM_IMAGE_TEST_REST_SOCKET"],
        token_file=values["SLURM_IMAGE_TEST_TOKEN_FILE"],
        rest_user=values["SLURM_IMAGE_TEST_REST_USER"],
        state_dir=values["SLURM_IMAGE_TEST_LOCAL_SLURM"],
    )

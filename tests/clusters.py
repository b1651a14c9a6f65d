"""The local clusters ``scripts/local-slurm`` runs, as the integration tests reach them:
Debian 12's Slurm 22.05 (installed on the machine), Debian 13's Slurm 24.11 and Debian forky's
Slurm 26.05 (a trixie and a forky root beside it, each reached through its own client wrappers;
docs/local-slurm.md)."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

LOCAL_SLURM = Path(__file__).resolve().parents[1] / "scripts" / "local-slurm"
CLUSTERS = ["22.05", "24.11", "26.05"]


TEST_SQUASH_OPTIONS = "-comp lz4 -noD"
"""The test sites' ``ENROOT_SQUASH_OPTIONS``, a site's own choice (``[enroot] environment``):
mksquashfs squashes the test images some 30 times faster with lz4 than with Enroot's default
lzo, which was most of an import's time here. The default stays under test: tests/execution,
scripts/demo and test_cli_on_slurm.py's import on each cluster (docs/testing.md)."""


def enroot_table(*settings: str, allow_http: bool = True) -> str:
    """A test site's ``[enroot]`` table: the ``settings`` lines, and an environment of
    ``TEST_SQUASH_OPTIONS`` and, with ``allow_http``, the local registry's plain HTTP."""
    environment = [f'ENROOT_SQUASH_OPTIONS = "{TEST_SQUASH_OPTIONS}"']
    if allow_http:
        environment.insert(0, 'ENROOT_ALLOW_HTTP = "yes"')
    lines = [*settings, f"environment = {{ {', '.join(environment)} }}"]
    return "[enroot]\n" + "".join(f"{line}\n" for line in lines)


@dataclass(frozen=True)
class Cluster:
    """One local cluster: what clients need to reach it (``scripts/local-slurm env``)."""

    series: str
    slurm_conf: str
    rest_url: str
    rest_socket: str
    token_file: str
    rest_user: str
    state_dir: str
    bin_dir: str
    """The cluster's own client wrappers; empty when the machine's clients are its own."""
    rest_versions: tuple[str, ...]
    """The OpenAPI versions its slurmrestd serves."""

    @property
    def sbatch(self) -> str:
        """What ``[submitter.sbatch] sbatch`` names for this cluster."""
        return f"{self.bin_dir}/sbatch" if self.bin_dir else "sbatch"

    def submitter_table(self, kind: str = "sbatch") -> str:
        """The profile's ``[submitter]`` tables reaching this cluster: ``sbatch`` (its own
        clients), ``rest-tcp`` (JWT, api_version auto) or ``rest-unix``."""
        if kind == "sbatch":
            return f'[submitter]\nkind = "sbatch"\n[submitter.sbatch]\nsbatch = "{self.sbatch}"\n'
        if kind == "rest-tcp":
            return (
                '[submitter]\nkind = "rest"\n[submitter.rest]\n'
                f'url = "{self.rest_url}"\nuser = "{self.rest_user}"\n'
                f'token_file = "{self.token_file}"\napi_version = "auto"\n'
            )
        assert kind == "rest-unix", kind
        return f'[submitter]\nkind = "rest"\n[submitter.rest]\nurl = "unix://{self.rest_socket}"\n'

    def client(self, name: str) -> str:
        return f"{self.bin_dir}/{name}" if self.bin_dir else f"/usr/bin/{name}"

    def run(self, *args: str, timeout: float = 60) -> None:
        """Run ``scripts/local-slurm --slurm SERIES ARGS`` (e.g. ``controller stop``)."""
        argv = [str(LOCAL_SLURM), "--slurm", self.series, *args]
        subprocess.run(argv, check=True, timeout=timeout)

    def command(self, name: str, *args: str) -> str:
        """Run the cluster's Slurm client ``name`` and return its stdout."""
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "LC_ALL": "C",
            "SLURM_CONF": self.slurm_conf,
        }
        argv = [self.client(name), *args]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"{argv} failed: {done.stderr}")
        return done.stdout

    def show_job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job -o`` as a dict of its KEY=VALUE words."""
        words = self.command("scontrol", "show", "job", "-o", job_id).split()
        return dict(word.split("=", 1) for word in words if "=" in word)

    def await_no_jobs(self, timeout_s: float = 120) -> None:
        """Until the cluster holds no pending or running job (at most ``timeout_s``): a job
        that ends while the controller is stopped may never be told ended, and then holds the
        node until its time limit, keeping the next tests' jobs pending."""
        deadline = time.monotonic() + timeout_s
        while self.command("squeue", "-h", "-o", "%i").strip():
            if time.monotonic() > deadline:
                return
            time.sleep(0.5)

    def jobs_with_comment(self, marker: str) -> list[str]:
        out = self.command("squeue", "-h", "-t", "all", "-o", "%i|%k")
        return [
            line.split("|", 1)[0] for line in out.splitlines() if line.split("|", 1)[1:] == [marker]
        ]


def _unavailable(series: str, reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the local Slurm {series} cluster is required in CI: {reason}")
    pytest.skip(
        f"no local Slurm {series} cluster ({reason}); run scripts/local-slurm --slurm {series} up"
    )


def cluster(series: str) -> Cluster:
    """The running cluster of Slurm ``series``; skips (fails in CI) when it is not running."""
    if not LOCAL_SLURM.exists():
        _unavailable(series, "scripts/local-slurm missing")
    argv = [str(LOCAL_SLURM), "--slurm", series]
    status = subprocess.run([*argv, "status"], capture_output=True, text=True)
    if status.returncode != 0:
        _unavailable(series, "scripts/local-slurm status: " + " ".join(status.stdout.split()))
    env_out = subprocess.run([*argv, "env"], capture_output=True, text=True, check=True).stdout
    values = {}
    for line in env_out.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, value = words[1].split("=", 1)
            values[key] = value
    assert values["SLURM_IMAGE_TEST_SLURM_VERSION"] == series
    return Cluster(
        series=series,
        slurm_conf=values["SLURM_CONF"],
        rest_url=values["SLURM_IMAGE_TEST_REST_URL"],
        rest_socket=values["SLURM_IMAGE_TEST_REST_SOCKET"],
        token_file=values["SLURM_IMAGE_TEST_TOKEN_FILE"],
        rest_user=values["SLURM_IMAGE_TEST_REST_USER"],
        state_dir=values["SLURM_IMAGE_TEST_LOCAL_SLURM"],
        bin_dir=values["SLURM_IMAGE_TEST_SLURM_BIN"],
        rest_versions=tuple(values["SLURM_IMAGE_TEST_REST_VERSIONS"].split()),
    )

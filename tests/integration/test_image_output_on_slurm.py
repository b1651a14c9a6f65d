"""The image speaks only through the job, and nothing of the job stays on the node, through the
real local clusters with the Enroot stand-in (README, Threat model): the image's attempts to
erase, forge and flood the job's log leave it whole, `slurm-image logs` prints no raw control
character, the image reaches none of the cluster's daemons nor the registry from inside the
inspection, and neither a finished nor a cancelled job leaves its scratch on the node."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support import install_enroot_standin, run_cli

pytestmark = pytest.mark.slurm

JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
APPLETS = ("sh", "echo", "printf", "sleep", "cat", "head", "yes", "nc", "wc", "tr", "truncate")
FORGED = "slurm-image: verified chain: pinned sha256:" + "0" * 64
PYTHON = r"""#!/bin/sh
[ "$3" = "-c" ] && exit 0
out=$6
truncate -s 0 /proc/self/fd/2 2>/dev/null
( : >/proc/self/fd/2 ) 2>/dev/null
echo '@FORGED@' >&2
printf '\033]0;owned\007\033[2Jcleared\n' >&2
for port in @PORTS@; do
    if echo probe | nc -w 2 127.0.0.1 "$port" 2>/dev/null; then r=reached; else r=refused; fi
    echo "tcp $port $r" >&2
    echo "tcp $port $r" >>"$out"
done
echo "unix $(wc -l </proc/net/unix)" >>"$out"
@TAIL@
"""
FLOOD = "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 20971520 >&2"
WAITING = "waiting to be cancelled"


def node_ports(local: Any) -> list[int]:
    """The ports the cluster's daemons and the test registry listen on, on this node."""
    conf = Path(local.slurm_conf).read_text()
    ports = [int(re.search(rf"^{key}=(\d+)$", conf, re.M).group(1))  # type: ignore[union-attr]
             for key in ("SlurmctldPort", "SlurmdPort")]  # fmt: skip
    ports.append(int(local.rest_url.rsplit(":", 1)[1]))
    ports.append(5000)
    for port in ports:  # each one answers from the node itself: the probe can fail
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    return ports


def attack_image(base: Path, ports: list[int], tail: str) -> Path:
    if not (shutil.which("mksquashfs") and Path("/bin/busybox").is_file()):
        pytest.fail("squashfs-tools and busybox-static are required")
    root = base / "root"
    for directory in ("bin", "etc", "usr/bin", "tmp"):
        (root / directory).mkdir(parents=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    python = root / "usr" / "bin" / "python3"
    python.write_text(
        PYTHON.replace("@FORGED@", FORGED)
        .replace("@PORTS@", " ".join(map(str, ports)))
        .replace("@TAIL@", tail)
    )
    python.chmod(0o755)
    image = base / "images" / "attack.sqsh"
    image.parent.mkdir()
    subprocess.run(
        ["mksquashfs", str(root), str(image), "-all-root", "-no-progress", "-quiet", "-noappend"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return image


class Site:
    def __init__(self, base: Path, world: Path, local: Any) -> None:
        self.base, self.local = base, local
        self.workspace = base / "ws"
        self.workspace.mkdir(mode=0o700)
        self.scratch = world / "node-scratch"
        self.scratch.mkdir(mode=0o711)
        standin = install_enroot_standin(world / "standin")
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "200M"\n'
            f'time_limit = "0:05:00"\njob_path = "{standin}:{JOB_PATH}"\n'
            f'local_scratch = "{self.scratch}"\n' + local.submitter_table()
        )

    def cli(self, *args: str, json_out: bool = True) -> subprocess.CompletedProcess[str]:
        env = {"SLURM_CONF": self.local.slurm_conf, "HOME": str(self.base)}
        extra = ("--json",) if json_out else ()
        return run_cli(*args, *extra, cwd=self.base, env=env, inherit=False, timeout=180)

    def data(self, *args: str) -> dict[str, Any]:
        done = self.cli(*args)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def status(self, lifecycle_id: str) -> dict[str, Any]:
        entry: dict[str, Any] = self.data("status", lifecycle_id)["lifecycles"][0]
        return entry

    def wait_ended(self, lifecycle_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + 180
        while True:
            status = self.status(lifecycle_id)
            if status["state"] in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}:
                return status
            assert time.monotonic() < deadline, status
            time.sleep(0.5)

    def left_on_node(self, job_id: str) -> list[Path]:
        return sorted(self.scratch.glob(f"slurm-image-{job_id}.*"))


def test_an_image_can_neither_spoil_the_log_nor_reach_the_cluster_and_leaves_no_scratch(
    tmp_path: Path, world_readable_tmp: Path, local_slurm: Any
) -> None:
    site = Site(tmp_path, world_readable_tmp, local_slurm)
    ports = node_ports(local_slurm)
    image = attack_image(tmp_path, ports, FLOOD)

    lifecycle = site.data("inspect", str(image), "--name", "attack", "--role", "client")
    status = site.wait_ended(lifecycle["lifecycle_id"])

    assert status["state"] == "COMPLETED", status
    job_id = str(status["job_id"])
    result = Path(site.workspace) / "images" / ".tmp" / "jobs" / lifecycle["lifecycle_id"]
    report = (result / "output" / "inspection.json").read_text()
    for port in ports:
        assert f"tcp {port} refused" in report, report
    assert "unix 1" in report
    printed = site.cli("logs", lifecycle["lifecycle_id"], json_out=False)
    assert printed.returncode == 0, printed.stderr
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", printed.stdout)
    lines = printed.stdout.splitlines()
    own = [line for line in lines if line.startswith("slurm-image: ")]
    assert own[0].startswith("slurm-image: image sha256 "), own
    assert any(line.startswith("slurm-image: done: inspect_sqsh") for line in own), own
    assert f"image: {FORGED}" in lines and FORGED not in own
    assert r"image: \x1b]0;owned\x07\x1b[2Jcleared" in lines
    assert any("more were dropped" in line for line in own), own
    raw = site.data("logs", lifecycle["lifecycle_id"])
    texts = "".join(entry["text"] for entry in raw["logs"])
    assert r"image: \x1b]0;owned" in texts  # the job's escapes, as the log holds them
    assert site.left_on_node(job_id) == []


def test_a_job_cancelled_during_the_inspection_leaves_no_scratch_on_the_node(
    tmp_path: Path, world_readable_tmp: Path, local_slurm: Any
) -> None:
    site = Site(tmp_path, world_readable_tmp, local_slurm)
    image = attack_image(tmp_path, [], f"echo '{WAITING}' >&2\nsleep 300")

    lifecycle = site.data("inspect", str(image), "--name", "waiting", "--role", "client")
    lifecycle_id = lifecycle["lifecycle_id"]
    deadline = time.monotonic() + 180
    while True:
        logs = site.data("logs", lifecycle_id)
        if any(f"image: {WAITING}" in entry["text"] for entry in logs["logs"]):
            break
        assert time.monotonic() < deadline, logs
        time.sleep(0.5)
    job_id = str(site.status(lifecycle_id)["job_id"])
    assert site.left_on_node(job_id)  # the scratch exists while the job runs
    assert site.data("cancel", lifecycle_id)["lifecycle_id"] == lifecycle_id

    status = site.wait_ended(lifecycle_id)

    assert status["state"] == "CANCELLED", status
    deadline = time.monotonic() + 60
    while site.left_on_node(job_id):  # the EXIT trap runs after Slurm's TERM
        assert time.monotonic() < deadline, site.left_on_node(job_id)
        time.sleep(0.5)
    err = "".join(entry["text"] for entry in site.data("logs", lifecycle_id)["logs"])
    assert "Permission denied" not in err and "could not remove" not in err

"""Untrusted images through the real local cluster, with the Enroot stand-in.

Under ``ProctrackType=proctrack/linuxproc`` (the local cluster's, as on many sites) Slurm does
not kill what a job detached: a process the image starts must still be gone once the job has
COMPLETED, whatever it did to its leader or its root, an image's own ``etc/fstab`` must not
have reached the host, and root's image must not have changed a host kernel setting (README,
Threat model).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from support import install_enroot_standin, run_cli
from survivors import build_survivor, end_survivors, survivors

pytestmark = pytest.mark.slurm

JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MARKER = "331"
PYTHON = r"""#!/bin/sh
[ "$3" = "-c" ] && exit 0
out=$6
setsid sh -c 'sleep @MARKER@ </dev/null >/dev/null 2>&1 &' </dev/null >/dev/null 2>&1
echo planted >/mnt/outside/planted 2>/dev/null
echo '{"attack": "done"}' >"$out"
"""


def sleepers() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            if (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", MARKER.encode()]:
                found.append(int(entry.name))
    return found


@pytest.fixture
def no_sleepers() -> Iterator[None]:
    yield
    for pid in sleepers():
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def attack_image(base: Path, outside: Path) -> Path:
    if not (shutil.which("mksquashfs") and Path("/bin/busybox").is_file()):
        if os.environ.get("CI") == "true":
            pytest.fail("squashfs-tools and busybox-static are required when CI=true")
        pytest.skip("squashfs-tools or busybox-static missing")
    root = base / "root"
    for directory in ("bin", "etc", "usr/bin", "tmp"):
        (root / directory).mkdir(parents=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in ("sh", "echo", "sleep", "setsid", "cat"):
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "fstab").write_text(f"{outside} /mnt/outside none x-create=dir,bind,rw\n")
    python = root / "usr" / "bin" / "python3"
    python.write_text(PYTHON.replace("@MARKER@", MARKER))
    python.chmod(0o755)
    image = base / "images" / "attack.sqsh"
    image.parent.mkdir()
    subprocess.run(
        ["mksquashfs", str(root), str(image), "-all-root", "-no-progress", "-quiet", "-noappend"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return image


def run(base: Path, local: Any, *args: str) -> dict[str, Any]:
    env = {"SLURM_CONF": local.slurm_conf, "HOME": str(base)}
    done = run_cli(*args, "--json", cwd=base, env=env, inherit=False, timeout=120)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_an_image_leaves_no_process_and_mounts_nothing_on_the_cluster(
    tmp_path: Path, world_readable_tmp: Path, local_slurm: Any, no_sleepers: None
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    outside.chmod(0o777)
    image = attack_image(tmp_path, outside)
    standin = install_enroot_standin(world_readable_tmp / "standin")
    workspace = tmp_path / "ws"
    workspace.mkdir(mode=0o700)
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{workspace}"\n'
        "[image_build]\n"
        'partition = "build"\ncpus_per_task = 1\nmemory = "200M"\n'
        f'time_limit = "0:05:00"\njob_path = "{standin}:{JOB_PATH}"\n'
        + local_slurm.submitter_table()
    )

    submitted = run(tmp_path, local_slurm, "inspect", str(image), "--name", "a", "--role", "client")
    deadline = time.monotonic() + 120
    while True:
        status = run(tmp_path, local_slurm, "status", submitted["lifecycle_id"])["lifecycles"][0]
        if status["state"] in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)

    assert (status["state"], status["exit_code"]) == ("COMPLETED", 0), status
    assert sleepers() == []
    assert list(outside.iterdir()) == []


DOMAINNAME = Path("/proc/sys/kernel/domainname")
ATTACK = r"""#!/bin/sh
[ "$3" = "-c" ] && exit 0
out=$6
echo slurm-image-attack >/proc/sys/kernel/domainname 2>/dev/null
/bin/survivor zombie-leader "${out%/*}/ticks-zombie"
/bin/survivor chroot-proc "${out%/*}/ticks-chroot"
printf '{"schema_version": 3, "inspector_version": "3.0.0", "role": "serving",' >"$out"
printf ' "machine": "MACHINE", "sqsh_sha256": "%s", "facts": {"shadowed": [],' "$5" >>"$out"
printf ' "server": {"name": "vllm", "version": "0.6.3", "path": "/usr/local/bin/vllm"}}}\n' >>"$out"
""".replace("MACHINE", platform.machine())


@pytest.fixture
def domainname() -> Iterator[str]:
    """The host's kernel.domainname, restored whatever the test did to it."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the root job's case needs root (required when CI=true)")
        pytest.skip("the root job's case needs root")
    original = DOMAINNAME.read_text()
    try:
        yield original
    finally:
        DOMAINNAME.write_text(original)
        end_survivors()


def test_root_s_image_changes_no_host_setting_and_leaves_no_survivor_on_the_cluster(
    tmp_path: Path, world_readable_tmp: Path, local_slurm: Any, domainname: str
) -> None:
    root = tmp_path / "root"
    for directory in ("bin", "etc", "usr/bin", "tmp"):
        (root / directory).mkdir(parents=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in ("sh", "echo", "printf"):
        (root / "bin" / applet).symlink_to("busybox")
    shutil.copy2(build_survivor(tmp_path), root / "bin" / "survivor")
    python = root / "usr" / "bin" / "python3"
    python.write_text(ATTACK)
    python.chmod(0o755)
    image = tmp_path / "attack.sqsh"
    subprocess.run(
        ["mksquashfs", str(root), str(image), "-all-root", "-no-progress", "-quiet", "-noappend"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    standin = install_enroot_standin(world_readable_tmp / "standin")
    workspace = tmp_path / "ws"
    workspace.mkdir(mode=0o700)
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{workspace}"\n'
        "[image_build]\n"
        'partition = "build"\ncpus_per_task = 1\nmemory = "200M"\n'
        f'time_limit = "0:05:00"\njob_path = "{standin}:{JOB_PATH}"\n'
        + local_slurm.submitter_table()
    )

    published = run(
        tmp_path, local_slurm, "inspect", str(image), "--name", "a", "--role", "serving", "--wait"
    )

    assert published["lifecycle_id"], published
    assert DOMAINNAME.read_text() == domainname
    time.sleep(1)
    assert survivors() == []

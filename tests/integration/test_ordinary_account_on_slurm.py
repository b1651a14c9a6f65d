"""An ordinary account's jobs through the real Slurm 22.05 cluster (its slurmd runs on this
machine, so a job runs as any account of the machine; the 24.11 and 26.05 clients enter their
node roots with unshare, which only root may): on both inspection paths (unpacked where the
account cannot open /dev/fuse, the overlay where it can, as udev makes it on such nodes), a
published import, an image the inspector refuses (76), a registry answer the job refuses (79),
an image that attacks the log and the node's network, and a job cancelled during the inspection
leave nothing in the node's scratch and no "Permission denied" in their logs (README, Threat
model)."""

from __future__ import annotations

import json
import os
import pwd
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_image_output_on_slurm import FLOOD, FORGED, WAITING, attack_image, node_ports

from clusters import cluster
from lying_registry import CLIENT, NOPYTHON, Answer, lying_registry, pinned
from support import install_enroot_standin, run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

ACCOUNT = "slurm-image-user"
ACCOUNT_UID = 4343
JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def need_root() -> None:
    if os.geteuid() == 0:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("the ordinary account's jobs need root to make the account (CI runs as root)")
    pytest.skip("making an ordinary account needs root")


@pytest.fixture(scope="module")
def account() -> pwd.struct_passwd:
    """The ordinary account, made once on this machine when it is missing."""
    need_root()
    try:
        return pwd.getpwnam(ACCOUNT)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--uid", str(ACCOUNT_UID), "--user-group",
             "--no-create-home", "--shell", "/usr/sbin/nologin", ACCOUNT],
            check=True,
        )  # fmt: skip
        return pwd.getpwnam(ACCOUNT)


@pytest.fixture(params=["unpacked", "overlay"])
def inspection_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """The overlay path needs a /dev/fuse the account may open: made so for the test."""
    fuse = Path("/dev/fuse")
    mode = stat.S_IMODE(fuse.stat().st_mode)
    if request.param == "overlay":
        fuse.chmod(0o666)
    elif mode & 0o006:
        fuse.chmod(0o600)
    try:
        yield str(request.param)
    finally:
        fuse.chmod(mode)


TEST_IMAGES = Path(
    os.environ.get(
        "SLURM_IMAGE_TEST_IMAGES",
        Path.home() / ".cache" / "slurm-image" / "test-images" / "images.json",
    )
)


@pytest.fixture(scope="module")
def registry_images() -> dict[str, str]:
    """The images scripts/test-images pushed to the local registry."""
    if not TEST_IMAGES.is_file():
        message = f"no test images at {TEST_IMAGES} (scripts/test-images)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    images: dict[str, str] = json.loads(TEST_IMAGES.read_text())
    return images


class AccountSite:
    """A workspace, node scratch, stand-in and profile of the account's, reached as it."""

    def __init__(self, base: Path, user: pwd.struct_passwd) -> None:
        self.local = cluster("22.05")
        self.base, self.user = base, user
        self.workspace = base / "ws"
        self.scratch = base / "node-scratch"
        for directory in (self.workspace, self.scratch):
            directory.mkdir(mode=0o700)
        standin = install_enroot_standin(base / "standin")
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "500M"\n'
            f'time_limit = "0:05:00"\njob_path = "{standin}:{JOB_PATH}"\n'
            f'local_scratch = "{self.scratch}"\n'
            '[enroot]\nenvironment = { ENROOT_ALLOW_HTTP = "yes" }\n' + self.local.submitter_table()
        )
        self.give(base / "slurm-image.toml", self.workspace, self.scratch)

    def give(self, *paths: Path) -> None:
        for path in paths:
            subprocess.run(
                ["chown", "-R", f"{self.user.pw_uid}:{self.user.pw_gid}", str(path)], check=True
            )

    def cli(self, *args: str, timeout: float = 180) -> dict[str, Any]:
        prefix = ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}",
                  "--init-groups"]  # fmt: skip
        env = {"SLURM_CONF": self.local.slurm_conf, "HOME": str(self.base), "USER": ACCOUNT}
        done = run_cli(*args, "--json", cwd=self.base, env=env, prefix=prefix, inherit=False,
                       timeout=timeout)  # fmt: skip
        assert done.returncode in (0, 4), done.stderr
        result: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
        return result

    def image(self, name: str, ports: list[int], tail: str) -> Path:
        image = attack_image(self.base / name, ports, tail)
        self.give(self.base / name)
        return image

    def ended(self, lifecycle_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + 240
        while True:
            entry: dict[str, Any] = self.cli("status", lifecycle_id)["lifecycles"][0]
            if entry["state"] in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}:
                return entry
            assert time.monotonic() < deadline, entry
            time.sleep(0.5)

    def log(self, lifecycle_id: str) -> str:
        return "".join(entry["text"] for entry in self.cli("logs", lifecycle_id)["logs"])

    def attempt(self, lifecycle_id: str) -> Path:
        return self.workspace / "images" / ".tmp" / "jobs" / lifecycle_id

    def nothing_left(self, status: dict[str, Any], lifecycle_id: str) -> None:
        deadline = time.monotonic() + 60
        while list(self.scratch.glob(f"slurm-image-{status['job_id']}.*")):
            assert time.monotonic() < deadline, list(self.scratch.iterdir())
            time.sleep(0.5)
        log = self.log(lifecycle_id)
        assert "Permission denied" not in log and "could not remove" not in log, log[-2000:]

    def path_taken(self, lifecycle_id: str) -> str:
        record = json.loads((self.attempt(lifecycle_id) / "inspection-path.json").read_text())
        return str(record["path"])


def test_an_ordinary_account_s_jobs_leave_nothing_on_the_node_whatever_their_end(
    world_readable_tmp: Path,
    account: pwd.struct_passwd,
    inspection_path: str,
    registry_images: dict[str, str],
) -> None:
    site = AccountSite(world_readable_tmp, account)

    # a published import
    published = site.cli(
        "import", registry_images["client"], "--name", "client", "--role", "client", "--wait",
        timeout=600,
    )  # fmt: skip
    assert published.get("name") == "client", published
    lifecycle_id = published["lifecycle_id"]
    assert site.path_taken(lifecycle_id) == inspection_path
    status = site.cli("status", lifecycle_id)["lifecycles"][0]
    site.nothing_left(status, lifecycle_id)

    # an image the inspector refuses: 76
    refused = site.image("refused", [], "exit 1")
    lifecycle_id = site.cli("inspect", str(refused), "--name", "r", "--role", "client")[
        "lifecycle_id"
    ]
    status = site.ended(lifecycle_id)
    assert (status["state"], status["exit_code"]) == ("FAILED", 76), status
    site.nothing_left(status, lifecycle_id)

    # a registry answer the job refuses: 79
    with lying_registry() as registry:
        pin = pinned(registry_images, "nopython")
        other = registry.manifest(CLIENT, pinned(registry_images, "client"))
        registry.answer(Answer(f"/v2/{NOPYTHON}/manifests/{pin}", other))
        source = f"{registry.address}/{NOPYTHON}:1@{pin}"
        lifecycle_id = site.cli("import", source, "--name", "lied", "--role", "client")[
            "lifecycle_id"
        ]
        status = site.ended(lifecycle_id)
    assert (status["state"], status["exit_code"]) == ("FAILED", 79), status
    site.nothing_left(status, lifecycle_id)

    # an image that attacks the log and the node's network
    ports = node_ports(site.local)
    attacking = site.image("attack", ports, FLOOD)
    lifecycle_id = site.cli("inspect", str(attacking), "--name", "a", "--role", "client")[
        "lifecycle_id"
    ]
    status = site.ended(lifecycle_id)
    assert status["state"] == "COMPLETED", status
    assert site.path_taken(lifecycle_id) == inspection_path
    report = (site.attempt(lifecycle_id) / "output" / "inspection.json").read_text()
    assert all(f"tcp {port} refused" in report for port in ports), report
    log = site.log(lifecycle_id)
    lines = log.splitlines()
    assert lines[0].startswith("slurm-image: ") or lines[0] == ""
    assert f"image: {FORGED}" in lines
    assert not [line for line in lines if line.startswith(FORGED)]
    assert any("more were dropped" in line for line in lines)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", log)
    site.nothing_left(status, lifecycle_id)

    # a job cancelled during the inspection
    waiting = site.image("waiting", [], f"echo '{WAITING}' >&2\nsleep 300")
    lifecycle_id = site.cli("inspect", str(waiting), "--name", "w", "--role", "client")[
        "lifecycle_id"
    ]
    deadline = time.monotonic() + 180
    while f"image: {WAITING}" not in site.log(lifecycle_id):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    site.cli("cancel", lifecycle_id)
    status = site.ended(lifecycle_id)
    assert status["state"] == "CANCELLED", status
    site.nothing_left(status, lifecycle_id)

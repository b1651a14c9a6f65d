"""The inspector inside real Debian 11, 12 and 13 roots with apt's python3-pip.

The roots are built once by scripts/debian-roots into $SLURM_IMAGE_ROOTS_CACHE (default
~/.cache/slurm-image/roots). Each run happens in a private mount namespace: the staged files and
any change to the root live on tmpfs mounts that vanish with it, so the cached roots stay as
built and concurrent runs do not meet.
"""

from __future__ import annotations

import ensurepip
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from inspector_env import INSPECTOR, RC_FILE, SHA

import slurm_image.inspector.inspect_image as inspect_image

pytestmark = pytest.mark.debian_roots

SUITES = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}
ROOTS = Path(
    os.environ.get("SLURM_IMAGE_ROOTS_CACHE") or Path.home() / ".cache" / "slurm-image" / "roots"
)
JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Runs as root in a private mount namespace. $1 root, $2 role, $3 setup, $4 wheel dir.
START = r"""
set -eu
root=$1
mount -t tmpfs -o mode=0755 slurm-image "$root/.slurm-image"
cp "$INSPECTOR" "$RC_FILE" "$root/.slurm-image/"
mkdir -m 0700 "$root/.slurm-image/output"
in_root() { env -i PATH="$JOB_PATH" HOME=/root LC_ALL=C.UTF-8 /usr/sbin/chroot "$root" "$@"; }
case $3 in
    plain) ;;
    usr-local-pip | only-usr-local-pip)
        mount -t tmpfs -o mode=0755 slurm-image "$root/usr/local"
        mkdir "$root/usr/local/src"
        cp "$4"/pip-*.whl "$root/usr/local/src/"
        wheel=$(cd "$root/usr/local/src" && echo pip-*.whl)
        in_root env PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore \
            PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install -q --no-index --no-deps \
            --ignore-installed "/usr/local/src/$wheel" >&2
        if [ "$3" = only-usr-local-pip ]; then
            mount -t tmpfs -o mode=0755 slurm-image "$root/usr/lib/python3/dist-packages"
        fi
        ;;
esac
set +e
in_root /bin/sh /.slurm-image/enroot.rc -- "$2" "$SHA" /.slurm-image/output/inspection.json
status=$?
cat "$root/.slurm-image/output/inspection.json" 2>/dev/null
ls -A "$root/.slurm-image/output" >&2
exit $status
"""


@dataclass(frozen=True)
class Run:
    returncode: int
    stderr: str
    record: dict | None


def _absent(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must run scripts/debian-roots first)")
    pytest.skip(reason)


@pytest.fixture(params=sorted(SUITES))
def suite(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        _absent("chroot and mount namespaces need root and unshare")
    if not (ROOTS / name / ".slurm-image-root-complete").is_file():
        _absent(f"no {name} root under {ROOTS}: run scripts/debian-roots")
    (ROOTS / name / ".slurm-image").mkdir(exist_ok=True)
    return name


def _bundled_pip_wheels() -> Path:
    bundled = Path(ensurepip.__file__).with_name("_bundled")
    if not list(bundled.glob("pip-*.whl")):
        _absent(f"this Python bundles no pip wheel in {bundled}")
    return bundled


def start(suite: str, role: str, setup: str = "plain") -> Run:
    wheels = str(_bundled_pip_wheels()) if setup != "plain" else ""
    proc = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            START,
            "start",
            str(ROOTS / suite),
            role,
            setup,
            wheels,
        ],
        env={
            "PATH": JOB_PATH,
            "INSPECTOR": str(INSPECTOR),
            "RC_FILE": str(RC_FILE),
            "SHA": SHA,
            "JOB_PATH": JOB_PATH,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    record = json.loads(proc.stdout) if proc.stdout.strip() else None
    return Run(proc.returncode, proc.stderr, record)


def apt_pip_version(suite: str) -> str:
    """Upstream version of the root's python3-pip, as dpkg knows it (e.g. 23.0.1+dfsg-1)."""
    out = subprocess.run(
        [
            "dpkg-query",
            f"--admindir={ROOTS / suite / 'var/lib/dpkg'}",
            "-W",
            "-f=${Version}",
            "python3-pip",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    match = re.match(r"(?:\d+:)?([0-9][0-9.]*[0-9])", out)
    assert match, out
    return match.group(1)


def test_client_facts_name_apts_pip_and_usr_bin_pip(suite: str) -> None:
    run = start(suite, "client")
    assert run.returncode == 0, run.stderr
    facts = run.record["facts"]
    version = apt_pip_version(suite)
    assert facts["installer"] == {"name": "pip", "version": version, "path": "/usr/bin/pip"}
    assert {"name": "pip", "version": version} in facts["distributions"]
    assert facts["python"]["implementation"] == "cpython"
    assert facts["python"]["version"].startswith(SUITES[suite] + ".")
    assert facts["python"]["abi"] == "cp" + SUITES[suite].replace(".", "")
    # /usr/bin/python3 is Debian's symlink to python3.X: the facts name the file it resolves to
    assert facts["python"]["executable"] == "/usr/bin/python" + SUITES[suite]
    assert facts["shadowed"] == []
    from slurm_image.domain.inspection import validate_inspection

    validate_inspection(json.dumps(run.record).encode(), role="client", sqsh_sha256=SHA)


def test_serving_without_vllm_is_refused_with_no_output(suite: str) -> None:
    run = start(suite, "serving")
    assert run.returncode == inspect_image.EXIT_REFUSED
    assert run.record is None
    assert "vllm" in run.stderr


def test_pip_upgraded_into_usr_local_shadows_apts(suite: str) -> None:
    # apt's python3-pip, then pip installed again as root: Debian's pip leaves apt's copy
    run = start(suite, "client", "usr-local-pip")
    assert run.returncode == 0, run.stderr
    (wheel,) = _bundled_pip_wheels().glob("pip-*.whl")
    facts = run.record["facts"]
    assert facts["installer"] == {
        "name": "pip",
        "version": wheel.name.split("-")[1],
        "path": "/usr/local/bin/pip",
    }
    assert facts["shadowed"] == [
        {
            "name": "pip",
            "version": apt_pip_version(suite),
            "location": "/usr/lib/python3/dist-packages",
        }
    ]


def test_pip_only_in_usr_local_names_usr_local_bin_pip(suite: str) -> None:
    run = start(suite, "client", "only-usr-local-pip")
    assert run.returncode == 0, run.stderr
    (wheel,) = _bundled_pip_wheels().glob("pip-*.whl")
    version = wheel.name.split("-")[1]
    assert run.record["facts"]["installer"] == {
        "name": "pip",
        "version": version,
        "path": "/usr/local/bin/pip",
    }

"""The image layouts of scripts/layout-roots and a way to run the staged inspector inside one.

Each run happens in a private mount namespace, as the Debian-root tests do: the staged files live
on a tmpfs that vanishes with it, so the cached roots stay as built and runs do not meet. The rc
file runs with the image's environment (its config's Env), as Enroot starts it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from inspector_env import INSPECTOR, RC_FILE, SHA

ROOTS = Path(
    os.environ.get("SLURM_IMAGE_ROOTS_CACHE") or Path.home() / ".cache" / "slurm-image" / "roots"
)
LAYOUTS = ROOTS / "layouts"
NAMES = ("pip-upgraded", "venv", "uv-system", "conda", "required")

# Runs as root in a private mount namespace. $1 root, $2 role; the image's Env after them.
START = r"""
set -eu
root=$1 role=$2
shift 2
mount -t tmpfs -o mode=0755 slurm-image "$root/.slurm-image"
# Enroot mounts proc in the container; conda's $ORIGIN-relative libraries need it
mount -t proc proc "$root/proc"
cp "$INSPECTOR" "$RC_FILE" "$root/.slurm-image/"
mkdir -m 0700 "$root/.slurm-image/output"
set +e
env -i HOME=/root "$@" /usr/sbin/chroot "$root" \
    /bin/sh /.slurm-image/enroot.rc -- "$role" "$SHA" /.slurm-image/output/inspection.json
status=$?
cat "$root/.slurm-image/output/inspection.json" 2>/dev/null
ls -A "$root/.slurm-image/output" >&2
exit $status
"""


@dataclass(frozen=True)
class Layout:
    name: str
    root: Path
    manifest: dict[str, Any]

    @property
    def env(self) -> list[str]:
        return list(self.manifest["env"])

    def version(self, name: str) -> str:
        return str(self.manifest["versions"][name])

    def dpkg_version(self, package: str) -> str:
        """Upstream version of a Debian package in the root (e.g. 23.0.1 of 23.0.1+dfsg-1)."""
        out = subprocess.run(
            [
                "dpkg-query",
                f"--admindir={self.root / 'var/lib/dpkg'}",
                "-W",
                "-f=${Version}",
                package,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        match = re.match(r"(?:\d+:)?([0-9][0-9.]*[0-9])", out)
        assert match, out
        return match.group(1)


@dataclass(frozen=True)
class Run:
    returncode: int
    stderr: str
    record: dict[str, Any] | None


def absent(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must run scripts/layout-roots first)")
    pytest.skip(reason)


def layout(name: str) -> Layout:
    """The cached layout ``name``; skip (fail in CI) when it was not built."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        absent("chroot and mount namespaces need root and unshare")
    root = LAYOUTS / name
    manifest = LAYOUTS / f"{name}.json"
    if not (root / ".slurm-image-root-complete").is_file() or not manifest.is_file():
        absent(f"no {name} layout under {LAYOUTS}: run scripts/layout-roots")
    return Layout(name, root, json.loads(manifest.read_text()))


def inspect_in(found: Layout, role: str, *, require: str | None = None) -> Run:
    """The rc file and the inspector as the job stages them, inside the layout's root."""
    env = found.env + ([f"SLURM_IMAGE_REQUIRE={require}"] if require else [])
    command = ["unshare", "-m", "--propagation", "private", "sh", "-c", START, "start"]
    proc = subprocess.run(
        [*command, str(found.root), role, *env],
        env={
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "INSPECTOR": str(INSPECTOR),
            "RC_FILE": str(RC_FILE),
            "SHA": SHA,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    record = json.loads(proc.stdout) if proc.stdout.strip() else None
    return Run(proc.returncode, proc.stderr, record)

"""Builders shared by the tests: fixed digests, profiles, plans, a fixed clock, and the command
line in a fresh process."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import pytest

from slurm_image.domain.plan import Plan, RuntimeDigests, derive_plan
from slurm_image.domain.profile import ProfileSelection, SiteProfile, parse_profile
from slurm_image.domain.request import make_request

HEX = "0123456789abcdef" * 4
OTHER_HEX = "f" * 64
DIGEST = f"sha256:{HEX}"
LIFECYCLE_ID = "img-00000000000000000000000000000001"
CREATED_AT = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
RUNTIME = RuntimeDigests(inspector_sha256="1" * 64, rc_sha256="2" * 64)
PYTORCH = f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}"
PYTORCH_URI = f"docker://nvcr.io#nvidia/pytorch:24.05-py3@{DIGEST}"
SQSH = "/lustre/images/serving.sqsh"

PROFILE: dict[str, Any] = {
    "workspace_root": "/lustre/site/images",
    "image_build": {
        "partition": "cpu",
        "cpus_per_task": 4,
        "memory": "16G",
        "time_limit": "1:00:00",
    },
}

FULL_PROFILE: dict[str, Any] = {
    "workspace_root": "/lustre/site/images",
    "image_build": {
        "partition": "cpu",
        "account": "research",
        "qos": "normal",
        "cpus_per_task": 8,
        "memory": "32G",
        "time_limit": "2:30:00",
        "local_scratch": "/local/scratch",
        "job_path": "/opt/enroot/bin:/usr/local/bin:/usr/bin:/bin",
    },
    "inspection": {"client_distributions": ["pip", "numpy"]},
    "enroot": {
        "environment": {
            "ENROOT_SQUASH_OPTIONS": "-comp zstd -Xcompression-level 3",
            "ENROOT_TRANSFER_RETRIES": "5",
        }
    },
    "submitter": {"kind": "fake"},
}


def profile_data(**image_build: Any) -> dict[str, Any]:
    """A deep copy of the minimal profile, with ``image_build`` keys replaced."""
    data = copy.deepcopy(PROFILE)
    data["image_build"].update(image_build)
    return data


def selection_for(profile: SiteProfile) -> ProfileSelection:
    return ProfileSelection(
        how="explicit", catalog_sha256="3" * 64, profile_sha256=profile.sha256()
    )


def make_plan(
    operation: str = "import_oci",
    *,
    source: str = PYTORCH,
    role: str = "client",
    name: str = "torch",
    profile: dict[str, Any] | None = None,
    lifecycle_id: str = LIFECYCLE_ID,
    architecture: str | None = None,
    resolved_from: Any = None,
) -> Plan:
    site = parse_profile(copy.deepcopy(profile if profile is not None else PROFILE))
    request = make_request(
        operation,  # type: ignore[arg-type]
        name=name,
        role=role,
        source=source,
        architecture=architecture,
        resolved_from=resolved_from,
    )
    return derive_plan(
        request,
        site,
        selection_for(site),
        lifecycle_id=lifecycle_id,
        created_at=CREATED_AT,
        runtime=RUNTIME,
    )


def unavailable(reason: str) -> NoReturn:
    """A prerequisite is missing: skip locally, but fail when ``CI=true`` — CI must never pass
    by silently skipping what it is there to check."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required when CI=true)")
    pytest.skip(reason)


PACKAGE_DIR = str(Path(__file__).resolve().parents[1] / ".pkg")
"""The directory holding this checkout's ``slurm_image`` (a symlink to src/)."""


def run_cli(
    *args: str | bytes,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
    inherit: bool = True,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``slurm-image ARGS`` in a fresh process of this interpreter, run from ``cwd`` (after
    ``prefix``, e.g. ``unshare -m``), with this checkout's package first on the path and ``env``
    on top of either the caller's environment without its ``SLURM_IMAGE_*`` settings or, with
    ``inherit=False``, only the caller's ``PATH`` (a login shell's bare minimum)."""
    if inherit:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_IMAGE_")}
    else:
        environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    environ["PYTHONPATH"] = PACKAGE_DIR
    environ.update(env or {})
    command = [*prefix, sys.executable, "-m", "slurm_image.composition", *args]
    return subprocess.run(
        command, cwd=cwd, env=environ, capture_output=True, text=True, timeout=timeout
    )


def require_root_for(harness: Any) -> None:
    """Giving a file to another uid needs root on a real filesystem (CI runs as root)."""
    if getattr(harness, "kind", "local") == "local" and os.geteuid() != 0:
        unavailable("needs root to give files and directories to another uid")


ENROOT_STANDIN = Path(__file__).resolve().parent / "fixtures" / "enroot" / "enroot"


def install_enroot_standin(directory: Path, config: Mapping[str, Any] | None = None) -> Path:
    """A copy of the Enroot stand-in and its stock configuration in the new ``directory`` (for a
    job's ``job_path``), installed as Enroot is: readable by everyone. The image's side of a root
    job runs Enroot as the unprivileged sandbox id (README, Threat model), so ``directory`` must
    lie where everyone can walk (the ``world_readable_tmp`` fixture, not pytest's own). A ``log``
    the configuration names is created writable by that id too."""
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    shutil.copy2(ENROOT_STANDIN, directory / "enroot")
    (directory / "enroot").chmod(0o755)
    shutil.copytree(ENROOT_STANDIN.parent / "sysconf", directory / "sysconf")
    if config is not None:
        (directory / "enroot-standin.json").write_text(json.dumps(config))
        if config.get("log"):
            log = Path(config["log"])
            log.touch()
            log.chmod(0o666)
    return directory

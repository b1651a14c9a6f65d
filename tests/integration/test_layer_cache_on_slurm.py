"""On the local cluster, through the CLI: two imports of images that share all but a top layer
share the user's layer cache (README, "The layer cache"): the second job asks the registry for
its new layer and config alone, and both are published."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters import enroot_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

# the execution suite's fixture of the local registry's test images, registered here by import
from harness import registry_images  # noqa: F401

from lying_registry import CLIENT, LyingRegistry, blob_gets, derived_image, lying_registry
from support import install_enroot_standin, run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.full_only]

JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture
def images(request: pytest.FixtureRequest) -> dict[str, str]:
    found: dict[str, str] = request.getfixturevalue("registry_images")
    return found


@pytest.fixture
def registry(images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as honest:  # forwards everything: it only counts the requests
        yield honest


def site(base: Path, local: Any) -> tuple[Path, dict[str, str]]:
    workspace = base / "ws"
    workspace.mkdir()
    job_path = JOB_PATH
    if not shutil.which("enroot"):
        install_enroot_standin(base / "bin")
        job_path = f"{base}/bin:{JOB_PATH}"
    (base / "slurm-image.toml").write_text(
        f'workspace_root = "{workspace}"\n'
        "[image_build]\n"
        'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:15:00"\n'
        f'job_path = "{job_path}"\n' + enroot_table() + local.submitter_table()
    )
    return workspace, {"SLURM_CONF": local.slurm_conf, "HOME": str(base)}


def import_(base: Path, env: dict[str, str], source: str, name: str) -> dict[str, Any]:
    done: subprocess.CompletedProcess[str] = run_cli(
        *("import", source, "--name", name, "--role", "client", "--wait", "--timeout", "800"),
        "--json",
        cwd=base,
        env=env,
        inherit=False,
        timeout=900,
    )
    logs = "".join(
        path.read_text(errors="replace")
        for path in sorted((base / "ws" / "images" / ".tmp" / "jobs").glob("*/slurm-*.*"))
    )
    assert done.returncode == 0, done.stdout + done.stderr + logs[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["state"] == "PUBLISHED" and result["from_store"] is False
    return result


def test_a_second_import_sharing_all_but_its_top_layer_downloads_only_that_layer(
    world_readable_tmp: Path, local_slurm: Any, registry: LyingRegistry, images: dict[str, str]
) -> None:
    pin = images["client"].rsplit("@", 1)[1]
    workspace, env = site(world_readable_tmp, local_slurm)
    shared = [layer["digest"] for layer in json.loads(registry.manifest(CLIENT, pin))["layers"]]
    derived, new_layer, new_config = derived_image(registry, CLIENT, pin, "v2")

    import_(world_readable_tmp, env, f"{registry.address}/{CLIENT}:1@{pin}", "v1")
    first = blob_gets(registry)
    registry.requests.clear()
    import_(world_readable_tmp, env, f"{registry.address}/{CLIENT}:2@{derived}", "v2")

    assert set(shared) <= set(first)
    assert sorted(blob_gets(registry)) == sorted([new_layer, new_config])
    cache = workspace / "images" / "layer-cache"
    assert oct(cache.stat().st_mode & 0o7777) == "0o700"
    names = {path.name for path in cache.iterdir()}
    assert {digest.removeprefix("sha256:") for digest in [*shared, new_layer]} <= names
    assert not any(name.startswith(".tokens.") and any(
        (cache / name).iterdir()) for name in names)  # fmt: skip

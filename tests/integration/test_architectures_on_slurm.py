"""On the local cluster: one two-architecture index (scripts/test-images' ``multi``, whose arm64
image is a real Debian arm64 root) imported for aarch64 and for x86_64 through sbatch and
slurmrestd ends in one alias with an entry per architecture; ``show --arch`` names each
artifact, whose python3 is an ELF of that machine; a third import of the index for either
architecture, by the index's digest or by its per-architecture manifest's, is answered from the
store. The arm64 image runs under the node's binfmt_misc handler (qemu-user-static, flag F)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusters import enroot_table
from multiarch import MultiImage, elf_machine, multi_image, require_machine
from support import install_enroot_standin, run_cli, unavailable

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.full_only]

JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Site:
    def __init__(self, base: Path, local: Any, kind: str) -> None:
        self.base = base
        self.workspace = base / "ws"
        self.workspace.mkdir()
        job_path = JOB_PATH
        if not shutil.which("enroot"):
            install_enroot_standin(base / "bin")
            job_path = f"{base}/bin:{JOB_PATH}"
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:15:00"\n'
            f'job_path = "{job_path}"\n' + enroot_table() + local.submitter_table(kind)
        )
        self.env = {"SLURM_CONF": local.slurm_conf, "HOME": str(base)}

    def json(self, *args: str) -> dict[str, Any]:
        done = run_cli(*args, "--json", cwd=self.base, env=self.env, inherit=False, timeout=900)
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    def import_(self, source: str, arch: str, name: str = "m") -> dict[str, Any]:
        return self.json(
            "import", source, "--name", name, "--role", "client", "--arch", arch,
            "--wait", "--timeout", "800",
        )  # fmt: skip


def _python_machine(sqsh: str, scratch: Path) -> str:
    """The ELF machine of the image's /usr/bin/python3 (a symlink inside it, followed there)."""
    if not shutil.which("unsquashfs"):
        unavailable("unsquashfs (squashfs-tools) is missing")
    scratch.mkdir()
    target = scratch / "unpacked"
    done = subprocess.run(
        ["unsquashfs", "-no-xattrs", "-quiet", "-d", str(target), sqsh, "/usr/bin"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    python = target / "usr" / "bin" / "python3"
    while python.is_symlink():
        python = python.parent / python.readlink()
    return elf_machine(python)


@pytest.mark.parametrize("kind", ["sbatch", "rest-tcp"])
def test_an_index_for_two_architectures_is_one_alias_resolved_per_architecture(
    world_readable_tmp: Path, local_slurm: Any, kind: str
) -> None:
    require_machine("aarch64")
    multi: MultiImage = multi_image()
    site = Site(world_readable_tmp, local_slurm, kind)

    published = {}
    for arch in ("aarch64", "x86_64"):
        outcome = site.import_(multi.index, arch)
        assert (outcome["state"], outcome["from_store"]) == ("PUBLISHED", False), outcome
        assert outcome["architecture"] == arch
        assert outcome["chain"]["pinned"] == multi.index_digest
        assert outcome["chain"]["manifest"] == multi.digest(arch)
        published[arch] = outcome["path"]
    assert published["aarch64"] != published["x86_64"]

    for arch in ("aarch64", "x86_64"):
        shown = site.json("show", "m", "--arch", arch)
        assert (shown["architecture"], shown["path"]) == (arch, published[arch])
        assert shown["architectures"] == ["aarch64", "x86_64"]
        assert shown["facts"]["python"]["implementation"] == "cpython"
        assert _python_machine(shown["path"], world_readable_tmp / f"unpack-{arch}") == arch
    listed = site.json("list")["images"]
    assert sorted((row["name"], row["architecture"]) for row in listed) == [
        ("m", "aarch64"),
        ("m", "x86_64"),
    ]

    for arch in ("aarch64", "x86_64"):
        again = site.import_(multi.index, arch)
        assert (again["from_store"], again["path"]) == (True, published[arch])
    by_manifest = site.import_(multi.manifests["aarch64"], "aarch64", name="m-arm")
    assert (by_manifest["from_store"], by_manifest["path"]) == (True, published["aarch64"])

"""The workloads of ``bench/run.py``, built with the product's own code in a temporary directory.

- ``Site``: a workspace, two profiles (the in-memory scheduler, and ``sbatch`` pointing at a
  recording stub that answers at once), published aliases made through the Python API, and
  attempts staged with ``--no-submit``'s code path;
- ``bench_image``: a tiny real squashfs image (busybox and a stand-in ``python3``) for the job.

Nothing here needs the local Slurm cluster or the registry.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_image import Lifecycles
from slurm_image.domain.request import make_request

SOURCE_DIGEST = "5" * 64
SOURCE = f"registry.example.org/team/app:1@sha256:{SOURCE_DIGEST}"
DISTRIBUTIONS = 150
"""A client image's facts as a real one has them: a pip-installed framework and its deps."""

SBATCH_STUB = """#!/bin/sh
# A recording sbatch: one line per call, the script read from stdin, a job id at once.
printf '%s\\n' "$*" >>"$(dirname "$0")/calls.log"
cat >/dev/null
echo $$
"""


def client_facts() -> dict[str, Any]:
    distributions = [{"name": f"dist{i:03d}", "version": f"1.{i}.0"} for i in range(DISTRIBUTIONS)]
    distributions.append({"name": "pip", "version": "23.0.1"})
    return {
        "python": {"implementation": "cpython", "version": "3.11.2", "abi": "cp311"},
        "distributions": distributions,
        "installer": {"name": "pip", "version": "23.0.1", "path": "/usr/bin/pip"},
    }


def inspection(role: str, sqsh: bytes) -> bytes:
    """``inspection.json`` as the inspector writes it for ``sqsh``."""
    facts = client_facts()
    facts["python"]["executable"] = "/usr/bin/python3.11"
    facts["shadowed"] = []
    record = {
        "schema_version": 3,
        "inspector_version": "3.0.0",
        "role": role,
        "sqsh_sha256": hashlib.sha256(sqsh).hexdigest(),
        "machine": "x86_64",
        "facts": facts,
    }
    return json.dumps(record).encode()


def chain_record(pinned: str) -> bytes:
    """``chain.json`` as the import job writes it for a manifest pinned directly."""
    config = "sha256:" + "c" * 64
    return f'{{"config": "{config}", "manifest": "{pinned}", "pinned": "{pinned}"}}\n'.encode()


PROFILE = """workspace_root = "{root}"

[image_build]
partition = "cpu"
cpus_per_task = 1
memory = "1G"
time_limit = "0:10:00"

[submitter]
kind = "{kind}"

[submitter.sbatch]
sbatch = "{sbatch}"
"""


@dataclass
class Site:
    """A workspace with its profiles, under ``base`` (a private temporary directory)."""

    base: Path

    def __post_init__(self) -> None:
        self.base.mkdir(mode=0o700, exist_ok=True)
        self.root = self.base / "ws"
        self.root.mkdir(mode=0o700)
        self.bin = self.base / "bin"
        self.bin.mkdir(mode=0o700)
        sbatch = self.bin / "sbatch"
        sbatch.write_text(SBATCH_STUB)
        sbatch.chmod(0o755)
        self.sbatch_calls = self.bin / "calls.log"
        self.fake_profile = self._profile("fake")
        self.sbatch_profile = self._profile("sbatch")
        self.fake = Lifecycles.from_profile(str(self.fake_profile), environ={})
        self.sbatch = Lifecycles.from_profile(str(self.sbatch_profile), environ={})

    def _profile(self, kind: str) -> Path:
        path = self.base / f"{kind}.toml"
        path.write_text(PROFILE.format(root=self.root, kind=kind, sbatch=self.bin / "sbatch"))
        return path

    def publish_finished(self, name: str, sqsh: bytes) -> str:
        """One import through the API with the in-memory scheduler: staged, submitted, its job
        COMPLETED with the candidate, ``inspection.json``, ``chain.json`` and ``architecture``
        the job writes, then published."""
        request = make_request("import_oci", name=name, role="client", source=SOURCE)
        prepared = self.fake.stage(request)
        submission = self.fake.container.submit()(prepared)
        paths = prepared.plan.paths
        Path(paths.sqsh).write_bytes(sqsh)
        Path(paths.result).write_bytes(inspection("client", sqsh))
        Path(paths.job_dir, "chain.json").write_bytes(chain_record(f"sha256:{SOURCE_DIGEST}"))
        Path(paths.job_dir, "architecture").write_bytes(b"x86_64\n")
        self.fake.container.submitter().finish(submission.job_id, 0)
        return prepared.lifecycle_id

    def publish(self, lifecycle_id: str) -> None:
        self.fake.publish(lifecycle_id)

    def alias(self, name: str) -> None:
        """Another alias of the stored source: answered from the store, as ``import`` does."""
        outcome = self.fake.import_image(SOURCE, name=name, role="client", arch="x86_64")
        assert outcome.from_store, outcome

    def staged(self, count: int, lifecycles: Lifecycles | None = None) -> list[str]:
        """``count`` attempts staged as ``import --no-submit`` stages them (by default through
        the sbatch profile, whose submitter they then name)."""
        api = self.sbatch if lifecycles is None else lifecycles
        ids = []
        for i in range(count):
            source = f"registry.example.org/team/app:{i}@sha256:{'6' * 64}"
            outcome = api.import_image(source, name=f"staged{i}", role="client", submit=False)
            ids.append(outcome.lifecycle_id)
        return ids


# -- the job's image -----------------------------------------------------------------------

FAKE_PYTHON = """#!/bin/sh
# python3 of the bench image: `-c CODE` succeeds at once; the inspector's call writes a record.
for arg in "$@"; do
    [ "$arg" = -c ] && exit 0
    out=$arg
done
echo '{}' >"$out"
"""
ENROOT_RC = """# What `enroot import` writes as /etc/rc: run the command given, else a shell.
if [ $# -gt 0 ]; then exec "$@"; else exec /bin/sh; fi
"""
BUSYBOX_APPLETS = ["sh", "cat", "ls", "echo", "env", "mkdir", "test", "[", "printf", "dd"]


IMAGE_CONTENT_IGNORED = shutil.ignore_patterns("site-packages", "__pycache__")


def bench_image(base: Path) -> Path:
    """A real squashfs: busybox-static as /bin/sh, a stand-in python3, and as the image's
    content a copy of this interpreter's standard library without site-packages (about 100 MiB
    of real files, .py, .so and .a, that compress as an image's do; random bytes would not, and
    would make unpacking a plain copy)."""
    root = base / "image-root"
    (root / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "tmp").mkdir()
    (root / "usr" / "bin").mkdir(parents=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in BUSYBOX_APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "environment").write_text("PATH=/usr/bin:/bin\n")
    (root / "etc" / "rc").write_text(ENROOT_RC)
    python = root / "usr" / "bin" / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(stdlib, root / "data", symlinks=True, ignore=IMAGE_CONTENT_IGNORED)
    image = base / "image.sqsh"
    subprocess.run(
        [
            *("mksquashfs", str(root), str(image), "-all-root", "-no-progress", "-quiet"),
            *("-noappend", "-comp", "lzo", "-noD"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(root)
    return image

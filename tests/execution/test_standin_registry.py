"""The stand-in is as credulous as Enroot (docker.sh): it hashes no manifest, reads the body of a
404 manifest-list answer, checks every blob against the manifest's digests, and creates the
image's WorkingDir below its root on the host's view, wherever that leads. Without the job's
verifying curl each of these would reach the squashed image."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Standin

from clusters import TEST_SQUASH_OPTIONS
from lying_registry import (
    CLIENT,
    LIST_V2,
    NOPYTHON,
    Answer,
    LyingRegistry,
    digest_of,
    index_of,
    lying_registry,
    pinned,
    with_config,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def registry(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


class Enroot:
    """The stand-in alone, with the real curl first on its PATH."""

    def __init__(self, standin: Standin, tmp_path: Path) -> None:
        self.standin = standin
        self.output = tmp_path / "out.sqsh"
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "ENROOT_CACHE_PATH": str(tmp_path / "cache"),
            "ENROOT_DATA_PATH": str(tmp_path / "data"),
            "ENROOT_RUNTIME_PATH": str(tmp_path / "runtime"),
            "ENROOT_TEMP_PATH": str(tmp_path),
            "ENROOT_MAX_PROCESSORS": "2",
            "ENROOT_ALLOW_HTTP": "yes",
            "ENROOT_SQUASH_OPTIONS": TEST_SQUASH_OPTIONS,
        }

    def import_(self, registry: LyingRegistry, digest: str) -> subprocess.CompletedProcess[str]:
        uri = f"docker://{registry.address}#{NOPYTHON}@{digest}"
        return subprocess.run(
            [str(self.standin.bin / "enroot"), "import", "-o", str(self.output), uri],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def imported(self) -> dict[str, Any]:
        return self.standin.event("manifest")


@pytest.fixture
def enroot(standin: Standin, tmp_path: Path) -> Enroot:
    return Enroot(standin, tmp_path)


def config_of(manifest: bytes) -> str:
    value: str = json.loads(manifest)["config"]["digest"]
    return value


def test_the_stand_in_imports_whatever_manifest_the_registry_sends_for_a_digest(
    enroot: Enroot, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")
    other = registry.manifest(CLIENT, pinned(registry_images, "client"))
    registry.answer(Answer(f"/v2/{NOPYTHON}/manifests/{pin}", other))

    result = enroot.import_(registry, pin)

    assert result.returncode == 0, result.stderr
    assert enroot.imported()["config"] == config_of(other)  # the client image, as the pin


def test_the_stand_in_follows_an_index_sent_with_a_404(
    enroot: Enroot, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")
    other = registry.manifest(CLIENT, pinned(registry_images, "client"))
    registry.add_manifest(NOPYTHON, other)  # genuine, and served by its digest
    index = index_of([("amd64", other)])
    registry.answer(Answer(f"/v2/{NOPYTHON}/manifests/{pin}", index, 404, accept=LIST_V2))

    result = enroot.import_(registry, pin)

    assert result.returncode == 0, result.stderr
    assert enroot.imported()["url"].endswith(f"/manifests/{digest_of(other)}")
    assert enroot.imported()["config"] == config_of(other)


def test_the_stand_in_checks_every_blob_against_the_manifest(
    enroot: Enroot, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")
    manifest = registry.manifest(NOPYTHON, pin)
    registry.answer(Answer(f"/v2/{NOPYTHON}/blobs/{config_of(manifest)}", b"{}"))

    result = enroot.import_(registry, pin)

    assert result.returncode == 1
    assert f"Checksum mismatch: {config_of(manifest).split(':')[1]}" in result.stderr
    assert not enroot.output.exists()


def test_the_stand_in_creates_the_working_dir_wherever_it_leads(
    enroot: Enroot, registry: LyingRegistry, registry_images: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "outside" / "made-by-the-image"
    pin = pinned(registry_images, "nopython")
    config = registry.config(NOPYTHON, pin)
    config["config"]["WorkingDir"] = "/" + "../" * 40 + str(target).lstrip("/")
    blob = json.dumps(config).encode()
    registry.add_blob(NOPYTHON, blob)
    digest = registry.add_manifest(NOPYTHON, with_config(registry.manifest(NOPYTHON, pin), blob))

    result = enroot.import_(registry, digest)

    assert result.returncode == 0, result.stderr
    assert target.is_dir()  # on the host, outside Enroot's root


def test_the_stand_in_creates_a_plain_working_dir_inside_the_root(
    enroot: Enroot, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")
    config = registry.config(NOPYTHON, pin)
    config["config"]["WorkingDir"] = "/srv/work"
    blob = json.dumps(config).encode()
    registry.add_blob(NOPYTHON, blob)
    digest = registry.add_manifest(NOPYTHON, with_config(registry.manifest(NOPYTHON, pin), blob))

    result = enroot.import_(registry, digest)

    assert result.returncode == 0, result.stderr
    listing = subprocess.run(
        ["unsquashfs", "-l", str(enroot.output)], capture_output=True, text=True, check=True
    )
    assert "squashfs-root/srv/work\n" in listing.stdout

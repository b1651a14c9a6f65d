"""The stand-in caches as Enroot does (docker.sh: docker::_download, _download_extract): a blob
named by its digest in ENROOT_CACHE_PATH is used as it is, without a download and without a
check; a download is hashed as it streams, stored zstd-compressed under a temporary name, and
moved into place only when it matches. Why the job holds the cache to ownership rules."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Standin

from lying_registry import NOPYTHON, Answer, LyingRegistry, blob_gets, lying_registry, pinned

pytestmark = pytest.mark.e2e


@pytest.fixture
def registry(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


def run_import(
    standin: Standin, tmp_path: Path, registry: LyingRegistry, digest: str, output: str
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ENROOT_CACHE_PATH": str(tmp_path / "cache"),
        "ENROOT_DATA_PATH": str(tmp_path / "data"),
        "ENROOT_RUNTIME_PATH": str(tmp_path / "runtime"),
        "ENROOT_TEMP_PATH": str(tmp_path),
        "ENROOT_MAX_PROCESSORS": "2",
        "ENROOT_ALLOW_HTTP": "yes",
    }
    uri = f"docker://{registry.address}#{NOPYTHON}@{digest}"
    return subprocess.run(
        [str(standin.bin / "enroot"), "import", "-o", str(tmp_path / output), uri],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def unzstd(path: Path) -> bytes:
    return subprocess.run(
        ["zstd", "-q", "-d", "-c", str(path)], capture_output=True, check=True
    ).stdout


def test_a_second_import_downloads_nothing_and_the_cache_holds_zstd_blobs(
    standin: Standin, tmp_path: Path, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")
    manifest = json.loads(registry.manifest(NOPYTHON, pin))
    config = manifest["config"]["digest"]
    blobs = [config] + [layer["digest"] for layer in manifest["layers"]]

    first = run_import(standin, tmp_path, registry, pin, "one.sqsh")
    assert first.returncode == 0, first.stderr
    assert sorted(blob_gets(registry)) == sorted(blobs)
    registry.requests.clear()
    second = run_import(standin, tmp_path, registry, pin, "two.sqsh")

    assert second.returncode == 0, second.stderr
    assert blob_gets(registry) == []
    assert "Found all layers in cache" in second.stderr
    cache = tmp_path / "cache"
    cached = sorted(path.name for path in cache.iterdir() if not path.name.startswith("."))
    assert cached == sorted(digest.removeprefix("sha256:") for digest in blobs)
    config_file = cache / config.removeprefix("sha256:")
    assert oct(config_file.stat().st_mode & 0o777) == "0o640"
    status, _, body = registry.fetch(f"/v2/{NOPYTHON}/blobs/{config}")
    assert status == 200 and unzstd(config_file) == body  # a config decompresses to its bytes


def test_a_blob_present_under_its_digest_is_used_unchecked(
    standin: Standin, tmp_path: Path, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")
    layer = json.loads(registry.manifest(NOPYTHON, pin))["layers"][-1]["digest"]
    first = run_import(standin, tmp_path, registry, pin, "one.sqsh")
    assert first.returncode == 0, first.stderr
    planted = tmp_path / "planted"
    (planted / "etc").mkdir(parents=True)
    (planted / "etc" / "planted").write_text("not the registry's\n")
    cached = tmp_path / "cache" / layer.removeprefix("sha256:")
    subprocess.run(
        ["tar", "--use-compress-program=zstd", "-cf", str(cached), "-C", str(planted), "etc"],
        check=True,
    )
    registry.requests.clear()

    second = run_import(standin, tmp_path, registry, pin, "two.sqsh")

    assert second.returncode == 0, second.stderr
    assert layer not in blob_gets(registry)
    listing = subprocess.run(
        ["unsquashfs", "-l", str(tmp_path / "two.sqsh")], capture_output=True, text=True
    ).stdout
    assert "etc/planted" in listing


def test_a_download_that_is_not_its_digest_leaves_nothing_in_the_cache(
    standin: Standin, tmp_path: Path, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")
    layer = json.loads(registry.manifest(NOPYTHON, pin))["layers"][-1]["digest"]
    registry.answer(Answer(f"/v2/{NOPYTHON}/blobs/{layer}", b"not the layer", 200, "x/y"))

    result = run_import(standin, tmp_path, registry, pin, "one.sqsh")

    assert result.returncode == 1
    assert f"Checksum mismatch: {layer.removeprefix('sha256:')}" in result.stderr
    names = [path.name for path in (tmp_path / "cache").iterdir()]
    assert not [name for name in names if name.startswith(layer.removeprefix("sha256:"))]

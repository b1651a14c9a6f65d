"""The stand-in unpacks layers as Enroot's docker::_prepare does: each layer once, into a
directory of its own, nothing under dev/, then the layers merged bottom up with their whiteouts
(.wh.NAME) and opaque markers (.wh..wh..opq) hiding what is below them, as the overlay of
enroot-mksquashovlfs shows them to mksquashfs."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Standin

from lying_registry import V2S2, LyingRegistry, lying_registry

pytestmark = pytest.mark.e2e

REPOSITORY = "slurm-image-test/layers"
LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def layer(*members: tuple[str, str | None]) -> bytes:
    """A gzipped layer: (name, text) files, (name/, None) directories, ("dev/null", None) a
    character device."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for name, text in members:
            member = tarfile.TarInfo(name.rstrip("/"))
            if text is not None:
                data = text.encode()
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
                continue
            if name.endswith("/"):
                member.type, member.mode = tarfile.DIRTYPE, 0o755
            else:
                member.type, member.devmajor, member.devminor = tarfile.CHRTYPE, 1, 3
            archive.addfile(member)
    return gzip.compress(raw.getvalue(), mtime=0)


BOTTOM = layer(
    ("a/", None),
    ("a/x", "x"),
    ("a/y", "y"),
    ("keep/", None),
    ("keep/file", "k"),
    ("gone", "g"),
    ("replaced/", None),
    ("replaced/inside", "i"),
    ("dev/", None),
    ("dev/null", None),
    (".wh.nothing", ""),
)
TOP = layer(
    (".wh.gone", ""),
    ("a/", None),
    ("a/.wh..wh..opq", ""),
    ("a/z", "z"),
    ("keep/", None),
    ("keep/new", "n"),
    ("replaced", "now a file"),
    ("fresh/", None),
    ("fresh/f", "f"),
    ("fresh/.wh.ghost", ""),
    ("keep/.wh..", ""),  # whiteouts of "." and "..": nothing to hide
    (".wh...", ""),
)


@pytest.fixture
def registry(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


def serve_image(registry: LyingRegistry) -> str:
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {}}).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": V2S2,
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": len(config),
            "digest": registry.add_blob(REPOSITORY, config),
        },
        "layers": [
            {"mediaType": LAYER, "size": len(data), "digest": registry.add_blob(REPOSITORY, data)}
            for data in (BOTTOM, TOP)
        ],
    }
    return registry.add_manifest(REPOSITORY, json.dumps(manifest).encode())


def test_layers_merge_with_their_whiteouts_and_nothing_under_dev(
    standin: Standin, tmp_path: Path, registry: LyingRegistry
) -> None:
    digest = serve_image(registry)
    output = tmp_path / "layers.sqsh"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        **{f"ENROOT_{key}_PATH": str(tmp_path / key.lower()) for key in ("CACHE", "DATA")},
        "ENROOT_RUNTIME_PATH": str(tmp_path / "runtime"),
        "ENROOT_TEMP_PATH": str(tmp_path),
        "ENROOT_MAX_PROCESSORS": "2",
        "ENROOT_ALLOW_HTTP": "yes",
    }
    uri = f"docker://{registry.address}#{REPOSITORY}@{digest}"
    ran = subprocess.run(
        [str(standin.bin / "enroot"), "import", "-a", "x86_64", "-o", str(output), uri],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.index("Extracting image layers") < ran.stderr.index("Converting whiteouts")
    unpacked = tmp_path / "unpacked"
    subprocess.run(["unsquashfs", "-q", "-d", str(unpacked), str(output)], check=True)
    files = sorted(
        str(path.relative_to(unpacked)) for path in unpacked.rglob("*") if not path.is_dir()
    )
    assert files == ["a/z", "etc/environment", "fresh/f", "keep/file", "keep/new", "replaced"]
    assert list((unpacked / "dev").iterdir()) == []
    assert (unpacked / "replaced").read_text() == "now a file"
    assert not list(tmp_path.glob("enroot.*")), "the import's work directory is left"

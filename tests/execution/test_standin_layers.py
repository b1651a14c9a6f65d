"""The stand-in unpacks layers as Enroot's docker::_prepare does: each layer once, into a
directory of its own, nothing under dev/, then the layers merged bottom up with their whiteouts
(.wh.NAME) and opaque markers (.wh..wh..opq) hiding what is below them, as the overlay of
enroot-mksquashovlfs shows them to mksquashfs."""

from __future__ import annotations

import gzip
import io
import json
import stat
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


def serve_image(
    registry: LyingRegistry,
    layers: tuple[bytes, ...] = (BOTTOM, TOP),
    settings: dict[str, object] | None = None,
) -> str:
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": settings or {}})
    manifest = {
        "schemaVersion": 2,
        "mediaType": V2S2,
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": len(config.encode()),
            "digest": registry.add_blob(REPOSITORY, config.encode()),
        },
        "layers": [
            {"mediaType": LAYER, "size": len(data), "digest": registry.add_blob(REPOSITORY, data)}
            for data in layers
        ],
    }
    return registry.add_manifest(REPOSITORY, json.dumps(manifest).encode())


def standin_import(standin: Standin, tmp_path: Path, registry: LyingRegistry, digest: str,
                   umask: int = 0o022) -> Path:  # fmt: skip
    """`enroot import` of the stand-in, of the image DIGEST the lying registry serves."""
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
        umask=umask,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.index("Extracting image layers") < ran.stderr.index("Converting whiteouts")
    assert not list(tmp_path.glob("enroot.*")), "the import's work directory is left"
    unpacked = tmp_path / "unpacked"
    subprocess.run(["unsquashfs", "-q", "-d", str(unpacked), str(output)], check=True)
    return unpacked


def test_layers_merge_with_their_whiteouts_and_nothing_under_dev(
    standin: Standin, tmp_path: Path, registry: LyingRegistry
) -> None:
    unpacked = standin_import(standin, tmp_path, registry, serve_image(registry))
    files = sorted(
        str(path.relative_to(unpacked)) for path in unpacked.rglob("*") if not path.is_dir()
    )
    assert files == [
        "a/z", "etc/environment", "etc/fstab", "etc/rc", "etc/rc.local", "fresh/f", "keep/file",
        "keep/new", "replaced",
    ]  # fmt: skip
    assert list((unpacked / "dev").iterdir()) == []
    assert (unpacked / "replaced").read_text() == "now a file"


def test_a_directory_in_two_layers_has_the_upper_ones_mode(
    standin: Standin, tmp_path: Path, registry: LyingRegistry
) -> None:
    lower = directory_layer(("shared", 0o755), ("shared/file", None))
    upper = directory_layer(("shared", 0o750))
    unpacked = standin_import(standin, tmp_path, registry, serve_image(registry, (lower, upper)))
    assert stat.S_IMODE((unpacked / "shared").stat().st_mode) == 0o750
    assert (unpacked / "shared" / "file").exists()


def test_import_writes_enroots_configuration_files(
    standin: Standin, tmp_path: Path, registry: LyingRegistry
) -> None:
    settings: dict[str, object] = {
        "Env": ["PATH=/bin", "A=b"],
        "WorkingDir": "/srv/app",
        "Entrypoint": ["/entry"],
        "Cmd": ["it's"],
        "Labels": {"name": "two\nlines"},
        "Volumes": {"/data": {}},
    }
    outside = tmp_path / "outside"
    lower = layer(("etc/", None), ("etc/environment", "FROM_IMAGE=1\n"), ("srv/", None))
    linked = directory_layer(("etc", 0o755))
    linked_rc = link_layer("etc/rc.local", str(outside))
    digest = serve_image(registry, (lower, linked, linked_rc), settings)
    unpacked = standin_import(standin, tmp_path, registry, digest, umask=0o077)
    assert (unpacked / "etc/environment").read_text() == "PATH=/bin\nA=b\n"
    assert (unpacked / "etc/fstab").read_text() == (
        "${ENROOT_ROOTFS}/data /data none x-create=dir,bind,rw,nosuid,nodev\n"
    )
    rc = (unpacked / "etc/rc").read_text()
    assert rc.startswith(
        f"# enroot-provenance: docker://{registry.address}#{REPOSITORY}:{digest}\n"
        "# name two lines\n\n"
        'mkdir -p "/srv/app" 2> /dev/null\ncd "/srv/app" && unset OLDPWD || exit 1\n'
    )
    assert "    exec '/entry' 'it'\\''s'\n" in rc
    assert (unpacked / "etc/rc.local").read_text().startswith("# This file is sourced")
    # the files are new ones of the directory on top: an image's symlink is hidden, not followed
    assert not outside.exists()
    assert stat.S_IMODE((unpacked / "etc/environment").stat().st_mode) == 0o600
    # the directory Enroot stacks on top holds etc/ and the WorkingDir's, made under the umask
    for path in ("", "etc", "srv", "srv/app"):
        assert stat.S_IMODE((unpacked / path).stat().st_mode) == 0o700, path


def link_layer(name: str, target: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        member = tarfile.TarInfo(name)
        member.type, member.linkname = tarfile.SYMTYPE, target
        archive.addfile(member)
    return gzip.compress(raw.getvalue(), mtime=0)


def directory_layer(*members: tuple[str, int | None]) -> bytes:
    """A gzipped layer of (name, mode) directories and (name, None) empty files."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for name, mode in members:
            member = tarfile.TarInfo(name)
            if mode is not None:
                member.type, member.mode = tarfile.DIRTYPE, mode
            archive.addfile(member)
    return gzip.compress(raw.getvalue(), mtime=0)

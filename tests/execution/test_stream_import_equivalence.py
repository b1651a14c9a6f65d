"""The streaming import makes the image Enroot's import makes, for the same layers.

Each image is served by a registry of the test's own (lying_registry, serving only its own blobs)
and imported twice: by the Enroot stand-in's `enroot import` (layers unpacked to directories,
merged, configured, then `mksquashfs -all-root`) and by merge_layers.py piped into `tar2sqfs`,
both under the job's umask 077. The two squashfs files must list the same paths with the same
type, mode, owner, size (a device's numbers), link target (`unsquashfs -lln`), the same contents
for every regular file and the same hard-link groups. Times are not compared (Enroot's
conversions are written at import time) nor a directory's size (each writer's own index).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Standin

from layer_streams import (
    Member,
    directory,
    hardlink,
    listing,
    opaque,
    regular,
    squash_stream,
    symlink,
    unpack,
    whiteout,
    write_config,
    write_large_layer,
    write_layer,
)
from lying_registry import V2S2, LyingRegistry, lying_registry

pytestmark = pytest.mark.e2e

REPOSITORY = "slurm-image-test/stream"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_TYPES = {
    "gzip": "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
    "plain": "application/vnd.oci.image.layer.v1.tar",
}
UMASK = 0o077


def device(name: str, major: int, minor: int) -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor, info.mode = tarfile.CHRTYPE, major, minor, 0o666
    return Member(info)


WHITEOUTS = [
    [directory("a"), regular("a/x", "x"), regular("a/y", "y"), directory("keep"),
     regular("keep/file", "k"), regular("gone", "g"), directory("replaced"),
     regular("replaced/inside", "i"), directory("dev"), device("dev/null", 1, 3),
     device("lib/char", 1, 5), regular(".wh.nothing")],
    [whiteout("gone"), directory("a"), opaque("a"), regular("a/z", "z"), directory("keep"),
     regular("keep/new", "n"), regular("replaced", "now a file"), directory("fresh"),
     regular("fresh/f", "f"), whiteout("fresh/ghost"), regular("keep/.wh.."),
     regular(".wh..."), whiteout("a/y")],
]  # fmt: skip
OPAQUE_DIRECTORIES = [
    [directory("o", 0o755), directory("o/in"), regular("o/in/deep", "d"), regular("o/f", "1"),
     directory("p", 0o700), regular("p/kept", "k")],
    [directory("o", 0o711), directory("o/in", 0o750), opaque("o/in"), regular("o/in/new", "n"),
     directory("p", 0o755)],
    [directory("o", 0o705), opaque("o"), regular("o/top", "t")],
]  # fmt: skip
HARD_LINKS = [
    [directory("bin"), regular("bin/tool", "tool", 0o755), hardlink("bin/alias", "bin/tool"),
     hardlink("other", "bin/tool"), regular("data", "lower data", 0o640),
     hardlink("copy", "data"), hardlink("copy2", "data")],
    [regular("data", "upper data"), regular("bin/new", "n")],
]  # fmt: skip
SYMLINKS = [
    [directory("usr"), directory("usr/lib"), regular("usr/lib/libc.so", "c"),
     directory("lib"), regular("lib/old", "o"), symlink("abs", "/usr/lib/libc.so"),
     symlink("rel", "usr/lib"), symlink("dangling", "nowhere"), symlink("turns-dir", "usr")],
    [symlink("lib", "usr/lib"), directory("turns-dir"), regular("turns-dir/f", "f"),
     symlink("usr/lib/link", "../../abs")],
]  # fmt: skip
DEEP = "/".join(f"d{level}" for level in range(1, 18))
MODES = [
    [regular("setuid", "s", 0o4755), regular("setgid", "g", 0o2711), directory("sticky", 0o1777),
     regular("none", "n", 0o000), regular("exec-other", "x", 0o001), directory("closed", 0o000),
     regular("owned", "o", 0o644, uid=4321),
     *[directory("/".join(DEEP.split("/")[:level]), 0o555) for level in range(1, 18)]],
    [regular("setuid2", "s", 0o4711), directory("closed", 0o500)],
]  # fmt: skip
MANY_FILES = [
    [*[directory(f"dir{number}") for number in range(40)],
     *[regular(f"dir{number % 40}/file{number}", f"{number}\n" * (number % 7), 0o644)
       for number in range(4000)]],
    [*[whiteout(f"dir{number % 40}/file{number}") for number in range(0, 4000, 3)]],
]  # fmt: skip
CONFIGURED = [
    [directory("etc"), regular("etc/environment", "FROM_IMAGE=1\n"), regular("etc/fstab", "x\n"),
     directory("srv", 0o750), symlink("etc/rc.local", "/nowhere")],
]  # fmt: skip
SETTINGS = {
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "EMPTY="],
    "WorkingDir": "/srv/app/../app2",
    "Entrypoint": ["/bin/entry", "it's quoted"],
    "Cmd": ["--flag", "two words"],
    "Labels": {"maintainer": "someone", "description": "two\nlines"},
    "Volumes": {"/data": {}, "/cache": {}},
}

IMAGES: dict[str, tuple[list[list[Member]], dict[str, object] | None, str]] = {
    "whiteouts": (WHITEOUTS, None, "gzip"),
    "opaque-directories": (OPAQUE_DIRECTORIES, None, "zstd"),
    "hard-links": (HARD_LINKS, None, "gzip"),
    "symlinks": (SYMLINKS, None, "plain"),
    "modes": (MODES, None, "gzip"),
    "many-small-files": (MANY_FILES, None, "zstd"),
    "configured": (CONFIGURED, SETTINGS, "gzip"),
}


@pytest.fixture
def registry() -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


def serve(registry: LyingRegistry, blobs: list[Path], config: Path, media_type: str) -> str:
    """Serve the image of these blobs (bottom first); returns its manifest's digest."""
    data = config.read_bytes()
    manifest = {
        "schemaVersion": 2,
        "mediaType": V2S2,
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": len(data),
            "digest": registry.add_blob(REPOSITORY, data),
        },
        "layers": [
            {
                "mediaType": media_type,
                "size": blob.stat().st_size,
                "digest": registry.add_blob(REPOSITORY, blob.read_bytes()),
            }
            for blob in blobs
        ],
    }
    return registry.add_manifest(REPOSITORY, json.dumps(manifest).encode())


def standin_import(standin: Standin, work: Path, uri: str) -> Path:
    output = work / "enroot.sqsh"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(work),
        **{f"ENROOT_{key}_PATH": str(work / key.lower()) for key in ("CACHE", "DATA")},
        "ENROOT_RUNTIME_PATH": str(work / "runtime"),
        "ENROOT_TEMP_PATH": str(work),
        "ENROOT_MAX_PROCESSORS": "2",
        "ENROOT_ALLOW_HTTP": "yes",
    }
    ran = subprocess.run(
        [str(standin.bin / "enroot"), "import", "-a", "x86_64", "-o", str(output), uri],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        umask=UMASK,
    )
    assert ran.returncode == 0, ran.stderr
    return output


def stream_import(work: Path, config: Path, blobs: list[Path], uri: str) -> Path:
    output = work / "stream.sqsh"
    old = os.umask(UMASK)
    try:
        result = squash_stream(config, blobs, output, uri)
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr.decode()
    return output


def contents(root: Path) -> tuple[dict[str, str], list[list[str]]]:
    """Every regular file's sha256, and the groups of paths that share an inode."""
    digests: dict[str, str] = {}
    inodes: dict[int, list[str]] = {}
    for directory_path, _, files in os.walk(root):
        for name in files:
            path = Path(directory_path) / name
            if path.is_symlink() or not path.is_file():
                continue
            relative = str(path.relative_to(root))
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            digests[relative] = digest.hexdigest()
            inodes.setdefault(path.stat().st_ino, []).append(relative)
    groups = sorted(sorted(group) for group in inodes.values() if len(group) > 1)
    return digests, groups


def assert_same_image(enroot: Path, stream: Path, work: Path) -> None:
    expected, found = listing(enroot), listing(stream)
    assert sorted(found) == sorted(expected)
    differing = {
        path: (expected[path], found[path]) for path in expected if found[path] != expected[path]
    }
    assert not differing, differing
    assert contents(unpack(stream, work / "stream-root")) == contents(
        unpack(enroot, work / "enroot-root")
    )


def import_both(
    standin: Standin, registry: LyingRegistry, work: Path, blobs: list[Path], config: Path,
    compression: str,
) -> tuple[Path, Path]:  # fmt: skip
    digest = serve(registry, blobs, config, MEDIA_TYPES[compression])
    enroot = standin_import(standin, work, f"docker://{registry.address}#{REPOSITORY}@{digest}")
    provenance = f"docker://{registry.address}#{REPOSITORY}:{digest}"
    return enroot, stream_import(work, config, blobs, provenance)


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_the_stream_import_makes_enroots_image(
    standin: Standin, registry: LyingRegistry, tmp_path: Path, name: str
) -> None:
    layers, settings, compression = IMAGES[name]
    blobs = [
        write_layer(tmp_path / f"layer{number}", members, compression)
        for number, members in enumerate(layers)
    ]
    config = write_config(tmp_path / "config.json", settings)
    enroot, stream = import_both(standin, registry, tmp_path, blobs, config, compression)
    assert_same_image(enroot, stream, tmp_path)


def test_the_stream_import_of_a_huge_file_makes_enroots_image(
    standin: Standin, registry: LyingRegistry, tmp_path: Path
) -> None:
    size = 300 * 1024 * 1024 + 12345
    blobs = [
        write_layer(tmp_path / "layer0", [directory("big"), regular("big/small", "s")]),
        write_large_layer(tmp_path / "layer1", "big/huge", size, "gzip"),
    ]
    config = write_config(tmp_path / "config.json")
    enroot, stream = import_both(standin, registry, tmp_path, blobs, config, "gzip")
    assert listing(stream)["big/huge"][2] == str(size)
    assert_same_image(enroot, stream, tmp_path)


def fetch_image(reference: str, work: Path) -> tuple[Path, list[Path]]:
    """The config and layer blobs (bottom first) of a test image of the local registry, each
    checked against its digest."""
    name, digest = reference.split("/", 1)[1].split("@")
    repository = name.split(":")[0]

    def get(path: str, accept: str = "*/*") -> bytes:
        request = urllib.request.Request(f"http://127.0.0.1:5000/v2/{repository}/{path}")
        request.add_header("Accept", accept)
        with urllib.request.urlopen(request, timeout=60) as answer:
            return bytes(answer.read())

    def blob(digest: str, target: Path) -> Path:
        data = get(f"blobs/{digest}")
        assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
        target.write_bytes(data)
        return target

    manifest_bytes = get(f"manifests/{digest}", f"{V2S2}, {OCI_MANIFEST}")
    assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == digest
    manifest = json.loads(manifest_bytes)
    config = blob(manifest["config"]["digest"], work / "config.json")
    layers = [
        blob(layer["digest"], work / f"layer{number}")
        for number, layer in enumerate(manifest["layers"])
    ]
    return config, layers


@pytest.mark.parametrize("name", ["client", "nopython"])
def test_the_stream_import_of_a_registry_test_image_makes_enroots_image(
    standin: Standin, registry_images: dict[str, str], tmp_path: Path, name: str
) -> None:
    reference = registry_images[name]
    host, rest = reference.split("/", 1)
    image, digest = rest.split("@")
    image = image.split(":")[0]
    config, blobs = fetch_image(reference, tmp_path)
    enroot = standin_import(standin, tmp_path, f"docker://{host}#{image}@{digest}")
    stream = stream_import(tmp_path, config, blobs, f"docker://{host}#{image}:{digest}")
    assert_same_image(enroot, stream, tmp_path)

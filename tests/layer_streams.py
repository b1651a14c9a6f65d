"""Hand-built OCI layers, the streaming merger run as the job runs it, and squashfs listings.

A layer is a list of tarfile members built by the helpers here; `write_layer` stores it plain,
gzip- or zstd-compressed. `squash_stream` runs merge_layers.py under `python3 -I -B` into
`tar2sqfs`, `listing` reads a squashfs file back with `unsquashfs -lln` (mode, numeric owner,
size and link target per path, the times left out) and `unpack` extracts it to read contents.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slurm_image.streamer import merge_layers

MERGER = Path(merge_layers.__file__)
PYTHON = "/usr/bin/python3"


@dataclass(frozen=True)
class Member:
    info: tarfile.TarInfo
    data: bytes = b""


def directory(name: str, mode: int = 0o755, uid: int = 1000) -> Member:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.uid = info.gid = uid
    return Member(info)


def regular(name: str, data: bytes | str = b"", mode: int = 0o644, uid: int = 1000) -> Member:
    content = data.encode() if isinstance(data, str) else data
    info = tarfile.TarInfo(name)
    info.size = len(content)
    info.mode = mode
    info.uid = info.gid = uid
    return Member(info, content)


def symlink(name: str, target: str) -> Member:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    info.mode = 0o777
    return Member(info)


def hardlink(name: str, target: str) -> Member:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE
    info.linkname = target
    info.mode = 0o644
    return Member(info)


def whiteout(name: str) -> Member:
    parent, _, base = name.rpartition("/")
    return regular(f"{parent}/.wh.{base}" if parent else f".wh.{base}")


def opaque(name: str) -> Member:
    return regular(f"{name}/.wh..wh..opq")


def write_layer(path: Path, members: Sequence[Member], compression: str = "gzip") -> Path:
    """The members as one tar layer at PATH: plain, gzip or zstd."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member in members:
            archive.addfile(member.info, io.BytesIO(member.data) if member.data else None)
    if compression == "gzip":
        path.write_bytes(gzip.compress(raw.getvalue()))
    elif compression == "zstd":
        subprocess.run(["zstd", "-q", "-f", "-o", str(path)], input=raw.getvalue(), check=True)
    else:
        path.write_bytes(raw.getvalue())
    return path


def write_large_layer(path: Path, name: str, size: int, compression: str = "plain") -> Path:
    """A layer (plain or gzip) holding one file of SIZE bytes, a repeated pattern (zeros when
    plain), written a block at a time."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    block = bytes(1024 * 1024) if compression == "plain" else bytes(range(256)) * 4096
    opener = gzip.open if compression == "gzip" else open
    with opener(path, "wb") as handle:
        handle.write(info.tobuf(tarfile.PAX_FORMAT))
        for start in range(0, size, len(block)):
            handle.write(block[: min(len(block), size - start)])
        handle.write(bytes(-size % 512 + 1024))
    return path


def merger_peak_memory(config: Path, layers: Sequence[Path]) -> int:
    """The merger's peak resident memory in KiB, its stream thrown away (a child of a child,
    so that nothing else this process ran counts)."""
    command = [PYTHON, "-I", "-B", str(MERGER), str(config), "docker://r#i:t", *map(str, layers)]
    measure = (
        "import resource, subprocess, sys\n"
        "status = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "assert status == 0, status\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    result = subprocess.run(
        [PYTHON, "-I", "-c", measure, *command], capture_output=True, text=True, check=True
    )
    return int(result.stdout)


def write_config(path: Path, settings: dict[str, object] | None = None) -> Path:
    path.write_text(json.dumps({"architecture": "amd64", "config": settings or {}}))
    return path


def squash_stream(
    config: Path, layers: Sequence[Path], output: Path, uri: str = "docker://registry#image:tag"
) -> subprocess.CompletedProcess[bytes]:
    """merge_layers.py piped into tar2sqfs (lzo); the merger's status and stderr returned."""
    merger = subprocess.Popen(
        [PYTHON, "-I", "-B", str(MERGER), str(config), uri, *map(str, layers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert merger.stdout is not None
    squash = subprocess.run(
        ["tar2sqfs", "-q", "-f", "-c", "lzo", str(output)], stdin=merger.stdout, check=False
    )
    merger.stdout.close()
    errors = merger.stderr.read() if merger.stderr else b""
    status = merger.wait()
    if status == 0:
        assert squash.returncode == 0, "tar2sqfs refused the merged stream"
    return subprocess.CompletedProcess(merger.args, status, b"", errors)


def listing(image: Path) -> dict[str, tuple[str, str, str, str]]:
    """`unsquashfs -lln`: per path (relative, '' the root) its mode, uid/gid, size (a device's
    numbers; none for a directory) and link target."""
    lines = subprocess.run(
        ["unsquashfs", "-lln", "-d", "", str(image)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    entries: dict[str, tuple[str, str, str, str]] = {}
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) < 5 or fields[0][0] not in "-dlbcps":
            continue
        mode, owner = fields[0], fields[1]
        if mode.startswith(("c", "b")):
            fields = line.split(None, 6)
            size, rest = fields[2] + " " + fields[3], fields[6] if len(fields) > 6 else ""
        else:
            size, rest = fields[2], fields[5] if len(fields) > 5 else ""
        path, _, link = rest.partition(" -> ")
        if mode.startswith("d"):
            size = ""  # the writer's directory index, not content
        entries[path.lstrip("/")] = (mode, owner, size, link)
    return entries


def unpack(image: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    subprocess.run(["unsquashfs", "-q", "-n", "-d", str(target), str(image)], check=True)
    return target

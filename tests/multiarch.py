"""What the two-architecture tests share: whether this machine runs binaries of a machine
(natively, or through a binfmt_misc handler with flag F, as qemu-user-static registers it), the
ELF machine of a file, and the references of the `multi` index scripts/test-images pushes.

A test that needs an architecture calls ``require_machine("aarch64")``: without it the test
skips locally and fails when ``CI=true`` (``support.unavailable``).
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from support import unavailable

BINFMT_MISC = Path("/proc/sys/fs/binfmt_misc")
TEST_IMAGES = Path(
    os.environ.get(
        "SLURM_IMAGE_TEST_IMAGES",
        Path.home() / ".cache" / "slurm-image" / "test-images" / "images.json",
    )
)
# uname name -> ELF e_machine; all three are 64-bit little-endian on Linux
ELF_MACHINES = {"x86_64": 62, "aarch64": 183, "ppc64le": 21}
MULTI = "multi"
MULTI_MACHINES = ("x86_64", "aarch64")


def elf_header(machine: str) -> bytes:
    """The first 20 bytes of an executable of ``machine``: what a binfmt_misc magic matches."""
    return (
        b"\x7fELF\x02\x01\x01"
        + bytes(9)
        + (2).to_bytes(2, "little")
        + ELF_MACHINES[machine].to_bytes(2, "little")
    )


def elf_machine(path: Path) -> str:
    """The uname name of the ELF file's e_machine (bytes 18-19 in the file's byte order)."""
    with path.open("rb") as handle:
        header = handle.read(20)
    if len(header) < 20 or header[:4] != b"\x7fELF":
        raise ValueError(f"{path} is not an ELF file")
    number = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
    for name, value in ELF_MACHINES.items():
        if value == number:
            return name
    return f"e_machine {number}"


def _matches(entry: dict[str, str], header: bytes) -> bool:
    if entry.get("offset", "0") != "0" or "magic" not in entry:
        return False
    magic = bytes.fromhex(entry["magic"])
    mask = bytes.fromhex(entry.get("mask", "ff" * len(magic)))
    if len(magic) > len(header) or len(mask) != len(magic):
        return False
    return all(h & m == g & m for h, m, g in zip(header, mask, magic, strict=False))


def _handler(text: str) -> dict[str, str]:
    entry = {"enabled": str(text.splitlines()[:1] == ["enabled"])}
    for line in text.splitlines()[1:]:
        key, _, value = line.partition(" ")
        entry[key.rstrip(":")] = value.strip()
    return entry


def why_not_runnable(machine: str, binfmt_misc: Path = BINFMT_MISC) -> str | None:
    """None when this machine runs ``machine``'s binaries, also inside a chroot or an image's
    root (natively, or by an enabled binfmt_misc handler for its ELF header with flag F, which
    keeps the interpreter open); else why not, and what would fix it."""
    if platform.machine() == machine:
        return None
    status = binfmt_misc / "status"
    if not status.is_file():
        return (
            f"cannot run {machine} binaries: binfmt_misc is not mounted at {binfmt_misc} "
            f"(mount -t binfmt_misc binfmt_misc {binfmt_misc})"
        )
    if status.read_text().strip() != "enabled":
        return f"cannot run {machine} binaries: binfmt_misc is disabled ({status})"
    header = elf_header(machine)
    found = []
    for path in sorted(binfmt_misc.iterdir()):
        if path.name in ("status", "register"):
            continue
        try:
            entry = _handler(path.read_text())
        except (OSError, ValueError):
            continue
        if _matches(entry, header):
            if entry["enabled"] == "True" and "F" in entry.get("flags", ""):
                return None
            found.append(f"{path.name} (enabled={entry['enabled']}, flags {entry.get('flags')})")
    if found:
        return (
            f"cannot run {machine} binaries in a chroot: the binfmt_misc handler "
            f"{', '.join(found)} must be enabled with flag F (update-binfmts --enable)"
        )
    return (
        f"cannot run {machine} binaries: no binfmt_misc handler for them "
        "(apt-get install qemu-user-static binfmt-support)"
    )


def can_run(machine: str) -> bool:
    return why_not_runnable(machine) is None


def require_machine(machine: str) -> None:
    """Skip locally, fail with ``CI=true``, unless this machine runs ``machine``'s binaries."""
    reason = why_not_runnable(machine)
    if reason is not None:
        unavailable(reason)


@dataclass(frozen=True)
class MultiImage:
    """scripts/test-images' two-architecture index: ``index`` is REG/REPO:TAG@DIGEST of the
    Docker manifest list, ``manifests`` maps each uname name to REG/REPO@DIGEST of its
    per-architecture v2s2 manifest."""

    index: str
    manifests: Mapping[str, str]

    @property
    def index_digest(self) -> str:
        return self.index.rsplit("@", 1)[1]

    def digest(self, machine: str) -> str:
        return self.manifests[machine].rsplit("@", 1)[1]

    @property
    def repository(self) -> str:
        """REG/REPO, without tag or digest."""
        return self.manifests[MULTI_MACHINES[0]].rsplit("@", 1)[0]


def multi_image(images: Mapping[str, str] | None = None) -> MultiImage:
    """The ``multi`` references of images.json (read from $SLURM_IMAGE_TEST_IMAGES unless
    ``images`` is given); skip locally, fail with ``CI=true``, when they are not recorded."""
    if images is None:
        if not TEST_IMAGES.is_file():
            unavailable(f"no test images recorded at {TEST_IMAGES} (scripts/test-images)")
        images = json.loads(TEST_IMAGES.read_text())
    keys = [MULTI, *(f"{MULTI}@{machine}" for machine in MULTI_MACHINES)]
    missing = [key for key in keys if key not in images]
    if missing:
        unavailable(
            f"no {', '.join(missing)} in {TEST_IMAGES} (scripts/debian-roots bookworm:arm64, "
            "then scripts/test-images)"
        )
    return MultiImage(
        index=images[MULTI],
        manifests={machine: images[f"{MULTI}@{machine}"] for machine in MULTI_MACHINES},
    )

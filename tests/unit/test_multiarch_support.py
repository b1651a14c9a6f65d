"""The tests' own judge of "this machine runs aarch64 binaries" reads binfmt_misc as the kernel
does: a handler whose magic matches the ELF header, enabled, with flag F."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from multiarch import elf_header, elf_machine, multi_image, why_not_runnable

QEMU_AARCH64 = """enabled
interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P
flags: {flags}
offset 0
magic 7f454c460201010000000000000000000200b700
mask ffffffffffffff00fffffffffffffffffeffffff
"""


@pytest.fixture
def binfmt(tmp_path: Path) -> Path:
    (tmp_path / "status").write_text("enabled\n")
    (tmp_path / "register").write_text("")
    return tmp_path


@pytest.fixture(autouse=True)
def not_on_arm() -> None:
    if platform.machine() == "aarch64":
        pytest.skip("aarch64 runs natively here")


def test_a_handler_with_flag_f_runs_aarch64(binfmt: Path) -> None:
    (binfmt / "qemu-aarch64").write_text(QEMU_AARCH64.format(flags="PF"))

    assert why_not_runnable("aarch64", binfmt) is None


def test_a_handler_without_flag_f_does_not(binfmt: Path) -> None:
    (binfmt / "qemu-aarch64").write_text(QEMU_AARCH64.format(flags="P"))

    reason = why_not_runnable("aarch64", binfmt)

    assert reason is not None and "flag F" in reason and "qemu-aarch64" in reason


def test_a_disabled_handler_does_not(binfmt: Path) -> None:
    text = QEMU_AARCH64.format(flags="PF").replace("enabled", "disabled", 1)
    (binfmt / "qemu-aarch64").write_text(text)

    assert why_not_runnable("aarch64", binfmt) is not None


def test_a_handler_of_another_machine_does_not(binfmt: Path) -> None:
    text = QEMU_AARCH64.format(flags="PF").replace("0200b700", "02001500")  # ppc64le
    (binfmt / "qemu-ppc64le").write_text(text)

    reason = why_not_runnable("aarch64", binfmt)

    assert reason is not None and "qemu-user-static" in reason


def test_unmounted_binfmt_misc_is_named(tmp_path: Path) -> None:
    reason = why_not_runnable("aarch64", tmp_path)

    assert reason is not None and "mount -t binfmt_misc" in reason


def test_elf_machine_reads_e_machine(tmp_path: Path) -> None:
    binary = tmp_path / "a.out"
    binary.write_bytes(elf_header("aarch64") + bytes(44))

    assert elf_machine(binary) == "aarch64"


def test_multi_image_needs_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    images = {
        "multi": "r/multi:1@sha256:" + "1" * 64,
        "multi@x86_64": "r/multi@sha256:" + "2" * 64,
        "multi@aarch64": "r/multi@sha256:" + "3" * 64,
    }

    found = multi_image(images)

    assert (found.index_digest, found.digest("aarch64")) == (
        "sha256:" + "1" * 64,
        "sha256:" + "3" * 64,
    )
    del images["multi@aarch64"]
    with pytest.raises(pytest.skip.Exception, match="multi@aarch64"):
        multi_image(images)

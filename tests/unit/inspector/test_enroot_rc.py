"""The rc file Enroot runs in the inspection container, under dash and busybox sh in a chroot.

The root holds only a shell, the (stand-in) staged inspector and, when a case wants one, a
recording `python3`: what the rc does is visible in what that stand-in received.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from inspector_env import RC_FILE, SHA, needs_root

OUTPUT = "/.slurm-image/output/inspection.json"
RECORDING_PYTHON = """#!/bin/sh
if [ "$3" = "-c" ]; then exit {version_status}; fi
for arg in "$@"; do printf '%s\\n' "$arg"; done > /.slurm-image/output/args
pwd > /.slurm-image/output/cwd
exit 7
"""


def _copy_with_libraries(binary: Path, root: Path, target: str) -> None:
    dest = root / target.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, dest)
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    for line in ldd.stdout.splitlines():
        path = next((p for p in line.split() if p.startswith("/")), None)
        if path:
            lib = root / path.lstrip("/")
            lib.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, lib)


SHELLS = {"dash": shutil.which("dash"), "busybox": shutil.which("busybox")}


def _make_root(tmp_path: Path, shell: str) -> Path:
    root = tmp_path / "root"
    binary = SHELLS[shell]
    if binary is None:
        pytest.skip(f"{shell} is not installed")
    _copy_with_libraries(Path(binary), root, "/bin/sh")
    if shell == "busybox":
        # busybox sh finds its applets (e.g. `[`) as builtins; nothing else to add
        pass
    staged = root / ".slurm-image"
    (staged / "output").mkdir(parents=True)
    (staged / "inspect_image.py").write_text("# stand-in\n")
    shutil.copy2(RC_FILE, root / "enroot.rc")
    return root


def _add_python(root: Path, directory: str = "/usr/bin", version_status: int = 0) -> None:
    python = root / directory.lstrip("/") / "python3"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(RECORDING_PYTHON.format(version_status=version_status))
    python.chmod(0o755)


def _start(root: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {} if path is None else {"PATH": path}
    # as enroot-switchroot does: SHELL runs the rc file with the command's arguments
    return subprocess.run(
        ["/usr/sbin/chroot", str(root), "/bin/sh", "/enroot.rc", *args],
        env={**env, "SHELL": "/bin/sh"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _received(root: Path) -> list[str]:
    return (root / ".slurm-image" / "output" / "args").read_text().splitlines()


pytestmark = [needs_root, pytest.mark.parametrize("shell", sorted(SHELLS))]


@pytest.mark.parametrize("leading", [["--"], []], ids=["with-dashdash", "without"])
def test_runs_the_inspector_with_python_isolated(
    tmp_path: Path, shell: str, leading: list[str]
) -> None:
    root = _make_root(tmp_path, shell)
    _add_python(root)
    result = _start(root, *leading, "client", SHA, OUTPUT, path="/usr/bin:/bin")
    assert result.returncode == 7, result.stderr
    assert _received(root) == ["-I", "-B", "/.slurm-image/inspect_image.py", "client", SHA, OUTPUT]
    assert (root / ".slurm-image" / "output" / "cwd").read_text() == "/\n"


def test_arguments_keep_their_spaces(tmp_path: Path, shell: str) -> None:
    root = _make_root(tmp_path, shell)
    _add_python(root)
    result = _start(root, "--", "client", "a b", "/x y/z", path="/usr/bin")
    assert result.returncode == 7, result.stderr
    assert _received(root)[-2:] == ["a b", "/x y/z"]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--"],
        ["--", "client", SHA],
        ["--", "client", SHA, OUTPUT, "extra"],
        ["--", "--", "client", SHA, OUTPUT],
    ],
    ids=["none", "only-dashdash", "two", "four", "two-dashdashes"],
)
def test_wrong_argument_count_exits_2_before_python(
    tmp_path: Path, shell: str, args: list[str]
) -> None:
    root = _make_root(tmp_path, shell)
    _add_python(root)
    result = _start(root, *args, path="/usr/bin")
    assert result.returncode == 2
    assert not (root / ".slurm-image" / "output" / "args").exists()


def test_no_python_exits_69(tmp_path: Path, shell: str) -> None:
    root = _make_root(tmp_path, shell)
    result = _start(root, "--", "client", SHA, OUTPUT, path="/usr/bin")
    assert result.returncode == 69
    assert "no python3" in result.stderr


def test_python_older_than_3_8_exits_69(tmp_path: Path, shell: str) -> None:
    root = _make_root(tmp_path, shell)
    _add_python(root, version_status=1)
    result = _start(root, "--", "client", SHA, OUTPUT, path="/usr/bin")
    assert result.returncode == 69
    assert not (root / ".slurm-image" / "output" / "args").exists()


def test_missing_inspector_exits_2(tmp_path: Path, shell: str) -> None:
    root = _make_root(tmp_path, shell)
    _add_python(root)
    os.unlink(root / ".slurm-image" / "inspect_image.py")
    result = _start(root, "--", "client", SHA, OUTPUT, path="/usr/bin")
    assert result.returncode == 2


def test_the_images_path_comes_first(tmp_path: Path, shell: str) -> None:
    root = _make_root(tmp_path, shell)
    _add_python(root, "/usr/bin", version_status=1)
    _add_python(root, "/opt/python/bin")
    result = _start(root, "--", "client", SHA, OUTPUT, path="/opt/python/bin:/usr/bin")
    assert result.returncode == 7, result.stderr


@pytest.mark.parametrize("path", [None, "", "/nonexistent"], ids=["unset", "empty", "useless"])
def test_usual_directories_are_searched_when_the_image_sets_no_useful_path(
    tmp_path: Path, shell: str, path: str | None
) -> None:
    root = _make_root(tmp_path, shell)
    _add_python(root, "/usr/local/bin")
    result = _start(root, "--", "client", SHA, OUTPUT, path=path)
    assert result.returncode == 7, result.stderr

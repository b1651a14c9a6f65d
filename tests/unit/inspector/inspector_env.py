"""Real Python environments for the inspector: venvs, prefix installs, wheels installed by pip."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import slurm_image.inspector.inspect_image as inspect_image

INSPECTOR = Path(inspect_image.__file__)
RC_FILE = INSPECTOR.with_name("enroot.rc")
SHA = "0123456789abcdef" * 4
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Result:
    returncode: int
    stderr: str
    record: dict | None


def run_inspector(
    python: Path | str,
    role: str,
    output: Path,
    *,
    env: dict[str, str] | None = None,
    argv: list[str] | None = None,
) -> Result:
    """Run the inspector file under ``python`` as the rc file does (-I -B)."""
    args = [role, SHA, str(output)] if argv is None else argv
    proc = subprocess.run(
        [str(python), "-I", "-B", str(INSPECTOR), *args],
        env={"PATH": CLEAN_PATH, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    record = json.loads(output.read_text()) if output.exists() else None
    return Result(proc.returncode, proc.stderr, record)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def build_wheel(
    out_dir: Path,
    name: str,
    version: str,
    files: dict[str, str],
    console_scripts: dict[str, str] | None = None,
) -> Path:
    """Write a pure-Python wheel as the wheel spec lays it out (PEP 427 / 491)."""
    stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}"
    info = f"{stem}.dist-info"
    entries = dict(files)
    entries[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    entries[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if console_scripts:
        lines = "".join(f"{k} = {v}\n" for k, v in console_scripts.items())
        entries[f"{info}/entry_points.txt"] = "[console_scripts]\n" + lines
    record = [
        f"{path},{_record_hash(text.encode())},{len(text.encode())}"
        for path, text in entries.items()
    ]
    record.append(f"{info}/RECORD,,")
    entries[f"{info}/RECORD"] = "\n".join(record) + "\n"
    wheel = out_dir / f"{stem}-py3-none-any.whl"
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in entries.items():
            archive.writestr(path, text)
    return wheel


def pip_install(python: Path, wheel: Path, *extra: str) -> None:
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-deps",
            "-q",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            *extra,
            str(wheel),
        ],
        check=True,
        env={"PATH": CLEAN_PATH, "PIP_BREAK_SYSTEM_PACKAGES": "1"},
        timeout=300,
    )


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def pip_version(site: Path) -> str:
    (info,) = site.glob("pip-*.dist-info")
    return info.name[len("pip-") : -len(".dist-info")]


def make_venv(path: Path, *, with_pip: bool = True) -> Path:
    args = [sys.executable, "-m", "venv", str(path)]
    if not with_pip:
        args.append("--without-pip")
    subprocess.run(args, check=True, timeout=300)
    return path / "bin" / "python"


def make_prefix(path: Path, *, with_pip: bool = True) -> Path:
    """A prefix install of the host's interpreter (bin/, lib/pythonX.Y/site-packages, no
    pyvenv.cfg): the layout of conda environments and of a Python built into /usr/local."""
    probe = (
        "import json, os, sys, sysconfig;"
        "print(json.dumps([sysconfig.get_path('stdlib'), os.path.realpath(sys._base_executable),"
        " '%d.%d' % sys.version_info[:2]]))"
    )
    stdlib, executable, xy = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout
    )
    lib = path / "lib" / f"python{xy}"
    lib.mkdir(parents=True)
    for entry in Path(stdlib).iterdir():
        if entry.name != "site-packages":
            (lib / entry.name).symlink_to(entry)
    (lib / "site-packages").mkdir()
    (path / "bin").mkdir()
    python = path / "bin" / f"python{xy}"
    shutil.copy2(executable, python)
    (path / "bin" / "python3").symlink_to(python.name)
    prefix = subprocess.run(
        [str(python), "-I", "-c", "import sys; print(sys.prefix)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert Path(prefix) == path, f"prefix install not recognised: sys.prefix={prefix}"
    if with_pip:
        subprocess.run(
            [str(python), "-I", "-m", "ensurepip", "--default-pip"],
            check=True,
            capture_output=True,
            timeout=300,
            env={"PATH": CLEAN_PATH},
        )
    return path / "bin" / "python3"


TINY_FILES = {"tiny_lib/__init__.py": "VALUE = 1\n"}
VLLM_FILES = {
    "vllm/__init__.py": "__version__ = '0.6.3'\n",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/main.py": "def main():\n    print('vllm')\n",
}


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    return {
        "tiny": build_wheel(out, "Tiny_Lib.Extra", "1.2.3", TINY_FILES),
        "tiny_old": build_wheel(out, "Tiny_Lib.Extra", "1.0.0", TINY_FILES),
        "vllm": build_wheel(
            out, "vllm", "0.6.3", VLLM_FILES, {"vllm": "vllm.entrypoints.cli.main:main"}
        ),
    }


@pytest.fixture(scope="session")
def full_venv(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Path:
    """A venv with pip, a tiny library and a (fake) vllm, all installed by pip."""
    python = make_venv(tmp_path_factory.mktemp("full") / "venv")
    pip_install(python, wheels["tiny"])
    pip_install(python, wheels["vllm"])
    return python


@pytest.fixture(scope="session")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv without pip (nor anything else)."""
    return make_venv(tmp_path_factory.mktemp("bare") / "venv", with_pip=False)


@pytest.fixture
def fresh_venv(tmp_path: Path) -> Callable[[], Path]:
    """A venv of this test's own, with pip, for tests that alter it."""
    return lambda: make_venv(tmp_path / "venv")


@pytest.fixture(scope="session")
def decoy_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with `pip` and `vllm` programs that are not the image's distributions."""
    path = tmp_path_factory.mktemp("decoys")
    for name in ("pip", "pip3", "vllm", "python3"):
        tool = path / name
        tool.write_text("#!/bin/sh\necho decoy >&2\nexit 99\n")
        tool.chmod(0o755)
    return path


def output_dir_is_empty(directory: Path) -> bool:
    return not any(directory.iterdir())


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")

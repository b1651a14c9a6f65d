"""The inspector under every other CPython 3.8+ this machine has (importlib.metadata differs
between 3.8/3.9 and 3.10+). Interpreters found as pythonX.Y on PATH or under pyenv's versions."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from inspector_env import pip_install, run_inspector, site_packages

import slurm_image.inspector.inspect_image as inspect_image

MINORS = range(8, 14)


def _interpreter(minor: int) -> str | None:
    found = shutil.which(f"python3.{minor}")
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = sorted(glob.glob(f"{pyenv}/versions/3.{minor}.*/bin/python3.{minor}"))
    return candidates[-1] if candidates else found


@pytest.fixture(scope="module", params=[f"3.{m}" for m in MINORS])
def other_venv(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    wheels: dict[str, Path],
) -> Path:
    version: str = request.param
    interpreter = _interpreter(int(version.split(".")[1]))
    if interpreter is None:
        pytest.skip(
            f"no Python {version} on this machine (python{version} on PATH or under pyenv); the"
            " Debian roots' Pythons run the inspector in test_inspector_debian_roots.py"
        )
    root = tmp_path_factory.mktemp(f"py{version}")
    venv = subprocess.run(
        [interpreter, "-m", "venv", str(root / "venv")], capture_output=True, timeout=300
    )
    if venv.returncode != 0:
        pytest.skip(f"Python {version} at {interpreter} cannot make a venv with pip")
    python = root / "venv" / "bin" / "python"
    pip_install(python, wheels["tiny"])
    pip_install(python, wheels["vllm"])
    # a distutils-style bare egg-info file, as old Debian packages ship them
    (site_packages(python) / "Legacy_Thing-0.1.egg-info").write_text(
        "Metadata-Version: 1.0\nName: Legacy_Thing\nVersion: 0.1\n"
    )
    return python


def test_client_and_serving_facts(other_venv: Path, tmp_path: Path) -> None:
    client = run_inspector(other_venv, "client", tmp_path / "client.json")
    assert client.returncode == 0, client.stderr
    facts = client.record["facts"]
    assert facts["installer"]["path"] == str(other_venv.parent / "pip")
    assert {"name": "tiny-lib-extra", "version": "1.2.3"} in facts["distributions"]
    assert {"name": "legacy-thing", "version": "0.1"} in facts["distributions"]
    serving = run_inspector(other_venv, "serving", tmp_path / "serving.json")
    assert serving.returncode == 0, serving.stderr
    assert serving.record["facts"]["server"]["path"] == str(other_venv.parent / "vllm")


def test_a_copy_later_on_sys_path_is_shadowed(
    other_venv: Path, tmp_path: Path, wheels: dict[str, Path]
) -> None:
    target = tmp_path / "target"
    pip_install(other_venv, wheels["tiny_old"], "--target", str(target))
    pth = site_packages(other_venv) / "dup-test.pth"
    pth.write_text(f"{target}\n")
    try:
        result = run_inspector(other_venv, "client", tmp_path / "inspection.json")
    finally:
        pth.unlink()
    assert result.returncode == 0, result.stderr
    facts = result.record["facts"]
    assert {"name": "tiny-lib-extra", "version": "1.2.3"} in facts["distributions"]
    assert facts["shadowed"] == [
        {"name": "tiny-lib-extra", "version": "1.0.0", "location": str(target)}
    ]


def test_two_copies_in_one_directory_are_refused(other_venv: Path, tmp_path: Path) -> None:
    site = site_packages(other_venv)
    stale = site / "Tiny_Lib.Extra-0.9.dist-info"
    stale.mkdir()
    (stale / "METADATA").write_text("Metadata-Version: 2.1\nName: Tiny_Lib.Extra\nVersion: 0.9\n")
    try:
        out_dir = tmp_path / "out"
        out_dir.mkdir()
        result = run_inspector(other_venv, "client", out_dir / "inspection.json")
    finally:
        shutil.rmtree(stale)
    assert result.returncode == inspect_image.EXIT_REFUSED
    assert "tiny-lib-extra is installed 2 times in one directory" in result.stderr
    assert str(stale) in result.stderr
    assert not any(out_dir.iterdir())


def test_bad_arguments_refused(other_venv: Path, tmp_path: Path) -> None:
    result = run_inspector(other_venv, "client", tmp_path / "x.json", argv=["client"])
    assert result.returncode == inspect_image.EXIT_USAGE

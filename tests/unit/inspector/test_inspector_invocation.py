"""The inspector's command line and its atomic write."""

from __future__ import annotations

import json
import os
import platform
import stat
from pathlib import Path

import pytest
from inspector_env import SHA, output_dir_is_empty, run_inspector

import slurm_image.inspector.inspect_image as inspect_image


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["client"],
        ["client", SHA],
        ["client", SHA, "/tmp/x.json", "extra"],
        ["builder", SHA, "{out}"],
        ["Client", SHA, "{out}"],
        ["client", SHA.upper(), "{out}"],
        ["client", SHA[:-1], "{out}"],
        ["client", SHA + "0", "{out}"],
        ["client", "sha256:" + SHA, "{out}"],
        ["client", SHA, "inspection.json"],
        ["client", SHA, "{out}/"],
        ["--", "client", SHA, "{out}"],
    ],
)
def test_bad_arguments_are_a_usage_error_with_no_output(
    full_venv: Path, tmp_path: Path, argv: list[str]
) -> None:
    out = tmp_path / "inspection.json"
    args = [arg.replace("{out}", str(out)) for arg in argv]
    result = run_inspector(full_venv, "client", out, argv=args)
    assert result.returncode == inspect_image.EXIT_USAGE
    assert "usage" in result.stderr
    assert output_dir_is_empty(tmp_path)


def test_missing_output_directory_fails_to_write_and_leaves_nothing(
    full_venv: Path, tmp_path: Path
) -> None:
    result = run_inspector(full_venv, "client", tmp_path / "absent" / "inspection.json")
    assert result.returncode == inspect_image.EXIT_WRITE_FAILED
    assert output_dir_is_empty(tmp_path)


def test_output_is_private_and_replaces_a_symlink_without_writing_through_it(
    full_venv: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "inspection.json"
    out.symlink_to(victim)
    result = run_inspector(full_venv, "client", out)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "untouched"
    mode = out.lstat().st_mode
    assert stat.S_ISREG(mode)
    assert stat.S_IMODE(mode) == 0o600
    assert sorted(p.name for p in out_dir.iterdir()) == ["inspection.json"]


def test_in_process_main_writes_one_json_object(tmp_path: Path) -> None:
    out = tmp_path / "inspection.json"
    assert inspect_image.main(["client", SHA, str(out)], environ={}) == 0
    data = out.read_bytes()
    assert data.endswith(b"}\n")
    record = json.loads(data)
    assert set(record) == {
        "schema_version",
        "inspector_version",
        "role",
        "sqsh_sha256",
        "machine",
        "facts",
    }
    assert record["schema_version"] == 3
    assert record["machine"] == platform.machine()
    assert record["inspector_version"] == inspect_image.INSPECTOR_VERSION


def _fail_fsync_on_call(monkeypatch: pytest.MonkeyPatch, failing_call: int) -> None:
    real_fsync = os.fsync
    calls = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == failing_call:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(inspect_image.os, "fsync", fsync)


@pytest.mark.parametrize("failing_call", [1, 2], ids=["file-fsync", "directory-fsync"])
def test_failed_write_leaves_neither_temp_file_nor_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_call: int
) -> None:
    _fail_fsync_on_call(monkeypatch, failing_call)
    out = tmp_path / "inspection.json"
    assert inspect_image.main(["client", SHA, str(out)], environ={}) == (
        inspect_image.EXIT_WRITE_FAILED
    )
    assert output_dir_is_empty(tmp_path)


def test_failed_rename_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "inspection.json"
    target.mkdir()
    (target / "keep").write_text("")
    with pytest.raises(OSError):
        inspect_image.write_atomically(str(target), b"{}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inspection.json"]


def test_interrupted_write_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(inspect_image.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        inspect_image.write_atomically(str(tmp_path / "inspection.json"), b"{}\n")
    assert output_dir_is_empty(tmp_path)


@pytest.mark.parametrize(
    ("name", "normalized"),
    [("Tiny_Lib.Extra", "tiny-lib-extra"), ("zope.interface", "zope-interface"), ("A--_b", "a-b")],
)
def test_names_are_normalized_per_pep_503(name: str, normalized: str) -> None:
    assert inspect_image.normalize_name(name) == normalized

"""The inspector under real interpreters and environments built by venv, ensurepip and pip."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from inspector_env import (
    CLEAN_PATH,
    SHA,
    make_prefix,
    output_dir_is_empty,
    pip_install,
    pip_version,
    run_inspector,
    site_packages,
)

import slurm_image.inspector.inspect_image as inspect_image
from slurm_image.domain.inspection import validate_inspection


def test_venv_client_facts_name_the_venvs_pip_and_every_distribution(
    full_venv: Path, tmp_path: Path
) -> None:
    out = tmp_path / "inspection.json"
    result = run_inspector(full_venv, "client", out)
    assert result.returncode == 0, result.stderr
    facts = result.record["facts"]
    site = site_packages(full_venv)
    assert facts["installer"] == {
        "name": "pip",
        "version": pip_version(site),
        "path": str(full_venv.parent / "pip"),
    }
    names = [d["name"] for d in facts["distributions"]]
    assert names == sorted(names)
    assert {"name": "tiny-lib-extra", "version": "1.2.3"} in facts["distributions"]
    assert {"name": "vllm", "version": "0.6.3"} in facts["distributions"]
    assert facts["python"] == {
        "implementation": "cpython",
        "version": "{}.{}.{}".format(*sys.version_info[:3]),
        "abi": "cp{}{}".format(*sys.version_info[:2]),
        # the venv's own interpreter, not the base one its symlink points at
        "executable": str(full_venv.parent.resolve() / "python"),
    }
    assert facts["shadowed"] == []
    assert result.record["sqsh_sha256"] == SHA
    validate_inspection(out.read_bytes(), role="client", sqsh_sha256=SHA)


def test_pip_and_vllm_earlier_on_path_are_ignored(
    full_venv: Path, decoy_bin: Path, tmp_path: Path
) -> None:
    env = {"PATH": f"{decoy_bin}:{CLEAN_PATH}"}
    client = run_inspector(full_venv, "client", tmp_path / "client.json", env=env)
    serving = run_inspector(full_venv, "serving", tmp_path / "serving.json", env=env)
    assert client.record["facts"]["installer"]["path"] == str(full_venv.parent / "pip")
    assert serving.record["facts"]["server"]["path"] == str(full_venv.parent / "vllm")


def test_serving_facts_name_the_pip_installed_vllm_and_its_console_script(
    full_venv: Path, tmp_path: Path
) -> None:
    out = tmp_path / "inspection.json"
    result = run_inspector(full_venv, "serving", out)
    assert result.returncode == 0, result.stderr
    assert result.record["facts"] == {
        "server": {"name": "vllm", "version": "0.6.3", "path": str(full_venv.parent / "vllm")},
        "shadowed": [],
    }
    validate_inspection(out.read_bytes(), role="serving", sqsh_sha256=SHA)


def test_client_without_pip_is_refused_with_no_output(bare_venv: Path, tmp_path: Path) -> None:
    result = run_inspector(bare_venv, "client", tmp_path / "inspection.json")
    assert result.returncode == inspect_image.EXIT_REFUSED
    # the distribution, where it was looked for, and what the site can do
    assert "refused (client image): pip not installed for " in result.stderr
    assert str(site_packages(bare_venv)) in result.stderr
    assert "python3 -m ensurepip" in result.stderr
    assert output_dir_is_empty(tmp_path)


def test_serving_without_vllm_is_refused_with_no_output(bare_venv: Path, tmp_path: Path) -> None:
    result = run_inspector(bare_venv, "serving", tmp_path / "inspection.json")
    assert result.returncode == inspect_image.EXIT_REFUSED
    assert "refused (serving image): vllm not installed for " in result.stderr
    assert str(site_packages(bare_venv)) in result.stderr
    assert "install it there or import the image as a client" in result.stderr
    assert output_dir_is_empty(tmp_path)


def test_required_distributions_are_matched_by_normalized_name(
    full_venv: Path, tmp_path: Path
) -> None:
    env = {inspect_image.REQUIRE_ENV: "Tiny_Lib.extra,VLLM"}
    result = run_inspector(full_venv, "client", tmp_path / "inspection.json", env=env)
    assert result.returncode == 0, result.stderr


def test_missing_required_distribution_is_refused_with_no_output(
    full_venv: Path, tmp_path: Path
) -> None:
    env = {inspect_image.REQUIRE_ENV: "tiny-lib-extra,numpy,torch"}
    result = run_inspector(full_venv, "client", tmp_path / "inspection.json", env=env)
    assert result.returncode == inspect_image.EXIT_REFUSED
    assert "numpy, torch not installed for " in result.stderr
    assert str(site_packages(full_venv)) in result.stderr
    assert "[inspection] client_distributions" in result.stderr
    assert output_dir_is_empty(tmp_path)


@pytest.mark.parametrize("value", ["numpy torch", "numpy,", ",", "-numpy", "num/py"])
def test_malformed_required_list_is_a_usage_error(
    full_venv: Path, tmp_path: Path, value: str
) -> None:
    env = {inspect_image.REQUIRE_ENV: value}
    result = run_inspector(full_venv, "client", tmp_path / "inspection.json", env=env)
    assert result.returncode == inspect_image.EXIT_USAGE
    assert output_dir_is_empty(tmp_path)


def test_required_list_for_a_serving_image_is_a_usage_error(
    full_venv: Path, tmp_path: Path
) -> None:
    env = {inspect_image.REQUIRE_ENV: "pip"}
    result = run_inspector(full_venv, "serving", tmp_path / "inspection.json", env=env)
    assert result.returncode == inspect_image.EXIT_USAGE
    assert output_dir_is_empty(tmp_path)


def _add_path_entries(python: Path, *entries: Path) -> None:
    pth = site_packages(python) / "extra-paths.pth"
    pth.write_text("".join(f"{entry}\n" for entry in entries))


def test_a_copy_later_on_sys_path_is_shadowed_by_the_first(
    fresh_venv: Callable[[], Path], wheels: dict[str, Path], tmp_path: Path
) -> None:
    python = fresh_venv()
    target = tmp_path / "target"
    pip_install(python, wheels["tiny"])
    pip_install(python, wheels["tiny_old"], "--target", str(target))
    _add_path_entries(python, target)
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == 0, result.stderr
    facts = result.record["facts"]
    assert {"name": "tiny-lib-extra", "version": "1.2.3"} in facts["distributions"]
    assert facts["shadowed"] == [
        {"name": "tiny-lib-extra", "version": "1.0.0", "location": str(target)}
    ]
    validate_inspection(json.dumps(result.record).encode(), role="client", sqsh_sha256=SHA)


def _copy_of_pip(site: Path, directory: Path, version: str) -> Path:
    """pip's metadata directory copied into ``directory`` as another version of pip."""
    (info,) = site.glob("pip-*.dist-info")
    copy = directory / f"pip-{version}.dist-info"
    shutil.copytree(info, copy)
    metadata = (copy / "METADATA").read_text()
    (copy / "METADATA").write_text(
        re.sub(r"(?m)^Version: .*$", f"Version: {version}", metadata, count=1)
    )
    return copy


def test_the_effective_copy_follows_the_search_path_order(full_venv: Path, tmp_path: Path) -> None:
    site = site_packages(full_venv)
    other = tmp_path / "other"
    other.mkdir()
    _copy_of_pip(site, other, "1.0")
    found = inspect_image.find_distributions
    venv_pip = pip_version(site)
    first = found([str(site), str(other)])
    assert (first["pip"].version, first["pip"].location) == (venv_pip, str(site))
    assert first.shadowed_facts() == [{"name": "pip", "version": "1.0", "location": str(other)}]
    second = found([str(other), str(site)])
    assert (second["pip"].version, second["pip"].location) == ("1.0", str(other))
    assert second.shadowed_facts() == [{"name": "pip", "version": venv_pip, "location": str(site)}]
    assert second["vllm"].version == "0.6.3"
    assert "vllm" not in second.shadowed


@pytest.mark.parametrize("role", ["client", "serving"])
def test_two_copies_in_one_directory_are_refused_naming_each_and_the_remedy(
    fresh_venv: Callable[[], Path], tmp_path: Path, role: str
) -> None:
    python = fresh_venv()
    site = site_packages(python)
    (real_info,) = site.glob("pip-*.dist-info")
    stale = _copy_of_pip(site, site, "1.0")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = run_inspector(python, role, out_dir / "inspection.json")
    assert result.returncode == inspect_image.EXIT_REFUSED
    assert f"pip is installed 2 times in one directory, {site}" in result.stderr
    assert f"pip 1.0 at {stale}" in result.stderr
    assert f"pip {pip_version_of(real_info)} at {real_info}" in result.stderr
    assert "remove the stale metadata directory" in result.stderr
    assert output_dir_is_empty(out_dir)


def pip_version_of(info: Path) -> str:
    return info.name[len("pip-") : -len(".dist-info")]


def test_an_effective_copy_without_its_script_is_refused_naming_the_shadowed_ones(
    full_venv: Path, tmp_path: Path
) -> None:
    site = site_packages(full_venv)
    other = tmp_path / "lib" / "python3" / "dist-packages"
    other.mkdir(parents=True)
    copy = _copy_of_pip(site, other, "1.0")
    (copy / "RECORD").unlink()
    installed = inspect_image.find_distributions([str(other), str(site)])
    with pytest.raises(inspect_image.Refused) as refused:
        inspect_image.console_script_path(installed, "pip", "pip")
    message = str(refused.value)
    assert f"pip 1.0 at {copy}" in message
    assert f"shadowing pip {pip_version(site)} at {site}" in message
    assert str(tmp_path / "bin" / "pip") in message
    assert "--force-reinstall --no-deps pip" in message


def test_two_copies_in_a_shadowed_directory_do_not_matter(full_venv: Path, tmp_path: Path) -> None:
    site = site_packages(full_venv)
    other = tmp_path / "other"
    other.mkdir()
    _copy_of_pip(site, other, "1.0")
    _copy_of_pip(site, other, "2.0")
    installed = inspect_image.find_distributions([str(site), str(other)])
    assert installed["pip"].version == pip_version(site)
    assert sorted(d["version"] for d in installed.shadowed_facts()) == ["1.0", "2.0"]


def test_a_venv_with_system_site_packages_shadows_its_base(tmp_path: Path) -> None:
    # a prefix install with pip (the base), and a venv of it that sees the base's site-packages
    base = make_prefix(tmp_path / "base")
    venv = tmp_path / "venv"
    subprocess.run(
        [str(base), "-m", "venv", "--system-site-packages", str(venv)],
        check=True,
        capture_output=True,
        timeout=300,
        env={"PATH": CLEAN_PATH},
    )
    python = venv / "bin" / "python3"
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == 0, result.stderr
    facts = result.record["facts"]
    assert facts["installer"]["path"] == str(venv / "bin" / "pip")
    assert facts["python"]["executable"] == str(python)
    base_site = site_packages(base)
    shadowed = {"name": "pip", "version": pip_version(base_site), "location": str(base_site)}
    assert shadowed in facts["shadowed"]


def test_the_interpreter_path_is_resolved_outside_a_venv(tmp_path: Path) -> None:
    python = make_prefix(tmp_path / "prefix")
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == 0, result.stderr
    # bin/python3 is a symlink to bin/python3.X: the facts name the file itself
    assert python.is_symlink()
    assert result.record["facts"]["python"]["executable"] == str(python.resolve())
    assert python.resolve() != python


def test_an_interpreter_that_cannot_name_itself_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(inspect_image.sys, "executable", "")
    with pytest.raises(inspect_image.Refused, match="cannot name its own path"):
        inspect_image.python_facts()


def test_one_directory_reached_twice_counts_once(
    fresh_venv: Callable[[], Path], wheels: dict[str, Path], tmp_path: Path
) -> None:
    python = fresh_venv()
    target = tmp_path / "target"
    pip_install(python, wheels["tiny"], "--target", str(target))
    alias = tmp_path / "alias"
    alias.symlink_to(target)
    _add_path_entries(python, target, alias)
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == 0, result.stderr
    names = [d["name"] for d in result.record["facts"]["distributions"]]
    assert names.count("tiny-lib-extra") == 1


def _pip_dist_info(python: Path) -> Path:
    (info,) = site_packages(python).glob("pip-*.dist-info")
    return info


def _drop_script_lines_from_record(info: Path, replacement: str | None = None) -> None:
    lines = (info / "RECORD").read_text().splitlines()
    kept = [line for line in lines if "/bin/" not in line]
    if replacement:
        kept.append(replacement)
    (info / "RECORD").write_text("\n".join(kept) + "\n")


def test_record_naming_a_script_that_was_never_installed_falls_back_to_the_prefix(
    fresh_venv: Callable[[], Path], tmp_path: Path
) -> None:
    # Debian 12's python3-pip ships a RECORD listing ../scripts/pip, a build-time path
    python = fresh_venv()
    _drop_script_lines_from_record(_pip_dist_info(python), "../scripts/pip,sha256=x,1")
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == 0, result.stderr
    assert result.record["facts"]["installer"]["path"] == str(python.parent / "pip")


def test_without_record_a_script_that_is_not_pips_is_refused(
    fresh_venv: Callable[[], Path], tmp_path: Path
) -> None:
    python = fresh_venv()
    (_pip_dist_info(python) / "RECORD").unlink()
    (python.parent / "pip").write_text('#!/bin/sh\nexec /usr/bin/pip "$@"\n')
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = run_inspector(python, "client", out_dir / "inspection.json")
    assert result.returncode == inspect_image.EXIT_REFUSED
    assert "console script 'pip' not found" in result.stderr
    assert str(python.parent / "pip") in result.stderr
    assert "--force-reinstall --no-deps pip" in result.stderr
    assert output_dir_is_empty(out_dir)


def test_pip_without_a_pip_console_script_entry_is_refused(
    fresh_venv: Callable[[], Path], tmp_path: Path
) -> None:
    python = fresh_venv()
    (_pip_dist_info(python) / "entry_points.txt").write_text(
        "[console_scripts]\npip3 = pip._internal.cli.main:main\n"
    )
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == inspect_image.EXIT_REFUSED
    assert "declares no 'pip' console script" in result.stderr
    assert "--force-reinstall --no-deps pip" in result.stderr
    assert not (tmp_path / "inspection.json").exists()


def test_pip_installed_into_a_prefix_like_usr_local(tmp_path: Path) -> None:
    prefix = tmp_path / "usr" / "local"
    python = make_prefix(prefix)
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == 0, result.stderr
    installer = result.record["facts"]["installer"]
    assert installer["path"] == str(prefix / "bin" / "pip")
    assert installer["version"] == pip_version(site_packages(python))


CONDA_LAUNCHER = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys

from pip._internal.cli.main import main

if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw?|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def test_conda_style_prefix_whose_launcher_conda_wrote(tmp_path: Path) -> None:
    # conda writes entry-point launchers itself: pip's RECORD does not list them
    prefix = tmp_path / "opt" / "conda"
    python = make_prefix(prefix)
    info = _pip_dist_info(python)
    _drop_script_lines_from_record(info)
    (info / "INSTALLER").write_text("conda\n")
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta" / "history").write_text("")
    (prefix / "bin" / "pip").write_text(CONDA_LAUNCHER.format(python=python))
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == 0, result.stderr
    assert result.record["facts"]["installer"]["path"] == str(prefix / "bin" / "pip")


EASY_INSTALL_SCRIPT = """#!/usr/bin/python3
# EASY-INSTALL-ENTRY-SCRIPT: 'pip=={version}','console_scripts','pip'
import re
import sys
__requires__ = 'pip=={version}'
from pkg_resources import load_entry_point
if __name__ == '__main__':
    sys.exit(load_entry_point('pip=={version}', 'console_scripts', 'pip')())
"""


def _debian_layout(tmp_path: Path) -> tuple[Path, Path, str]:
    """pip moved as Debian's python3-pip lays it out: <prefix>/lib/python3/dist-packages,
    no RECORD, the script in <prefix>/bin."""
    prefix = tmp_path / "usr"
    python = make_prefix(prefix)
    site = site_packages(python)
    info = _pip_dist_info(python)
    version = pip_version(site)
    dist_packages = prefix / "lib" / "python3" / "dist-packages"
    dist_packages.mkdir(parents=True)
    for entry in (site / "pip", info):
        shutil.move(entry, dist_packages / entry.name)
    (dist_packages / info.name / "RECORD").unlink()
    (site / "debian.pth").write_text(f"{dist_packages}\n")
    return prefix, python, version


@pytest.mark.parametrize("style", ["module", "easy_install"])
def test_debian_layout_without_record(tmp_path: Path, style: str) -> None:
    prefix, python, version = _debian_layout(tmp_path)
    if style == "easy_install":
        (prefix / "bin" / "pip").write_text(EASY_INSTALL_SCRIPT.format(version=version))
    result = run_inspector(python, "client", tmp_path / "inspection.json")
    assert result.returncode == 0, result.stderr
    assert result.record["facts"]["installer"] == {
        "name": "pip",
        "version": version,
        "path": str(prefix / "bin" / "pip"),
    }


def test_debian_layout_with_a_script_of_another_pip_version_is_refused(tmp_path: Path) -> None:
    prefix, python, _ = _debian_layout(tmp_path)
    (prefix / "bin" / "pip").write_text(EASY_INSTALL_SCRIPT.format(version="1.0"))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = run_inspector(python, "client", out_dir / "inspection.json")
    assert result.returncode == inspect_image.EXIT_REFUSED
    assert output_dir_is_empty(out_dir)


@pytest.mark.parametrize(
    "metadata",
    ["Metadata-Version: 2.1\nName: broken\n", "Metadata-Version: 2.1\nVersion: 1.0\n", ""],
    ids=["no-version", "no-name", "empty"],
)
def test_distribution_without_name_or_version_is_refused(tmp_path: Path, metadata: str) -> None:
    info = tmp_path / "broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(metadata)
    with pytest.raises(inspect_image.Refused, match="no name or version"):
        inspect_image.find_distributions([str(tmp_path)])

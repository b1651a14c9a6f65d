"""The inspector on the layouts images are really built with (scripts/layout-roots), fact by
fact: the staged rc file and inspector run chrooted in each root with the image's Env, as the
job runs them. Each expected version comes from what the builder installed (its manifest) or
from dpkg's database in the root, never from the inspector."""

from __future__ import annotations

import json
from typing import Any

import pytest
from inspector_env import SHA
from layout_roots import inspect_in, layout

import slurm_image.inspector.inspect_image as inspect_image
from slurm_image.domain.inspection import validate_inspection

pytestmark = pytest.mark.debian_roots

APT_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
USR_LOCAL_DIST_PACKAGES = "/usr/local/lib/python3.11/dist-packages"


def accepted(record: dict[str, Any] | None, role: str) -> dict[str, Any]:
    assert record is not None
    validate_inspection(json.dumps(record).encode(), role=role, sqsh_sha256=SHA)  # type: ignore[arg-type]
    assert record["schema_version"] == 3
    facts: dict[str, Any] = record["facts"]
    return facts


def test_apt_pip_upgraded_by_pip_the_upgraded_one_is_effective_apts_shadowed() -> None:
    found = layout("pip-upgraded")
    run = inspect_in(found, "client")
    assert run.returncode == 0, run.stderr
    facts = accepted(run.record, "client")
    upgraded = found.version("pip")
    assert facts["installer"] == {"name": "pip", "version": upgraded, "path": "/usr/local/bin/pip"}
    assert facts["shadowed"] == [
        {"name": "pip", "version": found.dpkg_version("python3-pip"), "location": APT_DIST_PACKAGES}
    ]
    assert {"name": "pip", "version": upgraded} in facts["distributions"]
    assert facts["python"]["executable"] == "/usr/bin/python3.11"
    assert facts["python"]["version"] == found.dpkg_version("python3.11")


def test_apt_pip_upgraded_by_pip_has_no_vllm_to_serve() -> None:
    run = inspect_in(layout("pip-upgraded"), "serving")
    assert run.returncode == inspect_image.EXIT_REFUSED
    assert run.record is None
    assert "vllm not installed for /usr/bin/python3" in run.stderr
    assert USR_LOCAL_DIST_PACKAGES in run.stderr and APT_DIST_PACKAGES in run.stderr


def test_venv_first_on_the_image_path_is_the_one_inspected() -> None:
    found = layout("venv")
    # beside it, the system python3 and apt's pip the venv does not see
    assert (found.root / "usr/bin/pip").is_file()
    assert found.env[0].startswith("PATH=/opt/venv/bin:")
    run = inspect_in(found, "client")
    assert run.returncode == 0, run.stderr
    facts = accepted(run.record, "client")
    assert facts["python"]["executable"] == "/opt/venv/bin/python3"
    assert facts["python"]["version"] == found.dpkg_version("python3.11")
    assert facts["installer"] == {
        "name": "pip",
        "version": found.version("pip"),
        "path": "/opt/venv/bin/pip",
    }
    assert facts["distributions"] == [
        {"name": "pip", "version": found.version("pip")},
        {"name": "vllm", "version": found.version("vllm")},
    ]
    assert facts["shadowed"] == []


def test_venv_serves_its_own_vllm() -> None:
    found = layout("venv")
    run = inspect_in(found, "serving")
    assert run.returncode == 0, run.stderr
    assert accepted(run.record, "serving") == {
        "server": {"name": "vllm", "version": found.version("vllm"), "path": "/opt/venv/bin/vllm"},
        "shadowed": [],
    }


def test_vllm_installed_by_uv_system_is_served_from_its_record() -> None:
    found = layout("uv-system")
    (info,) = (found.root / USR_LOCAL_DIST_PACKAGES.lstrip("/")).glob("vllm-*.dist-info")
    assert (info / "INSTALLER").read_text().strip() == "uv"
    assert "../../../bin/vllm," in (info / "RECORD").read_text()
    run = inspect_in(found, "serving")
    assert run.returncode == 0, run.stderr
    assert accepted(run.record, "serving") == {
        "server": {"name": "vllm", "version": found.version("vllm"), "path": "/usr/local/bin/vllm"},
        "shadowed": [],
    }


def test_uv_system_next_to_apt_pip_as_a_client() -> None:
    found = layout("uv-system")
    run = inspect_in(found, "client")
    assert run.returncode == 0, run.stderr
    facts = accepted(run.record, "client")
    apt_pip = found.dpkg_version("python3-pip")
    assert facts["installer"] == {"name": "pip", "version": apt_pip, "path": "/usr/bin/pip"}
    assert {"name": "uv", "version": found.version("uv")} in facts["distributions"]
    assert {"name": "vllm", "version": found.version("vllm")} in facts["distributions"]
    assert facts["shadowed"] == []


def test_conda_prefix_found_by_the_rc_fallback_without_a_system_python() -> None:
    found = layout("conda")
    assert not (found.root / "usr/bin/python3").exists()
    assert "/opt/conda" not in " ".join(found.env)
    run = inspect_in(found, "client")
    assert run.returncode == 0, run.stderr
    facts = accepted(run.record, "client")
    assert facts["python"] == {
        "implementation": "cpython",
        "version": found.version("python"),
        "abi": "cp" + "".join(found.version("python").split(".")[:2]),
        "executable": found.manifest["executable"],
    }
    assert facts["installer"] == {
        "name": "pip",
        "version": found.version("pip"),
        "path": "/opt/conda/bin/pip",
    }
    assert facts["distributions"] == [{"name": "pip", "version": found.version("pip")}]
    assert facts["shadowed"] == []


def test_conda_prefix_without_vllm_is_refused_naming_its_site_packages() -> None:
    run = inspect_in(layout("conda"), "serving")
    assert run.returncode == inspect_image.EXIT_REFUSED
    assert run.record is None
    assert "vllm not installed for /opt/conda/bin/python3" in run.stderr
    assert "/opt/conda/lib/python3.11/site-packages" in run.stderr


def test_required_distribution_present() -> None:
    found = layout("required")
    run = inspect_in(found, "client", require="idna")
    assert run.returncode == 0, run.stderr
    facts = accepted(run.record, "client")
    assert {"name": "idna", "version": found.version("idna")} in facts["distributions"]


def test_required_distribution_shadowed_records_the_effective_copy() -> None:
    # apt's python3-six, then `pip install --upgrade six` as root
    found = layout("required")
    run = inspect_in(found, "client", require="six")
    assert run.returncode == 0, run.stderr
    facts = accepted(run.record, "client")
    assert {"name": "six", "version": found.version("six")} in facts["distributions"]
    assert facts["shadowed"] == [
        {"name": "six", "version": found.dpkg_version("python3-six"), "location": APT_DIST_PACKAGES}
    ]
    assert facts["installer"]["path"] == "/usr/bin/pip"


def test_required_distribution_missing_is_refused_naming_it_and_the_remedy() -> None:
    run = inspect_in(layout("required"), "client", require="six,idna,numpy")
    assert run.returncode == inspect_image.EXIT_REFUSED
    assert run.record is None
    assert "refused (client image): numpy not installed for /usr/bin/python3 " in run.stderr
    assert USR_LOCAL_DIST_PACKAGES in run.stderr and APT_DIST_PACKAGES in run.stderr
    assert "[inspection] client_distributions" in run.stderr

"""Architecture names: the uname spelling the product and Enroot's -a use, the OCI and ELF
spellings beside it, and the architecture a request and a plan carry."""

from __future__ import annotations

import json

import pytest

from slurm_image.domain.architecture import (
    ARCHITECTURES,
    BuildTarget,
    build_target,
    check_architecture,
    elf_machine,
    from_machine,
    oci_name,
)
from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.errors import DomainError, InvalidRequest, PlanInvariantViolation
from slurm_image.domain.plan import load_plan
from slurm_image.domain.profile import parse_profile
from slurm_image.domain.request import make_request
from support import PYTORCH, make_plan, profile_data


@pytest.mark.parametrize(
    ("uname", "oci", "machine"),
    [("x86_64", "amd64", 62), ("aarch64", "arm64", 183), ("ppc64le", "ppc64le", 21)],
)
def test_each_architecture_has_its_oci_and_elf_spelling(uname: str, oci: str, machine: int) -> None:
    assert check_architecture(uname) == uname
    assert oci_name(uname) == oci
    assert elf_machine(uname) == machine
    assert from_machine(uname) == uname


def test_the_architectures_are_the_three_enroot_takes() -> None:
    assert ARCHITECTURES == ("aarch64", "ppc64le", "x86_64")


@pytest.mark.parametrize(("oci", "uname"), [("arm64", "aarch64"), ("amd64", "x86_64")])
def test_an_oci_spelling_is_refused_with_the_name_to_use(oci: str, uname: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_architecture(oci, "arch")
    assert caught.value.field == "arch"
    assert f"use {uname!r}" in caught.value.rule
    assert caught.value.value == oci


@pytest.mark.parametrize("value", ["", "X86_64", "i686", "riscv64", "aarch64 ", "arm"])
def test_other_names_are_refused(value: str) -> None:
    with pytest.raises(InvalidRequest, match="must be one of aarch64, ppc64le, x86_64"):
        check_architecture(value)
    assert from_machine(value) is None


def test_a_request_carries_the_architecture_asked_for() -> None:
    request = make_request(
        "import_oci", name="m", role="client", source=PYTORCH, architecture="aarch64"
    )
    assert request.architecture == "aarch64"
    with pytest.raises(DomainError) as caught:
        make_request("import_oci", name="m", role="client", source=PYTORCH, architecture="arm64")
    assert caught.value.field == "arch"


def test_a_profile_architecture_is_checked_and_named_by_its_field() -> None:
    assert parse_profile(profile_data(arch="ppc64le")).image_build.arch == "ppc64le"
    with pytest.raises(DomainError) as caught:
        parse_profile(profile_data(arch="amd64"))
    assert "image_build.arch" in caught.value.field
    assert "use 'x86_64'" in caught.value.rule


def test_the_plan_takes_the_request_architecture_over_the_profile_one() -> None:
    assert make_plan(profile=profile_data(arch="x86_64")).architecture == "x86_64"
    plan = make_plan(profile=profile_data(arch="x86_64"), architecture="aarch64")
    assert plan.architecture == "aarch64"
    assert make_plan().architecture is None


def test_a_plan_without_architecture_keeps_its_canonical_form_without_the_key() -> None:
    data = json.loads(make_plan().canonical_bytes())
    assert "architecture" not in data
    assert "architecture" not in data["request"]
    assert "arch" not in data["profile"]["image_build"]
    assert json.loads(make_plan(architecture="aarch64").canonical_bytes())["architecture"] == (
        "aarch64"
    )


def test_a_plan_whose_architecture_disagrees_with_its_request_is_refused() -> None:
    data = json.loads(make_plan(architecture="aarch64").canonical_bytes())
    data["architecture"] = "x86_64"
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(canonical_json(data))
    assert caught.value.field == "architecture"


def test_a_version_1_plan_is_still_read_and_never_has_an_architecture() -> None:
    data = json.loads(make_plan().canonical_bytes())
    data["schema_version"] = 1
    assert load_plan(canonical_json(data)).schema_version == 1
    data = json.loads(make_plan(architecture="aarch64").canonical_bytes())
    data["schema_version"] = 1
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(canonical_json(data))
    assert caught.value.field == "architecture"


@pytest.mark.parametrize(
    ("asked", "configured", "machine", "expected"),
    [
        ("aarch64", "x86_64", "x86_64", BuildTarget("aarch64")),
        (None, "ppc64le", "x86_64", BuildTarget("ppc64le")),
        (None, None, "aarch64", BuildTarget("aarch64", assumed=True)),
        (None, None, "riscv64", BuildTarget(None)),
    ],
)
def test_an_import_is_built_for_the_architecture_named_else_the_machines_assumed(
    asked: str | None, configured: str | None, machine: str, expected: BuildTarget
) -> None:
    assert build_target(asked, configured, machine) == expected

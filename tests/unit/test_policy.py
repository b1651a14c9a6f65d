"""The profile's [policy] table, and allowed_registries enforced when a plan is derived
(docs/design.md, "Image policy and signatures")."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_cli import PROFILE_TOML

from slurm_image.domain.errors import InvalidProfile, InvalidReference, InvalidRequest
from slurm_image.domain.policy import Policy, require_allowed_source
from slurm_image.domain.profile import parse_profile, select_cluster
from slurm_image.domain.reference import parse_reference, parse_registry_prefix
from support import DIGEST, PROFILE, make_plan, run_cli


def with_policy(**policy: Any) -> dict[str, Any]:
    data = copy.deepcopy(PROFILE)
    data["policy"] = policy
    return data


def test_a_profile_without_policy_keeps_its_digest() -> None:
    assert parse_profile(PROFILE).policy is None
    assert "policy" not in parse_profile(PROFILE).model_dump()
    assert parse_profile(with_policy()).policy == Policy()


@pytest.mark.parametrize(
    ("policy", "field", "words"),
    [
        ({"allowed_registries": ["https://nvcr.io"]}, "policy.allowed_registries", "scheme"),
        ({"allowed_registries": ["nvcr.io/Nvidia"]}, "policy.allowed_registries", "lowercase"),
        ({"allowed_registries": ["nvcr.io//x"]}, "policy.allowed_registries", "none empty"),
        ({"allowed_registries": ["nvcr.io:99999"]}, "policy.allowed_registries", "port"),
        (
            {"allowed_registries": ["nvcr.io/x@sha256:" + "0" * 64]},
            "policy.allowed_registries",
            "digest",
        ),
        ({"allowed_registries": "nvcr.io"}, "policy.allowed_registries", "tuple"),
        ({"keys": ["site.pub"]}, "policy.keys", "absolute"),
        ({"keys": ["/k/../site.pub"]}, "policy.keys", ".."),
        ({"keys": ["/k/a.pub", "/k/a.pub"]}, "policy.keys", "repeat"),
        ({"require_signature": "yes"}, "policy.require_signature", "bool"),
        ({"require_signature": True}, "policy", "at least one key"),
        ({"trust": "all"}, "policy.trust", "not a known profile key"),
    ],
)
def test_policy_refuses_bad_values_naming_field_and_rule(
    policy: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(with_policy(**policy))
    assert caught.value.field == field or caught.value.field.startswith(f"{field}.")
    assert words in caught.value.rule


@pytest.mark.parametrize(
    ("prefix", "source", "covered"),
    [
        ("nvcr.io", "nvcr.io/nvidia/pytorch:24.05", True),
        ("NVCR.io", "nvcr.io/nvidia/pytorch", True),
        ("nvcr.io", "nvcr.io.evil.example/nvidia/pytorch", False),
        ("nvcr.io", "nvcr.io:5000/nvidia/pytorch", False),
        ("nvcr.io/nvidia", "nvcr.io/nvidia/pytorch", True),
        ("nvcr.io/nvidia", "nvcr.io/nvidia", True),
        ("nvcr.io/nvidia", "nvcr.io/nvidiax/pytorch", False),
        ("nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/py", False),
        ("registry.site.example:5000/team", "registry.site.example:5000/team/app", True),
        ("registry.site.example:5000/team", "registry.site.example/team/app", False),
        ("docker.io/library", "ubuntu", True),
        ("docker.io", "index.docker.io/vllm/vllm-openai", True),
        ("docker.io/library", "vllm/vllm-openai", False),
        ("[::1]:5000", "[::1]:5000/x", True),
    ],
)
def test_a_registry_prefix_covers_whole_path_components_only(
    prefix: str, source: str, covered: bool
) -> None:
    reference = parse_reference(f"{source}@{DIGEST}")
    assert parse_registry_prefix(prefix).covers(reference) is covered


def test_parse_registry_prefix_refuses_what_the_reference_grammar_refuses() -> None:
    with pytest.raises(InvalidReference):
        parse_registry_prefix("nvcr.io/a b")


def test_no_allowed_registries_means_any() -> None:
    reference = parse_reference(f"quay.io/x@{DIGEST}")
    require_allowed_source(reference, None)
    require_allowed_source(reference, Policy())


def test_a_source_outside_allowed_registries_is_refused_when_the_plan_is_derived() -> None:
    profile = with_policy(allowed_registries=["registry.site.example:5000/team"])
    with pytest.raises(InvalidRequest) as caught:
        make_plan(source=f"nvcr.io/nvidia/pytorch@{DIGEST}", profile=profile)
    assert caught.value.field == "source"
    assert "policy.allowed_registries (registry.site.example:5000/team)" in caught.value.rule
    plan = make_plan(source=f"registry.site.example:5000/team/app@{DIGEST}", profile=profile)
    assert plan.source_digest == DIGEST


def test_inspect_of_a_local_file_is_not_held_to_allowed_registries() -> None:
    profile = with_policy(allowed_registries=["nvcr.io"])
    plan = make_plan("inspect_sqsh", source="/lustre/images/serving.sqsh", profile=profile)
    assert plan.source_digest is None


def test_a_catalog_cluster_carries_its_own_policy() -> None:
    document = {
        "clusters": {
            "open": copy.deepcopy(PROFILE),
            "strict": {**copy.deepcopy(PROFILE), "policy": {"allowed_registries": ["nvcr.io"]}},
        }
    }
    strict, _ = select_cluster(document, explicit="strict", hostnames=[], catalog_sha256="0" * 64)
    open_, _ = select_cluster(document, explicit="open", hostnames=[], catalog_sha256="0" * 64)
    assert strict.policy == Policy(allowed_registries=("nvcr.io",))
    assert open_.policy is None
    bad = copy.deepcopy(document)
    bad["clusters"]["strict"]["policy"] = {"allowed_registries": ["nvcr.io/"]}
    with pytest.raises(InvalidProfile) as caught:
        select_cluster(bad, explicit="strict", hostnames=[], catalog_sha256="0" * 64)
    assert caught.value.field.startswith("clusters.strict.policy.allowed_registries")


def test_dry_run_of_a_source_outside_allowed_registries_exits_2_naming_the_rule(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "site.toml"
    profile.write_text(
        PROFILE_TOML.format(root=tmp_path / "ws")
        + '\n[policy]\nallowed_registries = ["registry.site.example:5000/team"]\n'
    )
    args = ["import", f"nvcr.io/nvidia/pytorch@{DIGEST}", "--name", "t", "--role", "client"]
    for extra in (["--dry-run"], []):
        done = run_cli(
            "--profile", str(profile), *args, *extra, cwd=tmp_path, env={"HOME": str(tmp_path)}
        )
        assert done.returncode == 2, done.stderr
        assert "source:" in done.stderr
        assert "policy.allowed_registries" in done.stderr
        assert done.stdout == ""
    assert not (tmp_path / "ws").exists()


def test_dry_run_inspect_under_require_signature_needs_unsigned_ok(tmp_path: Path) -> None:
    key = tmp_path / "site.pub"
    key.write_text("unused: an inspect reads no key\n")
    profile = tmp_path / "site.toml"
    profile.write_text(
        PROFILE_TOML.format(root=tmp_path / "ws")
        + f'\n[policy]\nrequire_signature = true\nkeys = ["{key}"]\n'
    )
    image = tmp_path / "image.sqsh"
    image.write_bytes(b"hsqs")
    args = ["--profile", str(profile), "--json", "inspect", str(image), "--name", "t"]
    args += ["--role", "serving", "--dry-run"]
    env = {"HOME": str(tmp_path)}
    refused = run_cli(*args, cwd=tmp_path, env=env)
    assert refused.returncode == 10, refused.stderr
    assert "--unsigned-ok" in refused.stderr and "carries no signature" in refused.stderr
    done = run_cli(*args, "--unsigned-ok", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["request"]["unsigned_ok"] is True
    assert not (tmp_path / "ws").exists()


def test_each_cluster_of_a_catalog_applies_its_own_policy(tmp_path: Path) -> None:
    base = PROFILE_TOML.format(root=tmp_path / "ws").replace("[image_build]", "[X.image_build]")
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        'default = "open"\n\n'
        + base.replace("workspace_root", "[clusters.open]\nworkspace_root", 1).replace(
            "[X.", "[clusters.open."
        )
        + "\n"
        + base.replace("workspace_root", "[clusters.strict]\nworkspace_root", 1).replace(
            "[X.", "[clusters.strict."
        )
        + '\n[clusters.strict.policy]\nallowed_registries = ["registry.site.example:5000"]\n'
    )
    args = ["import", f"nvcr.io/nvidia/pytorch@{DIGEST}", "--name", "t", "--role", "client"]
    env = {"HOME": str(tmp_path)}
    strict = run_cli("--profile", str(catalog), "--cluster", "strict", *args, "--dry-run",
                     cwd=tmp_path, env=env)  # fmt: skip
    assert strict.returncode == 2, strict.stderr
    assert "policy.allowed_registries (registry.site.example:5000)" in strict.stderr
    open_ = run_cli("--profile", str(catalog), "--cluster", "open", *args, "--dry-run",
                    cwd=tmp_path, env=env)  # fmt: skip
    assert open_.returncode == 0, open_.stderr

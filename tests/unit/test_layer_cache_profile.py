"""The profile's [enroot] layer_cache and layer_cache_max, and the cache path the plan carries
(README, "The layer cache")."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from slurm_image.domain import layer_cache
from slurm_image.domain.errors import InvalidPath, InvalidProfile, PlanInvariantViolation
from slurm_image.domain.plan import derive_plan, load_plan
from slurm_image.domain.profile import parse_profile
from support import CREATED_AT, LIFECYCLE_ID, PROFILE, RUNTIME, make_plan, selection_for

ROOT = PROFILE["workspace_root"]


def with_enroot(**values: Any) -> dict[str, Any]:
    profile = copy.deepcopy(PROFILE)
    profile.setdefault("enroot", {}).update(values)
    return profile


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (True, "must be a path or false"),
        (3, "must be a path or false"),
        ("relative/cache", "must be an absolute path"),
        ("~user/cache", "must be an absolute path"),
        ("/cache/../elsewhere", "must not contain '..'"),
        ("/cache/", "must be normalized"),
        ("/a b", "must not contain whitespace, ':', ',' or '\\'"),
        ("/a:b", "must not contain whitespace, ':', ',' or '\\'"),
        ("~/a b", "must not contain whitespace, ':', ',' or '\\'"),
        ("/", "must not be the filesystem root"),
    ],
)
def test_a_bad_layer_cache_is_refused_naming_the_field_and_the_rule(value: Any, rule: str) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(with_enroot(layer_cache=value))
    assert caught.value.field == "enroot.layer_cache"
    assert rule in caught.value.rule


@pytest.mark.parametrize("value", ["200", "0G", "1.5G", "10g", "20GB", "-1G", ""])
def test_a_bad_layer_cache_max_is_refused_naming_the_field_and_the_rule(value: str) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(with_enroot(layer_cache_max=value))
    assert caught.value.field == "enroot.layer_cache_max"
    assert "must match ^[1-9][0-9]*[KMGT]$" in caught.value.rule


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1K", 1024), ("200G", 200 << 30), ("3T", 3 << 40), (None, 100 << 30)],
)
def test_layer_cache_max_is_read_in_bytes_with_a_default(value: str | None, expected: int) -> None:
    profile = parse_profile(with_enroot(layer_cache_max=value) if value else PROFILE)
    assert profile.enroot.cache_max_bytes == expected


def test_a_profile_without_cache_settings_keeps_its_digest() -> None:
    # the fields are left out of the dump when unset, so the bytes hashed stay what they were
    profile = parse_profile(PROFILE)
    assert "layer_cache" not in profile.enroot.model_dump()
    assert "layer_cache_max" not in profile.enroot.model_dump()
    assert profile.sha256() == parse_profile(copy.deepcopy(PROFILE)).sha256()
    assert profile.sha256() != parse_profile(with_enroot(layer_cache=False)).sha256()


def test_an_import_plan_carries_the_default_cache_under_the_workspace() -> None:
    plan = make_plan()
    assert plan.layer_cache == f"{ROOT}/images/layer-cache"
    assert load_plan(plan.canonical_bytes()) == plan


def test_an_import_plan_carries_the_profiles_cache_and_none_when_it_is_off() -> None:
    assert make_plan(profile=with_enroot(layer_cache="/local/cache")).layer_cache == "/local/cache"
    off = make_plan(profile=with_enroot(layer_cache=False))
    assert off.layer_cache is None
    assert "layer_cache" not in json.loads(off.canonical_bytes())


def test_an_inspect_plan_uses_no_cache() -> None:
    plan = make_plan("inspect_sqsh", source="/srv/images/x.sqsh")
    assert plan.layer_cache is None
    assert "layer_cache" not in json.loads(plan.canonical_bytes())


def test_a_home_relative_cache_is_expanded_with_the_home_given() -> None:
    plan = make_plan()
    site = parse_profile(with_enroot(layer_cache="~/.cache/slurm-image"))
    derived = derive_plan(
        plan.request,
        site,
        selection_for(site),
        lifecycle_id=LIFECYCLE_ID,
        created_at=CREATED_AT,
        runtime=RUNTIME,
        home="/home/alice",
    )
    assert derived.layer_cache == "/home/alice/.cache/slurm-image"
    assert load_plan(derived.canonical_bytes()) == derived


def test_a_home_relative_cache_without_a_home_is_refused() -> None:
    plan = make_plan()
    site = parse_profile(with_enroot(layer_cache="~/cache"))
    with pytest.raises(InvalidPath) as caught:
        derive_plan(
            plan.request,
            site,
            selection_for(site),
            lifecycle_id=LIFECYCLE_ID,
            created_at=CREATED_AT,
            runtime=RUNTIME,
        )
    assert caught.value.field == "enroot.layer_cache"
    assert "home directory is unknown" in caught.value.rule


def test_a_plan_made_before_the_cache_existed_still_loads_without_one() -> None:
    plan = make_plan()
    data = plan.model_dump(mode="json")
    del data["layer_cache"]
    old = plan.model_validate(data)
    assert old.layer_cache is None
    assert load_plan(old.canonical_bytes()) == old


@pytest.mark.parametrize(
    ("enroot", "cache", "rule"),
    [
        ({"layer_cache": False}, "/x/cache", "the profile turns the layer cache off"),
        ({}, "/elsewhere/cache", "must be the profile's enroot.layer_cache"),
        ({"layer_cache": "/local/cache"}, "/other/cache", "must be the profile's"),
        ({"layer_cache": "~/cache"}, "/home/alice/other", "must be the profile's, ~ expanded"),
        ({}, "relative", "must be an absolute path"),
    ],
)
def test_a_plan_whose_cache_is_not_the_profiles_is_refused(
    enroot: dict[str, Any], cache: str, rule: str
) -> None:
    plan = make_plan()
    site = parse_profile(with_enroot(**enroot))
    data = plan.model_dump(mode="json")
    data["profile"] = site.model_dump(mode="json")
    data["profile_selection"]["profile_sha256"] = site.sha256()
    data["layer_cache"] = cache
    with pytest.raises(ValidationError) as caught:
        type(plan).model_validate(data)
    assert rule in str(caught.value)
    with pytest.raises(PlanInvariantViolation) as loaded:
        load_plan(json.dumps(data).encode())
    assert loaded.value.field == "layer_cache"


def test_the_default_bound_is_documented_in_the_domain() -> None:
    assert layer_cache.size_bytes(layer_cache.DEFAULT_MAX) == 100 << 30


@pytest.mark.parametrize(
    ("mode", "owner", "problem"),
    [
        (0o40700, 1000, None),
        (0o40750, 1000, None),
        (0o40770, 1000, "is writable by group or others without the sticky bit"),
        (0o41770, 1000, "is writable by group or others, who could plant a layer in it"),
        (0o41703, 1000, "is writable by group or others, who could plant a layer in it"),
        (0o40700, 0, "is owned by uid 0, not by uid 1000"),
        (0o40700, 4242, "is owned by uid 4242, not by uid 1000"),
    ],
)
def test_the_cache_directory_is_the_users_own_and_closed_to_others(
    mode: int, owner: int, problem: str | None
) -> None:
    assert layer_cache.directory_problem(mode, owner, 1000) == problem

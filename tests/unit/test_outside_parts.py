"""The gateway's calls to a registry and the scheduler (``gateway.outside``): each
part's limit, from ``[gateway] max_registry_calls`` and ``max_scheduler_calls``, and each
registry host's share (``max_calls_per_registry``); a call needing both parts takes both or
neither."""

from __future__ import annotations

import pytest

from slurm_image.domain.errors import Busy, InvalidProfile
from slurm_image.domain.profile import parse_profile
from slurm_image.domain.reference import registry_named
from slurm_image.gateway.outside import (
    REGISTRY,
    SCHEDULER,
    STORE,
    OutsideParts,
    parts_of_start,
)


def profile(gateway: dict[str, object]) -> dict[str, object]:
    return {
        "workspace_root": "/tmp/ws",
        "image_build": {
            "partition": "cpu",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "0:10:00",
        },
        "gateway": gateway,
    }


def test_each_part_has_a_limit_of_its_own_in_the_profile() -> None:
    settings = parse_profile(profile({"max_registry_calls": 3, "max_scheduler_calls": 5})).gateway
    assert (settings.max_registry_calls, settings.max_scheduler_calls) == (3, 5)
    defaults = parse_profile(profile({})).gateway
    assert (defaults.max_registry_calls, defaults.max_scheduler_calls) == (32, 32)
    assert defaults.max_calls_per_registry == 16


@pytest.mark.parametrize(
    ("table", "rule"),
    [
        ({"max_registry_calls": 0}, "greater than or equal to 1"),
        ({"max_scheduler_calls": 1025}, "less than or equal to 1024"),
        ({"max_registry_calls": "many"}, "integer"),
        ({"max_calls_per_registry": 0}, "greater than or equal to 1"),
    ],
)
def test_a_limit_out_of_its_bounds_is_refused_naming_it(
    table: dict[str, object], rule: str
) -> None:
    with pytest.raises(InvalidProfile) as refused:
        parse_profile(profile(table))
    assert refused.value.field == "gateway." + next(iter(table))
    assert rule in refused.value.rule


def test_past_a_parts_limit_a_call_is_refused_naming_its_setting() -> None:
    outside = OutsideParts(registry_calls=1, scheduler_calls=2)
    release = outside.take(REGISTRY)
    with pytest.raises(Busy) as refused:
        outside.take(REGISTRY)
    assert refused.value.field == "max_registry_calls"
    assert refused.value.retry_after_s >= 1
    outside.take(SCHEDULER)
    release()
    release()
    assert outside.under_way("registry") == 0 and outside.free(REGISTRY)


def test_each_registry_has_its_share_of_the_registries_calls() -> None:
    outside = OutsideParts(registry_calls=3, scheduler_calls=1, calls_per_registry=2)
    releases = [outside.take(REGISTRY, "a.example"), outside.take(REGISTRY, "a.example")]
    with pytest.raises(Busy) as refused:
        outside.take(REGISTRY, "a.example")
    assert refused.value.field == "max_calls_per_registry"
    assert "a.example has 2" in refused.value.rule
    releases.append(outside.take(REGISTRY, "b.example"))
    with pytest.raises(Busy) as refused:
        outside.take(REGISTRY, "c.example")
    assert refused.value.field == "max_registry_calls"
    for release in releases:
        release()
    assert outside.under_way("registry") == 0


def test_a_share_no_smaller_than_the_whole_is_named_as_the_whole() -> None:
    outside = OutsideParts(registry_calls=1, scheduler_calls=1, calls_per_registry=4)
    outside.take(REGISTRY, "a.example")
    with pytest.raises(Busy) as refused:
        outside.take(REGISTRY, "a.example")
    assert refused.value.field == "max_registry_calls"


def test_a_source_names_its_registry_pinned_or_by_tag() -> None:
    digest = "sha256:" + "a" * 64
    assert registry_named(f"registry.example:5000/team/app@{digest}") == "registry.example:5000"
    assert registry_named("Registry.Example/team/app:1") == "registry.example"
    assert registry_named("ubuntu:24.04") == "registry-1.docker.io"
    assert registry_named("/shared/images/app.sqsh") is None
    assert registry_named("no good@") is None


def test_a_call_needing_both_parts_takes_both_or_neither() -> None:
    outside = OutsideParts(registry_calls=2, scheduler_calls=1)
    outside.take(SCHEDULER)
    with pytest.raises(Busy) as refused:
        outside.take(REGISTRY + SCHEDULER)
    assert refused.value.field == "max_scheduler_calls"
    assert outside.under_way("registry") == 0, "the registry's slot was given back"


def test_an_import_may_ask_a_registry_and_a_submission_the_scheduler() -> None:
    assert parts_of_start("import_oci", submit=True) == REGISTRY + SCHEDULER
    assert parts_of_start("import_oci", submit=False) == REGISTRY
    assert parts_of_start("inspect_sqsh", submit=True) == SCHEDULER
    assert parts_of_start("inspect_sqsh", submit=False) == STORE

"""The gateway's calls to a registry and the scheduler (``gateway.outside``): each
part's limit, from ``[gateway] max_registry_calls`` and ``max_scheduler_calls``; a call needing
both parts takes both or neither."""

from __future__ import annotations

import pytest

from slurm_image.domain.errors import Busy, InvalidProfile
from slurm_image.domain.profile import parse_profile
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


@pytest.mark.parametrize(
    ("table", "rule"),
    [
        ({"max_registry_calls": 0}, "greater than or equal to 1"),
        ({"max_scheduler_calls": 1025}, "less than or equal to 1024"),
        ({"max_registry_calls": "many"}, "integer"),
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

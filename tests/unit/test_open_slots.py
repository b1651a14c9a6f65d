"""The gateway's open long answers (``domain.limits.Slots``): per requester and in all."""

from __future__ import annotations

import pytest

from slurm_image.domain.errors import Busy
from slurm_image.domain.limits import Slots


def test_a_requester_past_their_slots_is_refused_naming_the_limit() -> None:
    slots = Slots(per_key=2, total=10)
    slots.open(1, "alice")
    slots.open(1, "alice")
    with pytest.raises(Busy) as refused:
        slots.open(1, "alice")
    assert refused.value.field == "max_streams_per_user"
    assert "alice" in refused.value.rule and refused.value.retry_after_s >= 1
    slots.open(2, "bob")
    assert slots.in_use == 3


def test_past_the_total_everyone_is_refused_until_one_is_given_back() -> None:
    slots = Slots(per_key=5, total=2)
    slots.open(1, "alice")
    slots.open(2, "bob")
    with pytest.raises(Busy) as refused:
        slots.open(3, "carol")
    assert refused.value.field == "max_streams"
    slots.close(1)
    slots.open(3, "carol")
    assert slots.counts == {2: 1, 3: 1}
    slots.close(2)
    slots.close(3)
    assert slots.counts == {} and slots.in_use == 0

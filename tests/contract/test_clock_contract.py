"""The Clock contract (ports.clock): aware UTC times, never raising."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from slurm_image.adapters.memory import FakeClock
from slurm_image.adapters.system_clock import SystemClock
from slurm_image.ports.clock import Clock


@pytest.fixture(params=["system", "fake"])
def clock(request: pytest.FixtureRequest) -> Clock:
    return SystemClock() if request.param == "system" else FakeClock()


def test_every_adapter_is_a_clock(clock) -> None:
    assert isinstance(clock, Clock)


def test_now_is_aware_utc(clock) -> None:
    now = clock.now()
    assert now.utcoffset() == timedelta(0)
    assert now.tzinfo is not None


def test_now_does_not_run_backwards(clock) -> None:
    first = clock.now()
    assert clock.now() >= first


def test_fake_clock_is_settable_and_advanceable() -> None:
    clock = FakeClock(datetime(2024, 5, 1, 12, tzinfo=timezone(timedelta(hours=2))))
    assert clock.now() == datetime(2024, 5, 1, 10, tzinfo=UTC)
    clock.advance(timedelta(minutes=5))
    assert clock.now() == datetime(2024, 5, 1, 10, 5, tzinfo=UTC)
    clock.set(datetime(2030, 1, 1, tzinfo=UTC))
    assert clock.now().year == 2030
    with pytest.raises(ValueError):
        clock.set(datetime(2030, 1, 1))
    with pytest.raises(ValueError):
        clock.advance(timedelta(seconds=-1))

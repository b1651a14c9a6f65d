"""``FakeClock``: a settable ``Clock``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    """A ``Clock`` that stands still until it is set or advanced. Always aware UTC."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start if start is not None else datetime(2024, 1, 1, tzinfo=UTC)
        if self._now.utcoffset() is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = self._now.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def set(self, moment: datetime) -> None:
        if moment.utcoffset() is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = moment.astimezone(UTC)

    def advance(self, delta: timedelta) -> None:
        if delta < timedelta(0):
            raise ValueError("time does not run backwards")
        self._now += delta

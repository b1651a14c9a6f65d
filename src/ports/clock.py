"""The Clock port: the only source of time for use cases.

Error contract: ``now`` never raises and always returns an aware UTC datetime.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

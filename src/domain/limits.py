"""The gateway's limits (docs/gateway.md, "Limits"): the request rate, a token bucket per
requester, pure arithmetic over the times it is given; and the open long answers (``Slots``).

A requester may make ``per_minute`` requests in any minute, in bursts of up to that many; a
request past it is refused with how long to wait for the next token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from slurm_image.domain.errors import Busy


@dataclass(frozen=True)
class Bucket:
    """Tokens left at ``at`` (seconds, monotonic)."""

    tokens: float
    at: float


def take(bucket: Bucket | None, now: float, per_minute: int) -> tuple[Bucket, int | None]:
    """Take one token at ``now``: the bucket after, and None, or the bucket unchanged and the
    whole seconds until a token is there (at least 1)."""
    rate = per_minute / 60.0
    if bucket is None:
        bucket = Bucket(tokens=float(per_minute), at=now)
    tokens = min(float(per_minute), bucket.tokens + max(0.0, now - bucket.at) * rate)
    if tokens >= 1.0:
        return Bucket(tokens=tokens - 1.0, at=now), None
    return Bucket(tokens=tokens, at=now), max(1, math.ceil((1.0 - tokens) / rate))


@dataclass
class Slots:
    """How many of something one gateway holds open (log streams and long polls; connections),
    per key (a requester, a peer) and in all: ``open`` refuses one past ``per_key`` for its key
    or past ``total`` in all, naming the setting (``per_key_field``, ``total_field``); ``close``
    gives one back. Pure counting: whoever holds it serialises the calls."""

    per_key: int
    total: int
    what: str = "log streams and waits"
    per_key_field: str = "max_streams_per_user"
    total_field: str = "max_streams"
    retry_after_s: int = 5
    counts: dict[object, int] = field(default_factory=dict)

    @property
    def in_use(self) -> int:
        return sum(self.counts.values())

    def open(self, key: object, who: str) -> None:
        mine = self.counts.get(key, 0)
        if mine >= self.per_key:
            raise Busy(
                field=self.per_key_field,
                rule=f"{who} has {mine} {self.what} open, the limit is {self.per_key}",
                retry_after_s=self.retry_after_s,
            )
        if self.in_use >= self.total:
            raise Busy(
                field=self.total_field,
                rule=f"the gateway has {self.total} {self.what} open, its limit",
                retry_after_s=self.retry_after_s,
            )
        self.counts[key] = mine + 1

    def close(self, key: object) -> None:
        left = self.counts.get(key, 0) - 1
        if left > 0:
            self.counts[key] = left
        else:
            self.counts.pop(key, None)

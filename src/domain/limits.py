"""The gateway's request rate (docs/gateway.md, "Limits"): a token bucket per requester, pure
arithmetic over the times it is given.

A requester may make ``per_minute`` requests in any minute, in bursts of up to that many; a
request past it is refused with how long to wait for the next token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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

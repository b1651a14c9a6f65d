"""Shared test configuration: reproducible hypothesis profiles."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI runs derandomized so a failure reproduces from the log alone; locally examples vary.
settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")

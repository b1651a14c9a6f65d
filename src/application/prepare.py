"""Prepare a lifecycle: validate the request, derive the plan, render the script."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from domain import paths
from domain.plan import Plan, derive_plan
from domain.profile import ProfileSelection, SiteProfile
from domain.request import Request
from domain.runtime import RuntimeFiles
from domain.script import render_script
from ports.clock import Clock


def new_lifecycle_id() -> str:
    return f"{paths.LIFECYCLE_ID_PREFIX}{uuid.uuid4().hex}"


@dataclass(frozen=True)
class PlannedLifecycle:
    """A plan and its script, before anything is staged."""

    plan: Plan
    script: str


class PlanLifecycle:
    """Derive a plan and its script. Creates nothing: ``--dry-run`` is exactly this."""

    def __init__(self, clock: Clock, runtime: RuntimeFiles) -> None:
        self._clock = clock
        self._runtime = runtime

    def __call__(
        self,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        lifecycle_id: str | None = None,
    ) -> PlannedLifecycle:
        plan = derive_plan(
            request,
            profile,
            selection,
            lifecycle_id=lifecycle_id or new_lifecycle_id(),
            created_at=self._clock.now(),
            runtime=self._runtime.digests(),
        )
        return PlannedLifecycle(plan=plan, script=render_script(plan))
